//! What differs between the rdma-core private provider ABIs the provider
//! builds against, and nothing else: build.rs reads the tree's
//! `IBVERBS_PABI_VERSION` and sets `oxe_pabi_64` for an ABI of 64 or more
//! (rdma-core v64.0 and later; v59 to v63 are ABI 59).

use core::ffi::c_int;

use crate::sys;

/// `ibv_cmd_create_qp_ex2`. From ABI 64 it takes a driver command buffer
/// to link into its own; oxe's driver data travels in `cmd` as before, so
/// there is none (NULL is the old behaviour).
///
/// # Safety
///
/// As `ibv_cmd_create_qp_ex2`'s contract: every pointer valid for the
/// call, `cmd` and `resp` of the sizes given.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn cmd_create_qp_ex2(
    context: *mut sys::ibv_context,
    qp: *mut sys::verbs_qp,
    attr: *mut sys::ibv_qp_init_attr_ex,
    cmd: *mut sys::ibv_create_qp_ex,
    cmd_size: usize,
    resp: *mut sys::ib_uverbs_ex_create_qp_resp,
    resp_size: usize,
) -> c_int {
    // SAFETY: the caller's contract is the function's.
    unsafe {
        sys::ibv_cmd_create_qp_ex2(
            context,
            qp,
            attr,
            cmd,
            cmd_size,
            resp,
            resp_size,
            #[cfg(oxe_pabi_64)]
            core::ptr::null_mut(),
        )
    }
}

/// The context ops only an ABI has; `context_ops` fills in the rest.
pub(super) fn context_ops() -> sys::verbs_context_ops {
    sys::verbs_context_ops {
        #[cfg(oxe_pabi_64)]
        query_port_speed: Some(query_port_speed),
        ..Default::default()
    }
}

/// `query_port_speed` (`ibv_query_port_speed()`, ABI 64): the kernel's
/// answer, the port's effective rate in units of 100 Mb/s, 0 while the
/// port is down.
///
/// # Safety
/// libibverbs' arguments: a live context and a writable `speed`.
#[cfg(oxe_pabi_64)]
unsafe extern "C" fn query_port_speed(
    context: *mut sys::ibv_context,
    port_num: u32,
    speed: *mut u64,
) -> c_int {
    // SAFETY: the caller's pointers are passed through.
    super::errno::errno_ret(unsafe { sys::ibv_cmd_query_port_speed(context, port_num, speed) })
}
