// SPDX-License-Identifier: GPL-2.0

//! Deferred work on oxe's own workqueue, and the packet queue the receive
//! path hands packets over with.
//!
//! Network receive is processed in softirq; what runs here is timers
//! (delayed work), flushes, packets a device sent to its own host
//! (queued, since their sender holds a QP lock the receiver may need), and
//! QP backlogs: packets left for another CPU (see `recv.rs`).
//! Each handle cancels and waits for its work when dropped, so a work
//! function never runs on a freed object; and the queue itself is destroyed
//! at module exit, after every device is gone.
//!
//! A work item points back at the object that owns it. The driver never
//! builds one by hand: it declares, with [`owns_work!`], which fields of
//! its type hold them, and starts them with [`start_work`] and
//! [`start_rx_queue`] once the object sits where it will stay (an `Arc`, or
//! a pinned box). The macro also gives the type a `Drop` that cancels the
//! work before any field goes, whatever the fields' order.

use super::pkt::RxPacket;
use crate::bindings as b;
use core::ffi::c_void;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::{Arc, SetOnce};

/// A type whose `work_slot` is a field of its own, cancelled by its `Drop`
/// before anything else of it goes. Implemented by [`owns_work!`] only.
///
/// # Safety
///
/// `work_slot` returns a field of `self`, and dropping `Self` cancels the
/// work in it (and waits for a running call) before dropping any field.
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
/// both), and gives `$t` the `Drop` that cancels them first: a plain
/// `Drop`, or for a `#[pin_data(PinnedDrop)]` type (`pinned $t`), its
/// `PinnedDrop`. A type with a drop of its own cannot use it (the two would
/// conflict), which keeps the cancellation first.
macro_rules! owns_work {
    (pinned $t:ty { $(work: $w:ident)? $(, )? $(rx: $r:ident)? }) => {
        $crate::ib::work::owns_work!(@slots $t { $(work: $w)? rx: $($r)? });
        // (pinned_drop's expansion has an `unsafe` of its own, the pin
        // machinery's, which a driver file's deny would refuse.)
        #[allow(unsafe_code)]
        #[kernel::prelude::pinned_drop]
        impl PinnedDrop for $t {
            fn drop(self: Pin<&mut Self>) {
                $( if let Some(w) = self.$w.as_ref() { w.cancel(); } )?
                $( if let Some(q) = self.$r.as_ref() { q.cancel(); } )?
            }
        }
    };
    ($t:ty { $(work: $w:ident)? $(, )? $(rx: $r:ident)? }) => {
        $crate::ib::work::owns_work!(@slots $t { $(work: $w)? rx: $($r)? });
        impl Drop for $t {
            fn drop(&mut self) {
                $( if let Some(w) = self.$w.as_ref() { w.cancel(); } )?
                $( if let Some(q) = self.$r.as_ref() { q.cancel(); } )?
            }
        }
    };
    (@slots $t:ty { $(work: $w:ident)? rx: $($r:ident)? }) => {
        $(
            // SAFETY: the slot is a field of the object, and the drop that
            // this macro gives the object cancels it before any field goes.
            #[allow(unsafe_code)]
            unsafe impl $crate::ib::work::HasWork for $t {
                fn work_slot(&self) -> &kernel::sync::SetOnce<$crate::ib::work::Work> {
                    &self.$w
                }
            }
        )?
        $(
            // SAFETY: as above.
            #[allow(unsafe_code)]
            unsafe impl $crate::ib::work::HasRxQueue for $t {
                fn rx_queue_slot(&self) -> &kernel::sync::SetOnce<$crate::ib::work::RxQueue> {
                    &self.$r
                }
            }
        )?
    };
}
pub(crate) use owns_work;

/// An object that stays where it is until dropped: its address is what its
/// work items call back with.
pub(crate) trait Anchored<T> {
    fn anchor(&self) -> *const T;
}

impl<T> Anchored<T> for Arc<T> {
    fn anchor(&self) -> *const T {
        // A kernel Arc never moves its contents (it has no get_mut).
        &**self
    }
}

impl<T> Anchored<T> for Pin<&T> {
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

/// Creates oxe's workqueue; module init.
pub(crate) fn init() -> Result {
    // SAFETY: called once from module init.
    let ret = unsafe { b::oxe_shim_wq_init() };
    if ret != 0 {
        return Err(Error::from_errno(ret));
    }
    Ok(())
}

/// Destroys the workqueue (draining it); module exit, after every device.
pub(crate) fn exit() {
    // SAFETY: called once from module exit, after `init` succeeded; every
    // work handle has been dropped (so cancelled) by then.
    unsafe { b::oxe_shim_wq_exit() };
}

/// The current time in jiffies.
pub(crate) fn jiffies() -> u64 {
    // SAFETY: reads the jiffies counter.
    unsafe { b::oxe_shim_jiffies64() }
}

/// Microseconds as jiffies (rounded up).
pub(crate) fn usecs_to_jiffies(us: u64) -> u64 {
    // SAFETY: pure conversion.
    unsafe { b::oxe_shim_usecs_to_jiffies(us) as u64 }
}

/// Something a [`Work`] runs.
pub(crate) trait WorkFn: Sync {
    /// The deferred call; process context.
    fn run(&self);
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn work_tramp<T: WorkFn>(ctx: *mut c_void) {
    // SAFETY: `ctx` is the `T` the Work was created for, which (Work's
    // contract) outlives the work: dropping the Work cancels and waits.
    unsafe { &*ctx.cast::<T>() }.run();
}

/// A deferred call of `T::run` on one object, on its home CPU.
///
/// # Invariants
///
/// `self.0` is a live `oxe_work` whose context is the `T` given to `new`.
pub(crate) struct Work(NonNull<b::oxe_work>);

// SAFETY: the C work item is internally synchronized (workqueue API).
unsafe impl Send for Work {}
// SAFETY: as above.
unsafe impl Sync for Work {}

impl Work {
    /// A work item that calls `ctx.run()`.
    ///
    /// # Safety
    ///
    /// `ctx` must stay valid until the returned `Work` is dropped (typically:
    /// the `Work` is a field of `*ctx`, declared before anything `run` uses,
    /// and `ctx` does not move).
    unsafe fn new<T: WorkFn>(ctx: *const T) -> Result<Self> {
        // SAFETY: the trampoline matches `T`; the context contract is the caller's.
        let w = unsafe { b::oxe_shim_work_new(Some(work_tramp::<T>), ctx.cast_mut().cast()) };
        NonNull::new(w).map(Work).ok_or(ENOMEM)
    }

