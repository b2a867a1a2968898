// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Address handles. The kernel resolves the destination (GID to MAC and
//! route) when it creates the AH and numbers it; a UD send names the AH by
//! that number, so the provider only remembers it.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr;

use oxe_core::abi::OxeCreateAhResp;

use super::errno::{errno_ret, set_errno};
use crate::sys;

/// The provider's AH: libibverbs' `ibv_ah`, then the kernel's number.
#[repr(C)]
struct OxeAh {
    /// Must stay first: libibverbs' `ibv_ah` pointers are `OxeAh` pointers.
    ah: sys::ibv_ah,
    /// What UD send entries carry in `ah_num`.
    ah_num: u32,
}

const _: () = assert!(offset_of!(OxeAh, ah) == 0);

/// The kernel's reply to `CREATE_AH`: uverbs' core part, then oxe's.
#[repr(C)]
#[derive(Default)]
struct CreateAhResp {
    core: sys::ib_uverbs_create_ah_resp,
    drv: OxeCreateAhResp,
}

const _: () = assert!(offset_of!(CreateAhResp, drv) == size_of::<sys::ib_uverbs_create_ah_resp>());

/// `create_ah` (`ibv_create_ah()`).
///
/// # Safety
/// libibverbs' arguments: a live PD and the caller's attributes.
pub(crate) unsafe extern "C" fn create_ah(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_ah_attr,
) -> *mut sys::ibv_ah {
    let ah = Box::into_raw(Box::new(OxeAh {
        ah: sys::ibv_ah::default(),
        ah_num: 0,
    }));
    let mut resp = CreateAhResp::default();
    // SAFETY: `ah` is a fresh allocation starting with its `ibv_ah`, which
    // the helper fills in; the response pointer is derived from all of
    // `resp` so the driver part may be written.
    let ret = unsafe {
        sys::ibv_cmd_create_ah(
            pd,
            ah.cast::<sys::ibv_ah>(),
            attr,
            (&raw mut resp).cast::<sys::ib_uverbs_create_ah_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: from `Box::into_raw` above, not handed out.
        drop(unsafe { Box::from_raw(ah) });
        set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: `ah` is ours alone until returned.
    unsafe { (*ah).ah_num = resp.drv.ah_num };
    ah.cast::<sys::ibv_ah>()
}

/// `destroy_ah` (`ibv_destroy_ah()`).
///
/// # Safety
/// `ah` must come from [`create_ah`]; on success it must not be used again.
pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut sys::ibv_ah) -> c_int {
    // SAFETY: a live AH of this provider.
    let ret = unsafe { sys::ibv_cmd_destroy_ah(ah) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: the kernel object is gone and `ah` is the `OxeAh` Box
    // `create_ah` leaked.
    drop(unsafe { Box::from_raw(ah.cast::<OxeAh>()) });
    0
}

/// The kernel's number for an AH, `None` for a NULL one.
///
/// # Safety
/// `ah` is NULL or a live AH of this provider.
pub(crate) unsafe fn ah_num(ah: *mut sys::ibv_ah) -> Option<u32> {
    if ah.is_null() {
        return None;
    }
    // SAFETY: a live `OxeAh` (the `ibv_ah` is at offset 0); `ah_num` is
    // written only before the AH is handed out.
    Some(unsafe { (*ah.cast::<OxeAh>()).ah_num })
}
