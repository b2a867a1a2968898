// SPDX-License-Identifier: GPL-2.0

//! Locks for state the receive path shares with process context.
//!
//! Packets are processed in the softirq that received them, as rxe does:
//! a trip through a workqueue per packet was most of a small message's
//! latency. So QP, CQ, SRQ and MR state sits behind spinlocks that hold off
//! softirqs (`spin_lock_bh`): a process-context holder cannot then be
//! interrupted on its own CPU by a receive that wants the same lock. The
//! kernel crate has plain and irq-disabling spinlocks; this adds the `_bh`
//! flavour as a lock backend, so guards and lockdep work as for the others.
//!
//! Nothing may sleep under these locks, and the requester transmits under
//! them: `spin_unlock_bh` then runs the softirqs the transmit raised, so a
//! doorbell can carry a message to a peer on this host and back before the
//! system call returns.

use crate::bindings as b;
use core::cell::UnsafeCell;
use kernel::prelude::*;
use kernel::sync::lock::spinlock::SpinLockIrqBackend;
use kernel::sync::lock::{Backend, Guard, Lock};
use kernel::sync::SpinLockIrq;

/// A spinlock taken with softirqs held off.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// The `spin_lock_bh` backend of [`SpinLockBh`].
pub(crate) struct SpinLockBhBackend;

