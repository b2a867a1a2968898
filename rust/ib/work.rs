// SPDX-License-Identifier: GPL-2.0

//! Deferred work on oxe's own workqueue, and the packet queue the receive
//! path hands packets over with.
//!
//! Network receive is processed in softirq; what runs here is timers
//! (delayed work), flushes, packets a device sent to its own host (queued,
//! since their sender holds a QP lock the receiver may need, and drained in
//! softirq on the sender's CPU, as the network delivers a packet to this
//! host), and QP backlogs: packets left for another CPU (see `recv.rs`).
//! Each handle cancels and waits for its work when dropped, so a work
//! function never runs on a freed object; and the queue itself is destroyed
//! at module exit, after every device is gone.
//!
//! A work item points back at the object that owns it. The driver never
//! builds one by hand: it declares, with [`owns_work!`], which fields of
//! its type hold them, and starts them with [`start_work`] and
//! [`start_rx_queue`] once the object sits where it will stay (an `Arc`, or
//! a pinned box). The macro also gives the type a `Drop` that disables the
//! work (cancels it and refuses any later queueing) before any field goes,
//! whatever the fields' order.

use super::pkt::{RxPacket, SkbList};
use crate::bindings as b;
use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, SetOnce};
use kernel::types::Opaque;

/// A type whose `work_slot` is a field of its own, disabled by its `Drop`
/// before anything else of it goes. Implemented by [`owns_work!`] only.
///
/// # Safety
///
/// `work_slot` returns a field of `self`, and dropping `Self` disables the
/// work in it (cancels it, waits for a running call, and makes later
/// queueing a no-op) before dropping any field.
pub(crate) unsafe trait HasWork: WorkFn + Send + Sync + 'static {
    fn work_slot(&self) -> &SetOnce<Work>;
}

/// As [`HasWork`], for an [`RxQueue`].
///
/// # Safety
///
/// As for [`HasWork`].
pub(crate) unsafe trait HasRxQueue: Drain + Send + Sync + 'static {
    fn rx_queue_slot(&self) -> &SetOnce<RxQueue>;
}

/// Declares the fields of `$t` that hold its deferred work
/// (`work: $w` a `SetOnce<Work>`, `rx: $r` a `SetOnce<RxQueue>`, either or
/// both), and gives `$t` the `Drop` that disables them first (cancels
/// them, waits for a running call, and turns later queueing, by the other
/// one say, into nothing): a plain `Drop`, or for a
/// `#[pin_data(PinnedDrop)]` type (`pinned $t`), its `PinnedDrop`. A type
/// with a drop of its own cannot use it (the two would conflict), which
/// keeps this first, whatever the order of the fields.
macro_rules! owns_work {
    (pinned $t:ty { $(work: $w:ident)? $(, )? $(rx: $r:ident)? }) => {
        $crate::ib::work::owns_work!(@slots $t { $(work: $w)? rx: $($r)? });
        // (pinned_drop's expansion has an `unsafe` of its own, the pin
        // machinery's, which a driver file's deny would refuse.)
        #[allow(unsafe_code)]
        #[kernel::prelude::pinned_drop]
        impl PinnedDrop for $t {
            fn drop(self: Pin<&mut Self>) {
                $( if let Some(w) = self.$w.as_ref() { w.disable(); } )?
                $( if let Some(q) = self.$r.as_ref() { q.disable(); } )?
            }
        }
    };
    ($t:ty { $(work: $w:ident)? $(, )? $(rx: $r:ident)? }) => {
        $crate::ib::work::owns_work!(@slots $t { $(work: $w)? rx: $($r)? });
        impl Drop for $t {
            fn drop(&mut self) {
                $( if let Some(w) = self.$w.as_ref() { w.disable(); } )?
                $( if let Some(q) = self.$r.as_ref() { q.disable(); } )?
            }
        }
    };
    (@slots $t:ty { $(work: $w:ident)? rx: $($r:ident)? }) => {
        // `$t` must not be `Unpin`: pinned, it then stays where its work
        // items point until it is dropped. (An `Unpin` type could be moved
        // out of its `Arc` or box, leaving them pointing at the old place;
        // this fails to compile then: both impls apply, and the call is
        // ambiguous.)
        const _: () = {
            trait AmbiguousIfUnpin<A> {
                fn check() {}
            }
            impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
            struct IsUnpin;
            impl<T: ?Sized + Unpin> AmbiguousIfUnpin<IsUnpin> for T {}
            let _ = <$t as AmbiguousIfUnpin<_>>::check;
        };
        $(
            // SAFETY: the slot is a field of the object, and the drop that
            // this macro gives the object disables it before any field goes.
            #[allow(unsafe_code)]
            unsafe impl $crate::ib::work::HasWork for $t {
                fn work_slot(&self) -> &kernel::sync::SetOnce<$crate::ib::work::Work> {
                    // A raw pointer to the field itself, which no reference
                    // in the field's place could be coerced into.
                    let p: *const kernel::sync::SetOnce<$crate::ib::work::Work> =
                        core::ptr::addr_of!(self.$w);
                    // SAFETY: a field of `self`, borrowed as `self` is.
                    unsafe { &*p }
                }
            }
        )?
        $(
            // SAFETY: as above.
            #[allow(unsafe_code)]
            unsafe impl $crate::ib::work::HasRxQueue for $t {
                fn rx_queue_slot(&self) -> &kernel::sync::SetOnce<$crate::ib::work::RxQueue> {
                    // As for the work's slot.
                    let p: *const kernel::sync::SetOnce<$crate::ib::work::RxQueue> =
                        core::ptr::addr_of!(self.$r);
                    // SAFETY: a field of `self`, borrowed as `self` is.
                    unsafe { &*p }
                }
            }
        )?
    };
}
pub(crate) use owns_work;

