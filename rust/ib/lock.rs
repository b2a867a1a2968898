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
use kernel::sync::lock::{Backend, Lock};

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
        // SAFETY: an initialised lock (the trait's contract).
        unsafe { b::oxe_shim_spin_lock_bh(ptr) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock (the trait's contract).
        unsafe { b::oxe_shim_spin_unlock_bh(ptr) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: an initialised lock (the trait's contract).
        (unsafe { b::oxe_shim_spin_trylock_bh(ptr) } != 0).then_some(())
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: an initialised lock (the trait's contract).
        unsafe { b::spin_assert_is_held(ptr) }
    }
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
    unsafe { b::oxe_shim_synchronize_rcu() }
}
