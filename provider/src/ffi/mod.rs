// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The functions libibverbs calls for the device, the context, PDs and MRs,
//! and the verbs table that names every entry point. The modules under it
//! hold the rest (CQs, QPs and their posting APIs, SRQs, AHs, windows,
//! mapped queues, locks); together they are the only `unsafe` code in the
//! provider. This root uses them and none of them uses it: helpers they
//! share (`errno`, `qp_object`, `queue`, `lock`) are leaves, and
//! `make check` fails on an import circle.
//!
//! Each entry point turns libibverbs' raw pointers into the calls rdma-core's
//! `ibv_cmd_*` helpers expect, and owns the memory of the object it returns:
//!
//! * the device (`verbs_device`), every PD (`ibv_pd`), MR ([`OxeMr`]), CQ,
//!   QP, SRQ and AH are `Box`es handed to C with `Box::into_raw` and taken
//!   back with `Box::from_raw` by the matching destroy verb, which
//!   libibverbs calls exactly once per object;
//! * the context is the exception: libibverbs' `_verbs_init_and_alloc_context`
//!   `calloc`s it (it initialises the embedded `verbs_context` in place), so
//!   it goes back with `free`.
//!
//! A destroy verb that the kernel refuses keeps the object alive, so the
//! caller can retry: memory is only released after the kernel said yes.
//!
//! Errors follow libibverbs' conventions: a verb that returns a pointer sets
//! `errno` and returns NULL, one that returns `int` returns the errno value
//! (and `errno` holds it too).

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr;

use oxe_core::abi::{OxeAllocUcontextResp, OxeRegMrResp};

use crate::sys;
use crate::verbs;

use context::{oxe_context, OxeContext};

mod ah;
mod context;
mod cq;
mod errno;
mod lock;
mod mkey;
mod mw;
mod oxedv;
mod pabi;
mod qp;
mod qp_ex;
mod qp_object;
mod queue;
mod srq;
mod wr;

use errno::{errno_ret, set_errno};

// ---------------------------------------------------------------------------
// Device: one per matched kernel device, for the life of the device list.
// ---------------------------------------------------------------------------

/// `verbs_device_ops::alloc_device`: the per-device object libibverbs fills
/// in (name, paths, node type) after a match. oxe keeps nothing of its own
/// per device yet, so it is a bare `verbs_device`.
#[no_mangle]
extern "C" fn oxe_alloc_device(_sysfs_dev: *mut sys::verbs_sysfs_dev) -> *mut sys::verbs_device {
    Box::into_raw(Box::<sys::verbs_device>::default())
}

/// `verbs_device_ops::uninit_device`: frees what `oxe_alloc_device` made,
/// once libibverbs drops its last reference.
///
/// # Safety
/// `vdev` must come from [`oxe_alloc_device`] and not be used afterwards.
#[no_mangle]
unsafe extern "C" fn oxe_uninit_device(vdev: *mut sys::verbs_device) {
    // SAFETY: per the contract above, `vdev` is a Box this provider leaked
    // and libibverbs calls this exactly once, as the device's last use.
    drop(unsafe { Box::from_raw(vdev) });
}

// ---------------------------------------------------------------------------
// Context: one per ibv_open_device().
// ---------------------------------------------------------------------------

/// The kernel's reply to `GET_CONTEXT` as it lands in memory: uverbs' core
/// response, immediately followed by oxe's driver response. rdma-core
/// writes the driver part at `resp + sizeof(core)`, so the two must be
/// adjacent with no padding between.
#[repr(C)]
#[derive(Default)]
struct AllocContextResp {
    core: sys::ib_uverbs_get_context_resp,
    drv: OxeAllocUcontextResp,
}

const _: () =
    assert!(offset_of!(AllocContextResp, drv) == size_of::<sys::ib_uverbs_get_context_resp>());