/// An object that stays where it is until dropped: its address is what its
/// work items call back with. With `T: !Unpin` (which [`owns_work!`]
/// checks), both an `Arc` (always pinned) and a pinned reference guarantee
/// that.
///
/// # Safety
///
/// `anchor` returns the address of a live `T` that does not move until it
/// is dropped.
pub(crate) unsafe trait Anchored<T> {
    fn anchor(&self) -> *const T;
}

// SAFETY: a kernel Arc's contents are pinned.
unsafe impl<T> Anchored<T> for Arc<T> {
    fn anchor(&self) -> *const T {
        &**self
    }
}

// SAFETY: pinned, and the referent is alive while the reference is.
unsafe impl<T> Anchored<T> for Pin<&T> {
    fn anchor(&self) -> *const T {
        self.get_ref()
    }
}

/// Creates the work item of `this` (once; `EBUSY` after).
pub(crate) fn start_work<T: HasWork>(this: &impl Anchored<T>) -> Result {
    let p = this.anchor();
    // SAFETY: `p` does not move until dropped (Anchored), and the work
    // lives in its own field, cancelled before it is dropped (HasWork).
    let w = unsafe { Work::new::<T>(p) }?;
    // SAFETY: `p` is live: `this` holds it.
    unsafe { &*p }
        .work_slot()
        .populate(w)
        .then_some(())
        .ok_or(EBUSY)
}

/// Creates the packet queue of `this`, drained `on` (once; `EBUSY` after).
pub(crate) fn start_rx_queue<T: HasRxQueue>(this: &impl Anchored<T>, on: DrainOn) -> Result {
    let p = this.anchor();
    // SAFETY: as in `start_work`.
    let q = unsafe { RxQueue::new::<T>(p, on) }?;
    // SAFETY: `p` is live: `this` holds it.
    unsafe { &*p }
        .rx_queue_slot()
        .populate(q)
        .then_some(())
        .ok_or(EBUSY)
}

/// oxe's three workqueues: an unbound one, a per-CPU one for work that
/// must run on a CPU of our choosing (a QP's home, a steered queue's CPU),
/// and a BH one, whose work runs in softirq on the CPU that queued it (a
/// device's loopback queue). Set once at module init, cleared at exit,
/// after every device is gone.
static UNBOUND: AtomicPtr<b::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());
static PER_CPU: AtomicPtr<b::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());
static BH: AtomicPtr<b::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());

