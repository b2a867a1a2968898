// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type oxe netdev DEV`: the rdma_link_ops registration.

use super::driver::Driver;
use super::netdev::NetDev;
use crate::bindings as b;
use core::cell::UnsafeCell;
use kernel::prelude::*;
use kernel::str::CStr;

/// The link ops ib_core keeps on its list while registered.
///
/// # Invariants
///
/// Registered with `rdma_link_register` for as long as this exists.
pub(crate) struct LinkOps(Pin<KBox<OpsCell>>);

#[repr(transparent)]
struct OpsCell(UnsafeCell<b::rdma_link_ops>);

// SAFETY: ib_core protects its list with link_ops_rwsem; we never touch it after registering.
unsafe impl Send for OpsCell {}
// SAFETY: as above.
unsafe impl Sync for OpsCell {}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn newlink<D: Driver>(
    name: *const kernel::ffi::c_char,
    ndev: *mut b::net_device,
) -> kernel::ffi::c_int {
    // SAFETY: ib_core passes a NUL-terminated device name.
    let name = unsafe { CStr::from_char_ptr(name) };
    // SAFETY: ib_core holds `ndev` for the duration of the call.
    let Some(ndev) = (unsafe { NetDev::hold(ndev) }) else {
        return EINVAL.to_errno();
    };
    super::error::to_c_int(D::new_link(name, ndev))
}

impl LinkOps {
    /// Registers link type `name`, whose devices are `D`'s.
    pub(crate) fn register<D: Driver>(name: &'static CStr) -> Result<Self> {
        let ops = b::rdma_link_ops {
            type_: name.as_char_ptr(),
            newlink: Some(newlink::<D>),
            ..Default::default()
        };
        let cell = KBox::pin(OpsCell(UnsafeCell::new(ops)), GFP_KERNEL)?;
        // SAFETY: pinned heap memory that outlives the registration.
        unsafe { b::rdma_link_register(cell.0.get()) };
        // INVARIANT: registered above.
        Ok(LinkOps(cell))
    }
}

impl Drop for LinkOps {
    fn drop(&mut self) {
        // SAFETY: registered for our lifetime (type invariant).
        unsafe { b::rdma_link_unregister(self.0 .0.get()) };
    }
}
