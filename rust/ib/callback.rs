// SPDX-License-Identifier: GPL-2.0

//! The ib_core object behind a CQ, QP or SRQ, through which oxe calls its
//! consumer back (completion and async events) until the destroy verb
//! retires it.
//!
//! The call happens with no lock of the called object held, and with
//! interrupts on. A consumer's completion handler may poll the CQ at once,
//! and oxe's poll for kernel consumers looks QPs up with softirqs held off:
//! ending that under an irq-disabling lock would re-enable softirqs with
//! interrupts off. (The QP whose work completed may still be locked: as
//! with hardware, whose handler runs in interrupt context, a handler must
//! not modify or query that QP synchronously.) Calls for one object may
//! run at once on several CPUs, as with hardware that has several vectors.

use core::mem::ManuallyDrop;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::SpinLockIrq;
use kernel::time::{delay::fsleep, Delta};

/// A handle (`CqHandle`, `QpHandle`, `SrqHandle`: a pointer to ib_core's
/// object, without drop glue) that may be called until [`Callback::retire`].
///
/// # Invariants
///
/// `calls` counts the callers between copying the handle out of `handle` and
/// finishing with it; it only rises while `handle` holds it.
#[pin_data]
pub(crate) struct Callback<H> {
    #[pin]
    handle: SpinLockIrq<Option<H>>,
    calls: AtomicU32,
}

impl<H: Unpin> Callback<H> {
    pub(crate) fn new(h: H) -> impl PinInit<Self> {
        pin_init!(Self {
            handle <- kernel::new_spinlock_irq!(Some(h)),
            calls: AtomicU32::new(0),
        })
    }

    /// Runs `f` on the handle, unless it has been retired, with no lock
    /// held. Any context.
    pub(crate) fn call<R>(&self, f: impl FnOnce(&H) -> R) -> Option<R> {
        let copy = {
            let held = self.handle.lock();
            let h = held.as_ref()?;
            self.calls.fetch_add(1, Ordering::Relaxed);
            // SAFETY: handles are plain pointers without drop glue, so a
            // bitwise copy owns nothing; `retire` waits for `calls` to fall
            // to zero before ib_core may free what it points to, and the
            // copy never outlives this call.
            ManuallyDrop::new(unsafe { core::ptr::read(h) })
        };
        let r = f(&copy);
        self.calls.fetch_sub(1, Ordering::Release);
        Some(r)
    }

    /// The destroy verb's part: no call starts after this, and none is
    /// still running when it returns, so ib_core may free its object.
    /// Process context (it sleeps while a call finishes).
    pub(crate) fn retire(&self) {
        drop(self.handle.lock().take());
        while self.calls.load(Ordering::Acquire) != 0 {
            fsleep(Delta::from_micros(20));
        }
    }
}