/// Creates oxe's workqueues; module init.
pub(crate) fn init() -> Result {
    let alloc = |name: &CStr, flags: u32| {
        // SAFETY: a format with one string argument, a static name; plain
        // allocation (NULL on failure).
        NonNull::new(unsafe {
            b::alloc_workqueue_noprof(c"%s".as_char_ptr(), flags, 0, name.as_char_ptr())
        })
        .ok_or(ENOMEM)
    };
    let queues = [
        (
            &UNBOUND,
            c"oxe",
            b::wq_flags_WQ_UNBOUND | b::wq_flags_WQ_HIGHPRI,
        ),
        (
            &PER_CPU,
            c"oxe_cpu",
            b::wq_flags_WQ_PERCPU | b::wq_flags_WQ_HIGHPRI,
        ),
        // A BH queue takes no max_active, and of the flags only these and
        // WQ_HIGHPRI (which would run it from HI_SOFTIRQ, ahead of the
        // network's receive).
        (&BH, c"oxe_bh", b::wq_flags_WQ_BH | b::wq_flags_WQ_PERCPU),
    ];
    for (slot, name, flags) in queues {
        match alloc(name, flags) {
            Ok(q) => slot.store(q.as_ptr(), Ordering::Release),
            Err(e) => {
                exit();
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Destroys the workqueues (draining them); module exit, after every device.
pub(crate) fn exit() {
    for q in [&BH, &PER_CPU, &UNBOUND] {
        let q = q.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !q.is_null() {
            // SAFETY: created by `init`; every work handle has been dropped
            // (so cancelled) by now, and nothing queues any more.
            unsafe { b::destroy_workqueue(q) };
        }
    }
}

/// The workqueue `q` (set between module init and exit, when work exists).
fn wq(q: &AtomicPtr<b::workqueue_struct>) -> *mut b::workqueue_struct {
    q.load(Ordering::Acquire)
}

/// The unbound workqueue, for deferred C work of `ib/` (a umem release
/// from atomic context): drained at module exit like the rest.
pub(super) fn unbound_wq() -> *mut b::workqueue_struct {
    wq(&UNBOUND)
}

/// The CPU this runs on (it may move right after: only a hint).
fn this_cpu() -> i32 {
    // SAFETY: reads the current CPU number.
    unsafe { b::raw_smp_processor_id() as i32 }
}

/// The next online CPU after `cpu` (the first after the last), or `cpu`
/// when it is alone. A CPU that goes offline meanwhile is harmless: work
/// queued on it runs on some other CPU.
fn cpu_after(cpu: i32) -> i32 {
    let next = |from: i32| {
        // SAFETY: reads the online mask, an array of `nr_cpu_ids` bits
        // (cpumask_next() is an inline function).
        let (bit, n) = unsafe {
            let n = b::nr_cpu_ids as usize;
            let bits = core::ptr::addr_of!(b::__cpu_online_mask.bits).cast();
            (b::_find_next_bit(bits, n, from as usize), n)
        };
        (bit < n).then_some(bit as i32)
    };
    next(cpu + 1).or_else(|| next(0)).unwrap_or(cpu)
}

/// The current time in jiffies.
pub(crate) fn jiffies() -> u64 {
    // SAFETY: a volatile read of the counter the timer interrupt updates,
    // as `get_jiffies_64()` (one load on 64-bit).
    unsafe { core::ptr::addr_of!(b::jiffies_64).read_volatile() }
}

/// Microseconds as jiffies (rounded up).
pub(crate) fn usecs_to_jiffies(us: u64) -> u64 {
    // (usecs_to_jiffies takes an unsigned int: longer waits are clamped.)
    let us = u32::try_from(us).unwrap_or(u32::MAX);
    // SAFETY: pure conversion.
    unsafe { b::__usecs_to_jiffies(us) as u64 }
}

/// Something a [`Work`] runs.
pub(crate) trait WorkFn: Sync {
    /// The deferred call; process context.
    fn run(&self);
}

/// The memory of a [`Work`]: the kernel's delayed work first, so that its
/// `work_struct` is the cell's address.
#[repr(C)]
struct WorkCell {
    dw: Opaque<b::delayed_work>,
    /// The object the work runs on (a `T: WorkFn`).
    ctx: *const c_void,
    /// The CPU the work runs on.
    cpu: AtomicI32,
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn run_work<T: WorkFn>(work: *mut b::work_struct) {
    let cell = work.cast::<WorkCell>();
    // SAFETY: `work` is the first field of the delayed work, itself the
    // first of a live WorkCell (dropping the Work cancels and waits), whose
    // `ctx` is a `T` that outlives the Work (Work::new's contract).
    unsafe { &*(*cell).ctx.cast::<T>() }.run();
}

/// A deferred call of `T::run` on one object, on its home CPU.
///
/// # Invariants
///
/// `self.0`'s delayed work is initialized, runs `run_work::<T>` on the `T`
/// given to `new`, and is cancelled before the cell is freed.
pub(crate) struct Work(Pin<KBox<WorkCell>>);

// SAFETY: the delayed work is internally synchronized (workqueue API); the
// context is only handed to `T::run` (T: Sync).
unsafe impl Send for Work {}
// SAFETY: as above.
unsafe impl Sync for Work {}

impl Work {
    /// A work item that calls `ctx.run()`, at first on the calling CPU.
    ///
    /// # Safety
    ///
    /// `ctx` must stay valid until the returned `Work` is dropped (the
    /// `Work` is a field of `*ctx`, whose drop cancels it first, and `ctx`
    /// does not move: see [`start_work`]).
    unsafe fn new<T: WorkFn>(ctx: *const T) -> Result<Self> {
        let cell = KBox::pin(
            WorkCell {
                dw: Opaque::uninit(),
                ctx: ctx.cast(),
                cpu: AtomicI32::new(this_cpu()),
            },
            GFP_KERNEL,
        )?;
        let dw = cell.dw.get();
        // SAFETY: the delayed work is pinned in the box and not in use yet;
        // this is INIT_DELAYED_WORK (a macro): its timer queues the work
        // from irq context, as `delayed_work_timer_fn` expects.
        unsafe {
            b::init_work_with_key(
                core::ptr::addr_of_mut!((*dw).work),
                Some(run_work::<T>),
                false,
                c"oxe_work".as_char_ptr(),
                kernel::static_lock_class!().as_ptr(),
            );
            b::timer_init_key(
                core::ptr::addr_of_mut!((*dw).timer),
                Some(b::delayed_work_timer_fn),
                b::TIMER_IRQSAFE,
                c"oxe_work_timer".as_char_ptr(),
                kernel::static_lock_class!().as_ptr(),
            );
        }
        Ok(Work(cell))
    }

    fn dw(&self) -> *mut b::delayed_work {
        self.0.dw.get()
    }

    /// Runs the work soon (again, if it is running now). Any context.
    pub(crate) fn queue(&self) {
        let cpu = self.0.cpu.load(Ordering::Relaxed);
        // SAFETY: an initialized delayed work (type invariant) on our
        // per-CPU queue, which exists while work does.
        unsafe { b::mod_delayed_work_on(cpu, wq(&PER_CPU), self.dw(), 0) };
    }

    /// Runs the work after `delay` jiffies, unless it is due sooner anyway.
    pub(crate) fn queue_after(&self, delay: u64) {
        let cpu = self.0.cpu.load(Ordering::Relaxed);
        // SAFETY: as in `queue`.
        unsafe { b::queue_delayed_work_on(cpu, wq(&PER_CPU), self.dw(), delay as usize) };
    }

    /// Makes `cpu` the one the work runs on.
    pub(crate) fn home_on(&self, cpu: i32) {
        self.0.cpu.store(cpu, Ordering::Relaxed);
    }

    /// Makes the calling CPU the one the work runs on (at first, the CPU
    /// that created it). Everything a QP sends from process context then
    /// leaves from one CPU: packets sent from two CPUs land on two receive
    /// backlogs, and the peer may take them out of order.
    pub(crate) fn home_here(&self) {
        // Written only when it moves: called at every doorbell, and read
        // by whoever queues the work, from either CPU.
        let cpu = this_cpu();
        if self.0.cpu.load(Ordering::Relaxed) != cpu {
            self.0.cpu.store(cpu, Ordering::Relaxed);
        }
    }

    /// Cancels the work and waits for a running call; it may be queued
    /// again afterwards.
    pub(crate) fn cancel(&self) {
        // SAFETY: an initialized delayed work (type invariant).
        unsafe { b::cancel_delayed_work_sync(self.dw()) };
    }

    /// Cancels the work, waits for a running call, and makes every later
    /// queueing a no-op: for its owner's drop.
    pub(crate) fn disable(&self) {
        // SAFETY: an initialized delayed work (type invariant).
        unsafe { b::disable_delayed_work_sync(self.dw()) };
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // Before the cell goes (type invariant).
        self.disable();
    }
}

/// What drains an [`RxQueue`].
pub(crate) trait Drain: Sync {
    /// Processes queued packets (process context, or softirq for a queue
    /// drained [`DrainOn::Softirq`]); returns whether some are left, and
    /// the drain then runs again after other work had a turn.
    fn drain(&self) -> bool;
}

/// Where an [`RxQueue`] is drained.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainOn {
    /// Another CPU than the one that pushed the packet: the receive
    /// softirq of a packet sent on this host runs on the sender's CPU, and
    /// a long transfer then keeps one CPU busy with both of its ends. A
    /// queue already being drained stays on its CPU, so its packets are
    /// processed in order.
    OtherCpu,
    /// In softirq, on the CPU that pushed the packet, once it lets
    /// softirqs run (oxe's BH workqueue): how the network delivers a packet
    /// sent to this host, without waking a kworker for each one. A queue
    /// already queued or being drained stays on its CPU, as above. The
    /// drain must bound its run: a softirq must not hog its CPU.
    Softirq,
}

impl DrainOn {
    /// The workqueue, and the CPU on it, for a drain queued from this CPU
    /// (`here`: a steered queue stays on this CPU).
    fn target(self, here: bool) -> (*mut b::workqueue_struct, i32) {
        let local = b::wq_misc_consts_WORK_CPU_UNBOUND as i32;
        match self {
            DrainOn::OtherCpu if here => (wq(&PER_CPU), local),
            DrainOn::OtherCpu => (wq(&PER_CPU), cpu_after(this_cpu())),
            // WORK_CPU_UNBOUND on a per-CPU (BH) queue is the local CPU.
            DrainOn::Softirq => (wq(&BH), local),
        }
    }
}

/// The memory of an [`RxQueue`]: the work first, so that its address is
/// the cell's.
#[repr(C)]
struct RxCell {
    work: Opaque<b::work_struct>,
    /// Moves a busy steered drain to the CPU it should be on (`run_hop`).
    hop: Opaque<b::work_struct>,
    /// The CPU a steered queue's last packet asked to be drained on (the
    /// one after its pusher's), or -1.
    want: AtomicI32,
    /// The CPU the drain last ran on, or -1: where a packet pushed with
    /// [`RxQueue::push_sticky`] asks for it.
    last: AtomicI32,
    /// The object that drains the queue (a `T: Drain`).
    ctx: *const c_void,
    on: DrainOn,
    skbs: SkbList,
}

impl RxCell {
    /// Queues the drain. A work item already queued or running keeps its
    /// CPU (the workqueue never runs one item on two CPUs at once), so a
    /// queue is drained in order, by one CPU at a time.
    fn kick(&self) {
        let (q, cpu) = self.on.target(false);
        // SAFETY: an initialized work (RxQueue invariant) on one of our
        // queues, which exist while work does.
        unsafe { b::queue_work_on(cpu, q, self.work.get()) };
    }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn run_drain<T: Drain>(work: *mut b::work_struct) {
    // SAFETY: `work` is the first field of a live RxCell (dropping the
    // queue cancels and waits), whose `ctx` is a `T` that outlives it
    // (RxQueue::new's contract).
    let cell = unsafe { &*work.cast::<RxCell>() };
    cell.last.store(this_cpu(), Ordering::Relaxed);
    // SAFETY: as above.
    if !unsafe { &*cell.ctx.cast::<T>() }.drain() {
        return;
    }
    // A steered queue whose packets now come from this CPU is on the wrong
    // one: the drain shares its CPU with their sender, which is what
    // steering is for avoiding. Queued again from here it would stay here
    // (the workqueue keeps a running item on its CPU, and a queue that
    // never empties is always running or queued): in `ib_read_bw`, after
    // the application moved between CPUs, the responder's drain and the
    // requester's ended up on one CPU for the rest of the run, and the
    // other ran only the application's polling, at half the throughput.
    // The hop, queued on the wanted CPU, queues the drain there once this
    // run has returned.
    let want = cell.want.load(Ordering::Relaxed);
    if cell.on == DrainOn::OtherCpu && want >= 0 && want != this_cpu() {
        // SAFETY: an initialized work in the live cell (RxQueue
        // invariant), on our per-CPU queue, which exists while work does.
        unsafe { b::queue_work_on(want, wq(&PER_CPU), cell.hop.get()) };
        return;
    }
    // Again after other work had a turn; from this CPU, so a steered
    // queue stays where it is being drained.
    let (q, cpu) = cell.on.target(true);
    // SAFETY: as in `RxCell::kick`.
    unsafe { b::queue_work_on(cpu, q, work) };
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn run_hop(hop: *mut b::work_struct) {
    // SAFETY: `hop` is the `hop` field of a live RxCell (dropping the
    // queue disables and waits for both works).
    let cell = unsafe {
        &*hop
            .cast::<u8>()
            .sub(core::mem::offset_of!(RxCell, hop))
            .cast::<RxCell>()
    };
    // On this CPU, unless the drain is still running where it was (then
    // the workqueue keeps it there, and its next run tries again).
    let (q, cpu) = cell.on.target(true);
    // SAFETY: as in `RxCell::kick`.
    unsafe { b::queue_work_on(cpu, q, cell.work.get()) };
}

/// Packets handed over by the receive path, drained by `T::drain` where
/// the queue's [`DrainOn`] says.
///
/// # Invariants
///
/// `self.0`'s works are initialized, `work` runs `run_drain::<T>` on the
/// `T` given to `new` and `hop` runs `run_hop`, and both are cancelled
/// before the cell is freed.
pub(crate) struct RxQueue(Pin<KBox<RxCell>>);

// SAFETY: the skb list has its own lock; the work item is workqueue-safe;
// the context is only handed to `T::drain` (T: Sync).
unsafe impl Send for RxQueue {}
// SAFETY: as above.
unsafe impl Sync for RxQueue {}

impl RxQueue {
    /// # Safety
    ///
    /// As for [`Work::new`].
    unsafe fn new<T: Drain>(ctx: *const T, on: DrainOn) -> Result<Self> {
        let cell = KBox::pin(
            RxCell {
                work: Opaque::uninit(),
                hop: Opaque::uninit(),
                want: AtomicI32::new(-1),
                last: AtomicI32::new(-1),
                ctx: ctx.cast(),
                on,
                skbs: SkbList::new()?,
            },
            GFP_KERNEL,
        )?;
        // Lockdep watches a work item as a lock, one class per place it is
        // initialized: a queue drained in softirq and one drained with
        // softirqs on need a class each, or the class looks taken both ways.
        let (name, class) = match on {
            DrainOn::Softirq => (c"oxe_loopback_queue", kernel::static_lock_class!()),
            DrainOn::OtherCpu => (c"oxe_rx_queue", kernel::static_lock_class!()),
        };
        // SAFETY: the two works are pinned in the box and not in use yet
        // (INIT_WORK).
        unsafe {
            b::init_work_with_key(
                cell.work.get(),
                Some(run_drain::<T>),
                false,
                name.as_char_ptr(),
                class.as_ptr(),
            );
            b::init_work_with_key(
                cell.hop.get(),
                Some(run_hop),
                false,
                c"oxe_rx_queue_hop".as_char_ptr(),
                kernel::static_lock_class!().as_ptr(),
            );
        };
        Ok(RxQueue(cell))
    }

    /// Queues a packet and schedules the drain. Any context.
    pub(crate) fn push(&self, pkt: RxPacket) {
        // SAFETY: the packet's skb, ours to give.
        unsafe { self.0.skbs.push(pkt.into_raw()) };
        if self.0.on == DrainOn::OtherCpu {
            self.0.want.store(cpu_after(this_cpu()), Ordering::Relaxed);
        }
        self.0.kick();
    }

    /// Queues a packet whose sender is not the one busy with what it asks
    /// for (an RDMA READ request: the responder does the copying), and
    /// schedules the drain on the CPU it last ran on, wherever the packet
    /// came from.
    ///
    /// Steered away from its sender, a READ request's drain would follow
    /// the requesting application from CPU to CPU: each time the scheduler
    /// moves the application (onto the CPU the responder's drain left idle
    /// for a moment), the responder's drain moves away from it, and the
    /// requester's drain, steered away from the responses' CPU, moves after
    /// it, and a READ stream slows down. Left where it
    /// is, the responder's drain stays put, the requester's drain with it
    /// (its packets keep coming from one CPU), and only the application
    /// moves. A stream's data is still steered: a sender busy copying and
    /// checksumming its packets is what the drain must not share a CPU
    /// with (docs/data-path.md; the figures are in docs/history.md).
    pub(crate) fn push_sticky(&self, pkt: RxPacket) {
        // A queue drained in softirq runs on its pusher's CPU, on the BH
        // queue: nothing to keep.
        if self.0.on != DrainOn::OtherCpu {
            self.push(pkt);
            return;
        }
        // SAFETY: the packet's skb, ours to give.
        unsafe { self.0.skbs.push(pkt.into_raw()) };
        let last = self.0.last.load(Ordering::Relaxed);
        let cpu = if last >= 0 {
            last
        } else {
            cpu_after(this_cpu())
        };
        self.0.want.store(cpu, Ordering::Relaxed);
        // SAFETY: as in `RxCell::kick`.
        unsafe { b::queue_work_on(cpu, wq(&PER_CPU), self.0.work.get()) };
    }

    /// Puts back, first in line, a packet its drain took and has not
    /// finished with (a GSO packet queued whole, some of whose segments
    /// are left): only the drain takes from the queue, so its next run
    /// finds the packet first.
    pub(crate) fn push_front(&self, pkt: RxPacket) {
        // SAFETY: the packet's skb, ours to give.
        unsafe { self.0.skbs.push_front(pkt.into_raw()) };
    }

    /// Schedules the drain without a packet: it has work of its own left
    /// (a READ being answered in bursts).
    pub(crate) fn kick(&self) {
        self.0.kick();
    }

    /// The next queued packet.
    pub(crate) fn pop(&self) -> Option<RxPacket> {
        // SAFETY: the list holds only received packets, now ours.
        unsafe { RxPacket::from_raw(self.0.skbs.pop()) }
    }

    /// Cancels the drain and waits for a running one; packets still queued
    /// stay until the queue is dropped.
    pub(crate) fn cancel(&self) {
        // The drain may queue the hop and the hop the drain: the drain
        // once more after the hop, which only a push queues again.
        for w in [&self.0.work, &self.0.hop, &self.0.work] {
            // SAFETY: an initialized work (type invariant).
            unsafe { b::cancel_work_sync(w.get()) };
        }
    }

    /// As `cancel`, and every later kick is a no-op: for its owner's drop.
    pub(crate) fn disable(&self) {
        // The drain first: a hop that runs after it queues nothing.
        for w in [&self.0.work, &self.0.hop] {
            // SAFETY: an initialized work (type invariant).
            unsafe { b::disable_work_sync(w.get()) };
        }
    }
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        // Before the cell (and what is queued) goes (type invariant).
        self.disable();
    }
}