// SAFETY: spinlock_t gives mutual exclusion; lock and unlock are paired by the
// guard, and the relock default calls `lock` again, as for SpinLock.
unsafe impl Backend for SpinLockBhBackend {
    type State = b::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut b::lock_class_key,
    ) {
        // SAFETY: the caller passes writable lock memory and static name/key.
        unsafe { b::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: an initialised lock (the trait's contract), whose raw lock
        // is its first member (`raw`).
        unsafe { b::_raw_spin_lock_bh(raw(ptr)) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock (the trait's contract).
        unsafe { b::_raw_spin_unlock_bh(raw(ptr)) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: an initialised lock (the trait's contract).
        (unsafe { b::_raw_spin_trylock_bh(raw(ptr)) } != 0).then_some(())
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: an initialised lock (the trait's contract).
        unsafe { b::spin_assert_is_held(ptr) }
    }
}

// `spin_lock_bh()` and friends are macros over the `_raw_` functions; on
// PREEMPT_RT a spinlock_t is an rtmutex instead.
#[cfg(CONFIG_PREEMPT_RT)]
compile_error!("oxe's _bh spinlock is the raw spinlock of a non-RT kernel");

/// The raw spinlock inside `lock`: outside PREEMPT_RT a `spinlock_t` is a
/// union whose first member is it (the kernel crate binds the type opaque).
fn raw(lock: *mut b::spinlock_t) -> *mut b::raw_spinlock_t {
    lock.cast()
}

/// A [`SpinLockBh`] initialiser with its own lock class (one per call site).
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        kernel::sync::lock::Lock::<_, $crate::ib::lock::SpinLockBhBackend>::new(
            $inner,
            kernel::optional_name!($($name)?),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// Softirqs held off on this CPU while it lives: for locks that are not
/// `_bh` themselves (an XArray's) but are also taken by the receive path.
pub(crate) struct BhOff(core::marker::PhantomData<*mut ()>);

impl BhOff {
    pub(crate) fn new() -> Self {
        // SAFETY: paired with the enable in `drop`, on the same CPU (the
        // guard is neither Send nor moved across a sleep: nothing may sleep
        // with softirqs off).
        unsafe { b::oxe_shim_local_bh_disable() };
        BhOff(core::marker::PhantomData)
    }
}

impl Drop for BhOff {
    fn drop(&mut self) {
        // SAFETY: balances `new`.
        unsafe { b::oxe_shim_local_bh_enable() };
    }
}

/// Returns once every receive that was running in softirq has finished:
/// after an object leaves its table, no softirq still holds it, so its last
/// reference is dropped in process context, where dropping may sleep.
pub(crate) fn wait_for_receivers() {
    // SAFETY: process context (callers are verbs that may sleep).
    unsafe { b::synchronize_rcu() }
}

/// A value two locks guard together: either lock alone gives shared access
/// to it, both together exclusive access.
///
/// This is a queue's ring: its two ends each have a lock of their own, for
/// the index that end owns (the receive path's end behind a `_bh` lock,
/// kernel consumers' end behind an irq-disabling one, since they may come
/// with interrupts off), and either end reads and writes slots through a
/// shared reference to the ring. A resize ([`DualLock::stepwise`]) holds
/// the `_bh` end throughout and takes the irq end for each step of its
/// copy, and only then changes the ring; the ends themselves pay nothing
/// extra. Both are taken `_bh` first: releasing the irq lock first then
/// leaves interrupts on when softirqs are re-enabled.
#[pin_data]
pub(crate) struct DualLock<B, I, T> {
    #[pin]
    bh: SpinLockBh<B>,
    #[pin]
    irq: SpinLockIrq<I>,
    shared: UnsafeCell<T>,
}

// SAFETY: `shared` is reached as `&T` by holders of either lock, possibly at
// once on several CPUs (hence `T: Sync`), and as `&mut T` (so moved, hence
// `T: Send`) only with both held; the two lock-guarded values are `Send` as
// the locks require.
unsafe impl<B: Send, I: Send, T: Send + Sync> Send for DualLock<B, I, T> {}
// SAFETY: as above.
unsafe impl<B: Send, I: Send, T: Send + Sync> Sync for DualLock<B, I, T> {}

impl<B, I, T> DualLock<B, I, T> {
    /// Takes the two lock initialisers (`new_spinlock_bh!`,
    /// `new_spinlock_irq!`, so each gets its caller's lock class) and the value.
    pub(crate) fn new(
        bh: impl PinInit<SpinLockBh<B>>,
        irq: impl PinInit<SpinLockIrq<I>>,
        shared: T,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            bh <- bh,
            irq <- irq,
            shared: UnsafeCell::new(shared),
        })
    }

    /// The `_bh` end: its own value, and the shared one to read.
    pub(crate) fn bh(&self) -> DualGuard<'_, B, SpinLockBhBackend, T> {
        DualGuard {
            guard: self.bh.lock(),
            shared: &self.shared,
        }
    }

    /// The irq end: its own value, and the shared one to read.
    pub(crate) fn irq(&self) -> DualGuard<'_, I, SpinLockIrqBackend, T> {
        DualGuard {
            guard: self.irq.lock(),
            shared: &self.shared,
        }
    }
}

impl<B: Unpin, I: Unpin, T> DualLock<B, I, T> {
    /// The `_bh` end, held until the returned value goes, for work done in
    /// steps that each take the irq end too ([`Stepwise::step`]): the `_bh`
    /// end's users wait throughout, the irq end's (which may come with
    /// interrupts off) get in between steps, and interrupts are off for one
    /// step at a time.
    pub(crate) fn stepwise(&self) -> Stepwise<'_, B, I, T> {
        Stepwise {
            bh: self.bh.lock(),
            lock: self,
        }
    }
}

/// The `_bh` end of a [`DualLock`], held across steps.
pub(crate) struct Stepwise<'a, B, I, T> {
    bh: Guard<'a, B, SpinLockBhBackend>,
    lock: &'a DualLock<B, I, T>,
}

impl<B: Unpin, I: Unpin, T> Stepwise<'_, B, I, T> {
    /// One step: `f` runs with the irq end taken as well, on both ends'
    /// values and the shared value, all to change.
    pub(crate) fn step<R>(&mut self, f: impl FnOnce(&mut B, &mut I, &mut T) -> R) -> R {
        let mut irq = self.lock.irq.lock();
        // SAFETY: both locks are held while `f` runs (the `_bh` one by
        // `self`, the irq one by `irq`), so no guard of either end gives
        // out the shared value meanwhile, and `&mut self` keeps this the
        // only reference; it does not outlive the call.
        let shared = unsafe { &mut *self.lock.shared.get() };
        f(&mut self.bh, &mut irq, shared)
    }
}

/// One end of a [`DualLock`], held.
pub(crate) struct DualGuard<'a, S, K: Backend, T> {
    guard: Guard<'a, S, K>,
    shared: &'a UnsafeCell<T>,
}

impl<S: Unpin, K: Backend, T> DualGuard<'_, S, K, T> {
    /// The shared value.
    pub(crate) fn shared(&self) -> &T {
        // SAFETY: one of the two locks is held (by `guard`) for as long as
        // the reference lives, so no `Stepwise::step` runs: nobody has
        // `&mut T`.
        unsafe { &*self.shared.get() }
    }

    /// This end's value to change, and the shared value to read.
    pub(crate) fn parts(&mut self) -> (&mut S, &T) {
        // SAFETY: as in `shared`.
        let shared = unsafe { &*self.shared.get() };
        (&mut *self.guard, shared)
    }
}
