// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The lock around each queue's private state (a producer index, a
//! consumer index, a batch in progress).
//!
//! Applications post and poll from many threads, so every queue is
//! serialised as rdma-core's C providers do it, with a spin lock: the
//! critical sections are a few stores into a mapped ring, far shorter than
//! a futex round trip. Two verbs pairs hold the lock across calls from C:
//! `ibv_wr_start()` .. `ibv_wr_complete()`/`ibv_wr_abort()` and
//! `ibv_start_poll()` .. `ibv_end_poll()`, which libibverbs documents as
//! per-object critical sections. A Rust guard cannot outlive the call that
//! made it, so those use the unguarded [`Locked::enter`] and
//! [`Locked::leave`], whose pairing is the application's contract.

use core::cell::UnsafeCell;
use core::hint::spin_loop;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

/// Spins before yielding the CPU: a holder that was preempted would
/// otherwise be waited on for a whole time slice.
const SPINS_BEFORE_YIELD: u32 = 128;

/// A value and the spin lock that guards it.
#[derive(Debug)]
pub(crate) struct Locked<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through the lock (a guard, or `enter`
// whose caller holds it), so sharing a `Locked` between threads hands the
// value from one thread to the next, which `T: Send` permits.
unsafe impl<T: Send> Sync for Locked<T> {}

impl<T> Locked<T> {
    /// A new, unlocked value.
    pub(crate) fn new(value: T) -> Self {
        Self {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    fn acquire(&self) {
        let mut spins = 0u32;
        while self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.held.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Locks for the rest of the caller's scope.
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        self.acquire();
        Guard { lock: self }
    }

    /// Locks without a guard, for a critical section that ends in another
    /// call from C; [`Self::held`] reaches the value meanwhile and
    /// [`Self::leave`] ends it.
    pub(crate) fn enter(&self) {
        self.acquire();
    }

    /// The value, inside a section opened with [`Self::enter`].
    ///
    /// # Safety
    /// The calling thread must have entered and not yet left, and must not
    /// hold another reference obtained from this function.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn held(&self) -> &mut T {
        // SAFETY: per the contract the caller holds the lock, so no other
        // thread reaches the value, and this is its only reference.
        unsafe { &mut *self.value.get() }
    }

    /// Ends a section opened with [`Self::enter`].
    ///
    /// # Safety
    /// The calling thread must have entered, and must drop every reference
    /// from [`Self::held`] first.
    pub(crate) unsafe fn leave(&self) {
        self.held.store(false, Ordering::Release);
    }
}

/// Access to a [`Locked`] value; unlocks when dropped.
#[derive(Debug)]
pub(crate) struct Guard<'a, T> {
    lock: &'a Locked<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, and its borrow rules make this
        // the only way to the value while it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, with the guard borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn guard_serialises_threads() {
        let counter = Arc::new(Locked::new(0u64));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        // A read-modify-write split in two, which only the
                        // lock keeps whole.
                        let mut g = counter.lock();
                        let v = *g;
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no panic");
        }
        assert_eq!(*counter.lock(), 80_000);
    }

    #[test]
    fn enter_and_leave_bracket_a_section() {
        let l = Locked::new(vec![1]);
        l.enter();
        // SAFETY: this thread entered and holds no other reference.
        unsafe { l.held() }.push(2);
        // SAFETY: entered above; the reference is gone.
        unsafe { l.leave() };
        assert_eq!(*l.lock(), vec![1, 2]);
        // The guard unlocked on drop, so entering again does not spin.
        l.enter();
        // SAFETY: entered just above.
        unsafe { l.leave() };
    }
}
