// SPDX-License-Identifier: GPL-2.0

//! Objects ib_core allocates for the driver (sizes from the ops table): user
//! contexts and PDs, and, through one generic layout ([`Obj`]), CQs, QPs,
//! SRQs, memory windows and address handles.

use crate::bindings as b;
use kernel::sync::Arc;

/// State of the glue kept next to an object, whose all-zero bytes are a valid
/// value: ib_core hands the memory over zeroed, and it is read before the
/// create verb has written it only in the zeroed state.
///
/// # Safety
///
/// All-zero bytes must be a valid value of the type.
pub(crate) unsafe trait ZeroValid: Copy {}
// SAFETY: a zero-sized type.
unsafe impl ZeroValid for () {}
// SAFETY: any bit pattern is a u32.
unsafe impl ZeroValid for u32 {}

/// The memory ib_core allocates for a CQ, QP, SRQ, MW or AH (zeroed, of the
/// size `set_sizes` gives): ib_core's struct `I` first, as it requires,
/// then the driver's object, absent until the create verb succeeds and
/// again once the destroy verb has taken it, then `X`, small state of the
/// glue's own (an AH's number).
///
/// # Invariants
///
/// Reached only through the `I` that ib_core passes a callback, behind which
/// it allocated `size_of::<Obj<I, T, X>>()` zeroed bytes; zero bytes are a
/// valid `Option<Arc<T>>` (`None`: `Arc` is never null) and `X` (ZeroValid).
#[repr(C)]
pub(crate) struct Obj<I, T, X: ZeroValid = ()> {
    ib: I,
    drv: Option<Arc<T>>,
    extra: X,
}

impl<I, T, X: ZeroValid> Obj<I, T, X> {
    /// The driver's object behind `ib`, if created and not yet destroyed.
    ///
    /// # Safety
    ///
    /// `ib` is ib_core's part of an `Obj<I, T, X>`, alive for `'a`, whose
    /// create and destroy verbs do not run meanwhile (ib_core does not call
    /// them concurrently with other calls on the object).
    pub(super) unsafe fn get<'a>(ib: *mut I) -> Option<&'a Arc<T>> {
        // SAFETY: caller contract; `ib` is the first field (repr(C)).
        unsafe { (*ib.cast::<Self>()).drv.as_ref() }
    }

    /// The glue's state next to the object.
    ///
    /// # Safety
    ///
    /// As for [`Obj::get`].
    pub(super) unsafe fn extra(ib: *mut I) -> X {
        // SAFETY: as in `get`; zeroed or written by `set`, valid either way.
        unsafe { (*ib.cast::<Self>()).extra }
    }

    /// Publishes the driver's object: the create verb's last step.
    ///
    /// # Safety
    ///
    /// `ib` is ib_core's part of an `Obj<I, T, X>` in its create verb, with
    /// no object yet.
    pub(super) unsafe fn set(ib: *mut I, drv: Arc<T>, extra: X) {
        let obj = ib.cast::<Self>();
        // SAFETY: caller contract; `write` does not drop the zeroed `None`.
        unsafe {
            core::ptr::addr_of_mut!((*obj).drv).write(Some(drv));
            core::ptr::addr_of_mut!((*obj).extra).write(extra);
        }
    }

    /// Takes the driver's object out: the destroy verb's part.
    ///
    /// # Safety
    ///
    /// `ib` is ib_core's part of an `Obj<I, T, X>` in its destroy verb.
    pub(super) unsafe fn take(ib: *mut I) -> Option<Arc<T>> {
        // SAFETY: caller contract: nothing else uses the object now.
        unsafe { (*ib.cast::<Self>()).drv.take() }
    }
}

/// A user context: one per open of the device by a process.
#[repr(C)]
pub(super) struct UctxObj {
    ib: b::ib_ucontext,
}

/// A protection domain. The driver keeps no state in it but its serial:
/// an MR names its PD by identity ([`PdId`]).
#[repr(C)]
pub(super) struct PdObj {
    ib: b::ib_pd,
    serial: u64,
}

/// The serial the next PD gets; 0 is no PD's.
static PD_SERIAL: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

impl PdObj {
    /// Gives a PD ib_core just allocated its serial.
    ///
    /// # Safety
    ///
    /// `pd` is a PD of this driver's devices (a `PdObj`, by `set_sizes`),
    /// not yet in use by anyone else.
    pub(super) unsafe fn number(pd: *mut b::ib_pd) {
        let serial = PD_SERIAL.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        // SAFETY: per the caller, a `PdObj` only this call uses.
        unsafe { (*pd.cast::<PdObj>()).serial = serial };
    }
}

/// A PD's identity, for checks like "same PD" on the data path: a serial
/// number the PD got when it was allocated, never reused. (Its address is
/// reused as soon as it is freed: a fault or a check that outlives a PD
/// must not take a later one for it.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PdId(u64);

impl PdId {
    /// A value no PD has.
    pub(crate) const NONE: PdId = PdId(0);

    /// `pd`'s identity; for a null `pd`, [`PdId::NONE`].
    ///
    /// # Safety
    ///
    /// `pd` is null or a PD of this driver's devices, alive for the call.
    pub(super) unsafe fn of(pd: *const b::ib_pd) -> Self {
        if pd.is_null() {
            return PdId::NONE;
        }
        // SAFETY: per the caller, a live `PdObj`, numbered when allocated.
        PdId(unsafe { (*pd.cast::<PdObj>()).serial })
    }
}

/// An async event of `device`; the caller names the element.
pub(super) fn event(ty: b::ib_event_type, device: *mut b::ib_device) -> b::ib_event {
    b::ib_event {
        device,
        event: ty,
        ..Default::default()
    }
}

/// What ib_core must allocate for each object type.
pub(super) fn set_sizes<D: super::driver::Driver>(ops: &mut b::ib_device_ops) {
    ops.size_ib_ucontext = core::mem::size_of::<UctxObj>();
    ops.size_ib_pd = core::mem::size_of::<PdObj>();
    ops.size_ib_cq = core::mem::size_of::<super::cq::CqObj<D>>();
    ops.size_ib_qp = core::mem::size_of::<super::qp::QpObj<D>>();
    ops.size_ib_srq = core::mem::size_of::<super::srq::SrqObj<D>>();
    ops.size_ib_mw = core::mem::size_of::<super::mw::MwObj<D>>();
    ops.size_ib_ah = core::mem::size_of::<super::ah::AhObj>();
}