    /// Runs the work soon (again, if it is running now). Any context.
    pub(crate) fn queue(&self) {
        // SAFETY: live work (type invariant).
        unsafe { b::oxe_shim_work_queue(self.0.as_ptr()) };
    }

    /// Runs the work after `delay` jiffies, unless it is due sooner anyway.
    pub(crate) fn queue_after(&self, delay: u64) {
        // SAFETY: live work (type invariant).
        unsafe { b::oxe_shim_work_queue_after(self.0.as_ptr(), delay as kernel::ffi::c_ulong) };
    }
}

impl Work {
    /// Makes the calling CPU the one the work runs on (at first, the CPU
    /// that created it). Everything a QP sends from process context then
    /// leaves from one CPU: packets sent from two CPUs land on two receive
    /// backlogs, and the peer may take them out of order.
    pub(crate) fn home_here(&self) {
        // SAFETY: live work (type invariant).
        unsafe { b::oxe_shim_work_home_here(self.0.as_ptr()) };
    }

    /// Cancels the work and waits for a running call; it may be queued
    /// again afterwards.
    pub(crate) fn cancel(&self) {
        // SAFETY: live work (type invariant).
        unsafe { b::oxe_shim_work_cancel(self.0.as_ptr()) };
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // SAFETY: live work; cancels, waits for a running call, frees.
        unsafe { b::oxe_shim_work_free(self.0.as_ptr()) };
    }
}

/// What drains an [`RxQueue`].
pub(crate) trait Drain: Sync {
    /// Processes queued packets (process context); returns whether some are
    /// left, and the drain then runs again after other work had a turn.
    fn drain(&self) -> bool;
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn drain_tramp<T: Drain>(ctx: *mut c_void) -> bool {
    // SAFETY: `ctx` is the `T` the queue was created for, which (RxQueue's
    // contract) outlives it: dropping the queue cancels and waits.
    unsafe { &*ctx.cast::<T>() }.drain()
}

/// Where an [`RxQueue`] is drained.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainOn {
    /// Any CPU (oxe's unbound workqueue).
    AnyCpu,
    /// Another CPU than the one that pushed the packet: the receive
    /// softirq of a packet sent on this host runs on the sender's CPU, and
    /// a long transfer then keeps one CPU busy with both of its ends. A
    /// queue already being drained stays on its CPU, so its packets are
    /// processed in order.
    OtherCpu,
}

/// Packets from softirq receive, drained in process context by `T::drain`.
///
/// # Invariants
///
/// `self.0` is a live `oxe_rxq` whose context is the `T` given to `new`.
pub(crate) struct RxQueue(NonNull<b::oxe_rxq>);

// SAFETY: the skb queue has its own lock; the work item is workqueue-safe.
unsafe impl Send for RxQueue {}
// SAFETY: as above.
unsafe impl Sync for RxQueue {}

impl RxQueue {
    /// # Safety
    ///
    /// As for [`Work::new`].
    unsafe fn new<T: Drain>(ctx: *const T, on: DrainOn) -> Result<Self> {
        // SAFETY: the trampoline matches `T`; the context contract is the caller's.
        let q = unsafe {
            b::oxe_shim_rxq_new(
                Some(drain_tramp::<T>),
                ctx.cast_mut().cast(),
                on == DrainOn::OtherCpu,
            )
        };
        NonNull::new(q).map(RxQueue).ok_or(ENOMEM)
    }

    /// Queues a packet and schedules the drain. Any context.
    pub(crate) fn push(&self, pkt: RxPacket) {
        // SAFETY: live queue; the queue takes ownership of the skb.
        unsafe { b::oxe_shim_rxq_push(self.0.as_ptr(), pkt.into_raw()) };
    }

    /// Schedules the drain without a packet: it has work of its own left
    /// (a READ being answered in bursts).
    pub(crate) fn kick(&self) {
        // SAFETY: live queue (type invariant).
        unsafe { b::oxe_shim_rxq_kick(self.0.as_ptr()) };
    }

    /// The next queued packet.
    pub(crate) fn pop(&self) -> Option<RxPacket> {
        // SAFETY: live queue; a dequeued skb is ours.
        let skb = unsafe { b::oxe_shim_rxq_pop(self.0.as_ptr()) };
        // SAFETY: an skb we own.
        unsafe { RxPacket::from_raw(skb) }
    }

    /// Cancels the drain and waits for a running one; packets still queued
    /// stay until the queue is dropped.
    pub(crate) fn cancel(&self) {
        // SAFETY: live queue (type invariant).
        unsafe { b::oxe_shim_rxq_cancel(self.0.as_ptr()) };
    }
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        // SAFETY: live queue; cancels and waits for the drain, frees what is queued.
        unsafe { b::oxe_shim_rxq_free(self.0.as_ptr()) };
    }
}