// The C header generated from oxe-core (`oxe-abi.h`, read by the C glue and
// by bindgen) and oxe-core's Rust structs must be one layout.
const _: () = {
    assert!(size_of::<sys::oxe_alloc_ucontext_resp>() == size_of::<OxeAllocUcontextResp>());
    assert!(
        offset_of!(sys::oxe_alloc_ucontext_resp, abi_version)
            == offset_of!(OxeAllocUcontextResp, abi_version)
    );
    assert!(
        offset_of!(sys::oxe_alloc_ucontext_resp, caps) == offset_of!(OxeAllocUcontextResp, caps)
    );
    assert!(
        offset_of!(sys::oxe_alloc_ucontext_resp, max_inline)
            == offset_of!(OxeAllocUcontextResp, max_inline)
    );
    assert!(
        offset_of!(sys::oxe_alloc_ucontext_resp, inline_recv_max)
            == offset_of!(OxeAllocUcontextResp, inline_recv_max)
    );
    assert!(size_of::<sys::oxe_reg_mr_resp>() == size_of::<OxeRegMrResp>());
    assert!(offset_of!(sys::oxe_reg_mr_resp, page_shift) == offset_of!(OxeRegMrResp, page_shift));
};

/// `verbs_device_ops::alloc_context`: opens a user context on the kernel
/// device (`ibv_open_device()`).
///
/// # Safety
/// Called by libibverbs with the device this provider allocated and the
/// uverbs file descriptor it opened.
#[no_mangle]
unsafe extern "C" fn oxe_alloc_context(
    ibdev: *mut sys::ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut sys::verbs_context {
    // SAFETY: `ibdev` and `cmd_fd` come straight from libibverbs; the size
    // is that of the whole provider struct and the offset of its
    // `verbs_context` is 0 (asserted above). The result is zeroed memory
    // with the `verbs_context` initialised, or NULL with errno set.
    let raw = unsafe {
        sys::_verbs_init_and_alloc_context(
            ibdev,
            cmd_fd,
            size_of::<OxeContext>(),
            ptr::null_mut(),
            sys::RDMA_DRIVER_UNKNOWN,
        )
    };
    let ctx = raw.cast::<OxeContext>();
    if ctx.is_null() {
        // errno is set and `cmd_fd` closed by libibverbs.
        return ptr::null_mut();
    }
    // `vctx` is at offset 0 (asserted above).
    let vctx = ctx.cast::<sys::verbs_context>();

    let mut cmd = sys::ibv_get_context::default();
    let mut resp = AllocContextResp::default();
    // SAFETY: `vctx` is the initialised context; `cmd` and `resp` are live
    // locals of the sizes passed, and the response pointer is derived from
    // the whole `resp` so the helper may write the driver part behind the
    // core part. No fd array is passed (NULL is allowed).
    let ret = unsafe {
        sys::ibv_cmd_get_context(
            vctx,
            &mut cmd,
            size_of_val(&cmd),
            ptr::null_mut(),
            (&raw mut resp).cast::<sys::ib_uverbs_get_context_resp>(),
            size_of_val(&resp),
        )
    };
    let inline_recv = verbs::scatter_to_cqe(std::env::var("OXE_SCATTER_TO_CQE").ok().as_deref());
    let checked = if ret == 0 {
        verbs::check_ucontext(&resp.drv, inline_recv)
    } else {
        Err(ret)
    };
    let info = match checked {
        Ok(info) => info,
        Err(err) => {
            // SAFETY: `ctx` came from `_verbs_init_and_alloc_context` above
            // and was never handed out. libibverbs gave this function the
            // ownership of `cmd_fd`; `verbs_uninit_context` closes it, which
            // also releases a kernel context whose reply was refused.
            unsafe { destroy_context(ctx) };
            set_errno(err);
            return ptr::null_mut();
        }
    };
    // SAFETY: `ctx` is live and exclusively ours until it is returned.
    unsafe { (*ctx).info = info };
    let ops = context_ops();
    // SAFETY: `vctx` is initialised; libibverbs copies the function
    // pointers out of `ops` before this returns.
    unsafe { sys::verbs_set_ops(vctx, &ops) };
    vctx
}

/// The verbs this provider implements. Every other entry stays NULL, and
/// `verbs_set_ops` only installs non-NULL entries, so libibverbs' built-in
/// defaults answer the rest with `EOPNOTSUPP`.
fn context_ops() -> sys::verbs_context_ops {
    sys::verbs_context_ops {
        free_context: Some(free_context),
        query_device_ex: Some(query_device_ex),
        query_port: Some(query_port),
        alloc_pd: Some(alloc_pd),
        dealloc_pd: Some(dealloc_pd),
        reg_mr: Some(reg_mr),
        rereg_mr: Some(rereg_mr),
        dereg_mr: Some(dereg_mr),
        advise_mr: Some(advise_mr),
        alloc_mw: Some(mw::alloc_mw),
        dealloc_mw: Some(mw::dealloc_mw),
        bind_mw: Some(mw::bind_mw),
        create_cq: Some(cq::create_cq),
        create_cq_ex: Some(cq::create_cq_ex),
        poll_cq: Some(cq::poll_cq),
        // Arming needs nothing from the provider: the kernel tracks it.
        req_notify_cq: Some(sys::ibv_cmd_req_notify_cq),
        destroy_cq: Some(cq::destroy_cq),
        resize_cq: Some(cq::resize_cq),
        create_qp: Some(qp::create_qp),
        create_qp_ex: Some(qp::create_qp_ex),
        modify_qp: Some(qp::modify_qp),
        query_qp: Some(qp::query_qp),
        destroy_qp: Some(qp::destroy_qp),
        post_send: Some(qp::post_send),
        post_recv: Some(qp::post_recv),
        create_srq: Some(srq::create_srq),
        modify_srq: Some(srq::modify_srq),
        query_srq: Some(srq::query_srq),
        destroy_srq: Some(srq::destroy_srq),
        post_srq_recv: Some(srq::post_srq_recv),
        create_ah: Some(ah::create_ah),
        destroy_ah: Some(ah::destroy_ah),
        // Multicast membership is the kernel's: the plain commands do it.
        attach_mcast: Some(sys::ibv_cmd_attach_mcast),
        detach_mcast: Some(sys::ibv_cmd_detach_mcast),
        ..pabi::context_ops()
    }
}

/// Undoes `_verbs_init_and_alloc_context`.
///
/// # Safety
/// `ctx` must come from `_verbs_init_and_alloc_context` in
/// [`oxe_alloc_context`] and not be used afterwards.
unsafe fn destroy_context(ctx: *mut OxeContext) {
    // SAFETY: per the contract, `ctx` holds an initialised `verbs_context`,
    // at offset 0 (asserted above).
    unsafe { sys::verbs_uninit_context(ctx.cast::<sys::verbs_context>()) };
    // SAFETY: the memory was `calloc`ed by libibverbs for this context.
    unsafe { sys::free(ctx.cast()) };
}

/// `free_context` (`ibv_close_device()`).
///
/// # Safety
/// `ibctx` must be the `ibv_context` of a context from
/// [`oxe_alloc_context`], closed exactly once.
unsafe extern "C" fn free_context(ibctx: *mut sys::ibv_context) {
    // SAFETY: per the contract, `ibctx` belongs to one of our contexts.
    let ctx = unsafe { oxe_context(ibctx) };
    // SAFETY: this is the context's single close.
    unsafe { destroy_context(ctx) };
}

// ---------------------------------------------------------------------------
// Queries.
// ---------------------------------------------------------------------------

/// `query_device_ex`, which libibverbs also uses for `ibv_query_device()`
/// (with `attr_size == sizeof(struct ibv_device_attr)`).
///
/// # Safety
/// libibverbs' arguments: a live context, an optional input, and an
/// `attr` buffer of `attr_size` bytes.
unsafe extern "C" fn query_device_ex(
    context: *mut sys::ibv_context,
    input: *const sys::ibv_query_device_ex_input,
    attr: *mut sys::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    let mut resp = sys::ib_uverbs_ex_query_device_resp::default();
    let mut resp_size = size_of_val(&resp);
    // SAFETY: the caller's pointers are passed through unchanged; `resp`
    // and `resp_size` are live locals describing each other.
    let ret = unsafe {
        sys::ibv_cmd_query_device_any(context, input, attr, attr_size, &mut resp, &mut resp_size)
    };
    if ret != 0 {
        return errno_ret(ret);
    }
    // The helper fills every attribute but the firmware version's text.
    // SAFETY: having succeeded, the helper has checked that `attr_size`
    // covers at least `orig_attr`, which holds `fw_ver`; this writes the
    // field in place without forming a reference to the caller's buffer.
    unsafe { (*attr).orig_attr.fw_ver = verbs::fw_ver_string(resp.base.fw_ver) };
    0
}

/// `query_port` (`ibv_query_port()`).
///
/// # Safety
/// libibverbs' arguments: a live context and a port attribute buffer.
unsafe extern "C" fn query_port(
    context: *mut sys::ibv_context,
    port_num: u8,
    port_attr: *mut sys::ibv_port_attr,
) -> c_int {
    let mut cmd = sys::ibv_query_port::default();
    // SAFETY: the caller's pointers are passed through; `cmd` is a live
    // local of the size given.
    errno_ret(unsafe {
        sys::ibv_cmd_query_port(context, port_num, port_attr, &mut cmd, size_of_val(&cmd))
    })
}

// ---------------------------------------------------------------------------
// Protection domains.
// ---------------------------------------------------------------------------

/// `alloc_pd` (`ibv_alloc_pd()`).
///
/// # Safety
/// `context` must be a live context of this provider.
unsafe extern "C" fn alloc_pd(context: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    let pd = Box::into_raw(Box::<sys::ibv_pd>::default());
    let mut cmd = sys::ibv_alloc_pd::default();
    let mut resp = sys::ib_uverbs_alloc_pd_resp::default();
    // SAFETY: `pd` is a fresh allocation the helper fills in (handle,
    // context); `cmd` and `resp` are live locals of the sizes given.
    let ret = unsafe {
        sys::ibv_cmd_alloc_pd(
            context,
            pd,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: `pd` came from `Box::into_raw` above and was not handed out.
        drop(unsafe { Box::from_raw(pd) });
        set_errno(ret);
        return ptr::null_mut();
    }
    pd
}

/// `dealloc_pd` (`ibv_dealloc_pd()`).
///
/// # Safety
/// `pd` must come from [`alloc_pd`]; on success it must not be used again.
unsafe extern "C" fn dealloc_pd(pd: *mut sys::ibv_pd) -> c_int {
    // SAFETY: `pd` is a live PD of this provider.
    let ret = unsafe { sys::ibv_cmd_dealloc_pd(pd) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: the kernel object is gone and `pd` is the Box `alloc_pd`
    // leaked; libibverbs forgets it once this returns 0.
    drop(unsafe { Box::from_raw(pd) });
    0
}

// ---------------------------------------------------------------------------
// Memory regions.
// ---------------------------------------------------------------------------

/// The provider's MR: libibverbs' `verbs_mr` and what the kernel said about
/// the pinned pages.
#[repr(C)]
struct OxeMr {
    /// Must stay first: libibverbs passes `&vmr` back to `rereg_mr` and
    /// `dereg_mr`, and that pointer is also the `OxeMr`'s.
    vmr: sys::verbs_mr,
    /// log2 of the page size the kernel pinned the region with, for
    /// userspace-side address translation by later verbs.
    page_shift: u32,
}

const _: () = assert!(offset_of!(OxeMr, vmr) == 0);

/// The kernel's reply to `REG_MR`: uverbs' core part, then oxe's.
#[repr(C)]
#[derive(Default)]
struct RegMrResp {
    core: sys::ib_uverbs_reg_mr_resp,
    drv: OxeRegMrResp,
}

const _: () = assert!(offset_of!(RegMrResp, drv) == size_of::<sys::ib_uverbs_reg_mr_resp>());

/// The kernel's reply to `REREG_MR`: uverbs' core part, then oxe's.
#[repr(C)]
#[derive(Default)]
struct ReregMrResp {
    core: sys::ib_uverbs_rereg_mr_resp,
    drv: OxeRegMrResp,
}

const _: () = assert!(offset_of!(ReregMrResp, drv) == size_of::<sys::ib_uverbs_rereg_mr_resp>());

/// `reg_mr`: `ibv_reg_mr()`, and through `hca_va` also `ibv_reg_mr_iova()`
/// and `ibv_reg_mr_iova2()`, whose I/O virtual address may differ from
/// `addr`.
///
/// # Safety
/// `pd` must be a live PD of this provider; `addr`/`length` is the range
/// the caller registers (the kernel pins and checks it, not this code).
unsafe extern "C" fn reg_mr(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut sys::ibv_mr {
    let mr = Box::into_raw(Box::new(OxeMr {
        vmr: sys::verbs_mr::default(),
        page_shift: 0,
    }));
    let mut cmd = sys::ibv_reg_mr::default();
    let mut resp = RegMrResp::default();
    // SAFETY: `mr` is a fresh allocation whose `vmr` (at offset 0, asserted
    // above) the helper fills in
    // (handle, keys, context, type, access); `cmd` and `resp` are live
    // locals of the sizes given, the response pointer derived from all of
    // `resp` so the driver part may be written; `pd` and the range come
    // from the caller.
    let ret = unsafe {
        sys::ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            mr.cast::<sys::verbs_mr>(),
            &mut cmd,
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_reg_mr_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: `mr` came from `Box::into_raw` above and was not handed
        // out.
        drop(unsafe { Box::from_raw(mr) });
        set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: `mr` is live and not yet shared.
    unsafe { (*mr).page_shift = resp.drv.page_shift };
    // SAFETY: `mr` is valid; libibverbs sees the MR as the `ibv_mr` at the
    // start of `verbs_mr`, and gives back the enclosing `verbs_mr`, which
    // is also the `OxeMr`, to `rereg_mr` and `dereg_mr`.
    unsafe { &raw mut (*mr).vmr.ibv_mr }
}

/// `rereg_mr` (`ibv_rereg_mr()`): any combination of a new range, a new PD
/// and new access flags, in place. libibverbs updates `addr`, `length` and
/// `pd` of the `ibv_mr` itself on success; the helper updates the keys.
///
/// # Safety
/// `vmr` must be a live MR of this provider; `pd` is NULL or a live PD.
unsafe extern "C" fn rereg_mr(
    vmr: *mut sys::verbs_mr,
    flags: c_int,
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let mr = vmr.cast::<OxeMr>();
    // SAFETY: `vmr` is a live MR of ours.
    let ibctx = unsafe { (*vmr).ibv_mr.context };
    // SAFETY: the MR's context is a live context of ours.
    let ctx = unsafe { oxe_context(ibctx) };
    // SAFETY: the context outlives its MRs; `info` is only written while
    // the context is created.
    let caps = unsafe { (*ctx).info.caps };
    let req = match verbs::rereg_request(flags, addr as usize, !pd.is_null(), caps) {
        Ok(req) => req,
        Err(err) => return errno_ret(err),
    };
    let mut cmd = sys::ibv_rereg_mr::default();
    let mut resp = ReregMrResp::default();
    // SAFETY: `vmr` is live; `pd` is only read when CHANGE_PD is set, and
    // `rereg_request` refused that case without a PD; `cmd` and `resp` are
    // live locals of the sizes given, the response pointer derived from all
    // of `resp` so the driver part may be written.
    let ret = unsafe {
        sys::ibv_cmd_rereg_mr(
            vmr,
            req.flags.bits(),
            addr,
            length,
            req.hca_va,
            access,
            pd,
            &mut cmd,
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_rereg_mr_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return errno_ret(ret);
    }
    if req.flags.trans() {
        // New pages, possibly of another size.
        // SAFETY: `mr` is live and libibverbs does not touch the provider
        // part.
        unsafe { (*mr).page_shift = resp.drv.page_shift };
    }
    if req.flags.access() {
        // Keep the recorded rights in step with the kernel's, as `reg_mr`
        // records them; the helper leaves this field alone.
        // SAFETY: `vmr` is live and libibverbs is not touching it during
        // this call.
        unsafe { (*vmr).access = access };
    }
    0
}

/// `dereg_mr` (`ibv_dereg_mr()`).
///
/// # Safety
/// `vmr` must come from [`reg_mr`]; on success it must not be used again.
unsafe extern "C" fn dereg_mr(vmr: *mut sys::verbs_mr) -> c_int {
    // SAFETY: `vmr` is a live MR of this provider.
    let ret = unsafe { sys::ibv_cmd_dereg_mr(vmr) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: the kernel object is gone and `vmr` is the start of the
    // `OxeMr` Box `reg_mr` leaked; libibverbs forgets it once this returns 0.
    drop(unsafe { Box::from_raw(vmr.cast::<OxeMr>()) });
    0
}

/// `ibv_advise_mr()`: prefetching ODP ranges is the kernel's business
/// (it owns the translation), so the advice goes to it as it is.
///
/// # Safety
/// libibverbs' contract: a live `pd`, and `sg_list` valid for `num_sge`
/// entries.
unsafe extern "C" fn advise_mr(
    pd: *mut sys::ibv_pd,
    advice: sys::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut sys::ibv_sge,
    num_sge: u32,
) -> c_int {
    // SAFETY: forwarded as libibverbs handed them over.
    errno_ret(unsafe { sys::ibv_cmd_advise_mr(pd, advice, flags, sg_list, num_sge) })
}

#[cfg(test)]
mod tests {
    use core::ffi::{c_char, c_int, CStr};

    use oxe_core::abi::OXE_ABI_VERSION;

    use super::*;

    unsafe extern "C" {
        /// The glue's `verbs_device_ops`, under the global alias that
        /// rdma-core's `PROVIDER_DRIVER` macro gives it. (In the shipped
        /// library it is local; the test binary links the glue directly.)
        static verbs_provider_oxe: sys::verbs_device_ops;
        /// libc's glob matcher, which libibverbs matches names with.
        fn fnmatch(pattern: *const c_char, string: *const c_char, flags: c_int) -> c_int;
    }

    /// Whether the glue's match table claims a device of this name, judged
    /// the way libibverbs' `match_name()` does: each modalias pattern is
    /// matched against `rdma_device:N<name>`.
    fn claims(name: &str) -> bool {
        let subject = std::ffi::CString::new(format!("rdma_device:N{name}")).expect("no NUL");
        // SAFETY: reading an immutable C static.
        let table = unsafe { verbs_provider_oxe.match_table };
        (0..)
            .map_while(|i| {
                // SAFETY: the table is a sentinel-terminated array and this
                // stops at the sentinel, so entry `i` is in bounds.
                let ent = unsafe { table.add(i) };
                // SAFETY: in bounds (above) and immutable static data.
                let ent = unsafe { &*ent };
                (u32::from(ent.kind) != sys::VERBS_MATCH_SENTINEL).then_some(ent)
            })
            .any(|ent| {
                assert_eq!(u32::from(ent.kind), sys::VERBS_MATCH_MODALIAS);
                // SAFETY: a modalias entry's union holds its pattern, a
                // NUL-terminated static string.
                let pattern = unsafe { ent.u.modalias };
                // SAFETY: both arguments are NUL-terminated strings.
                unsafe { fnmatch(pattern, subject.as_ptr(), 0) == 0 }
            })
    }

    #[test]
    fn registered_ops_describe_oxe() {
        // SAFETY: reading an immutable C static.
        let ops = unsafe { &verbs_provider_oxe };
        // SAFETY: `name` points to a string literal in the glue.
        assert_eq!(unsafe { CStr::from_ptr(ops.name) }, c"oxe");
        assert_eq!(ops.match_min_abi_version, OXE_ABI_VERSION);
        assert_eq!(ops.match_max_abi_version, OXE_ABI_VERSION);
        assert!(ops.alloc_device.is_some());
        assert!(ops.uninit_device.is_some());
        assert!(ops.alloc_context.is_some());
        assert!(ops.match_device.is_none());
        assert!(ops.import_context.is_none());
    }

    #[test]
    fn match_table_claims_oxe_devices_only() {
        for name in ["oxe0", "oxe1", "oxe15"] {
            assert!(claims(name), "{name} should match");
        }
        for name in ["rxe0", "siw0", "mlx5_0", "ox0"] {
            assert!(!claims(name), "{name} should not match");
        }
    }

    #[test]
    fn context_ops_set_exactly_the_implemented_verbs() {
        const WORDS: usize = size_of::<sys::verbs_context_ops>() / size_of::<usize>();
        // SAFETY: the struct is nothing but nullable function pointers
        // (bindgen asserts its layout), so it is an array of pointer-sized
        // words, each zero exactly when the entry is unset.
        let words: [usize; WORDS] = unsafe { core::mem::transmute(context_ops()) };
        let set = words.iter().filter(|&&w| w != 0).count();
        // Context, device and port: free_context, query_device_ex,
        // query_port. PDs and MRs: alloc_pd, dealloc_pd, reg_mr, rereg_mr,
        // dereg_mr, advise_mr. Windows: alloc_mw, dealloc_mw, bind_mw. CQs: create_cq, create_cq_ex, poll_cq, req_notify_cq,
        // destroy_cq, resize_cq. QPs: create_qp, create_qp_ex, modify_qp, query_qp,
        // destroy_qp, post_send, post_recv. SRQs: create_srq, modify_srq,
        // query_srq, destroy_srq, post_srq_recv. AHs: create_ah,
        // destroy_ah. Multicast: attach_mcast, detach_mcast. Everything
        // else must stay NULL so libibverbs answers it with EOPNOTSUPP.
        // From ABI 64 also query_port_speed.
        assert_eq!(set, if cfg!(oxe_pabi_64) { 35 } else { 34 });
        let ops = context_ops();
        for implemented in [
            ops.free_context.is_some(),
            ops.query_device_ex.is_some(),
            ops.query_port.is_some(),
            ops.alloc_pd.is_some() && ops.dealloc_pd.is_some(),
            ops.reg_mr.is_some() && ops.rereg_mr.is_some() && ops.dereg_mr.is_some(),
            ops.advise_mr.is_some(),
            ops.alloc_mw.is_some() && ops.dealloc_mw.is_some() && ops.bind_mw.is_some(),
            ops.create_cq.is_some() && ops.create_cq_ex.is_some(),
            ops.poll_cq.is_some() && ops.req_notify_cq.is_some() && ops.destroy_cq.is_some(),
            ops.resize_cq.is_some(),
            ops.create_qp.is_some() && ops.create_qp_ex.is_some(),
            ops.modify_qp.is_some() && ops.query_qp.is_some() && ops.destroy_qp.is_some(),
            ops.post_send.is_some() && ops.post_recv.is_some(),
            ops.create_srq.is_some() && ops.modify_srq.is_some(),
            ops.query_srq.is_some() && ops.destroy_srq.is_some(),
            ops.post_srq_recv.is_some(),
            ops.create_ah.is_some() && ops.destroy_ah.is_some(),
            ops.attach_mcast.is_some() && ops.detach_mcast.is_some(),
            #[cfg(oxe_pabi_64)]
            ops.query_port_speed.is_some(),
        ] {
            assert!(implemented);
        }
        // A sample of what stays with libibverbs' EOPNOTSUPP defaults.
        assert!(ops.modify_cq.is_none());
        assert!(ops.create_srq_ex.is_none() && ops.open_qp.is_none());
        assert!(ops.create_wq.is_none());
    }

    #[test]
    fn device_alloc_round_trip() {
        let dev = oxe_alloc_device(ptr::null_mut());
        assert!(!dev.is_null());
        // SAFETY: `dev` came from `oxe_alloc_device` and is not used again.
        unsafe { oxe_uninit_device(dev) };
    }
}
