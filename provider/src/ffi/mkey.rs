// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Indirect keys (`oxedv_create_mkey` and its send-queue configuration,
//! `include/oxedv.h`): keys whose bytes are other keys' bytes, as mlx5's
//! indirect mkeys.
//!
//! * An indirect key is an MR to the kernel: `REG_MR` with driver data
//!   `OXE_REG_MR_INDIRECT` and an empty range, deregistered like any MR.
//!   libibverbs never sees it as one (the application holds an
//!   `oxedv_mkey`, not an `ibv_mr`), so it cannot reach `rereg_mr`.
//! * Its layout is set by an `OXE_WR_MKEY_CONFIGURE` send WQE, built like
//!   any other in a `wr_start` .. `wr_complete` batch: the entries are its
//!   SGE slots (an interleaved entry takes two, the second carrying the
//!   skip in its length), so a configuration is bounded by the QP's
//!   `max_send_sge`. The kernel checks every entry when it executes it.

use core::ffi::c_int;
use core::mem::{offset_of, size_of_val};
use core::ptr;

use oxe_core::abi::{
    OxeRegMrCmd, OxeRegMrResp, OXE_MKEY_MAX_ENTRIES, OXE_REG_MR_INDIRECT,
    OXE_REG_MR_REMOTE_INVALIDATE,
};
use oxe_core::Errno;

use super::errno::{errno_ret, set_errno};
use super::mw::next_rkey;
use super::oxedv::is_oxe_context;
use super::qp_ex::{begin, with_batch};
use super::wr::sge_array;
use crate::sys;
use crate::wqe::{Remote, SendOp};

const EINVAL: c_int = Errno::EINVAL.to_i32();

/// The application's `oxedv_mkey`, then the MR the kernel knows it as.
#[repr(C)]
struct OxeMkey {
    /// Must stay first: the application's pointer is the `OxeMkey`'s.
    mkey: sys::oxedv_mkey,
    vmr: sys::verbs_mr,
}

const _: () = assert!(offset_of!(OxeMkey, mkey) == 0);

/// `REG_MR` with oxe's driver data after uverbs' command.
#[repr(C)]
#[derive(Default)]
struct RegMrCmd {
    core: sys::ibv_reg_mr,
    drv: OxeRegMrCmd,
}

const _: () = assert!(offset_of!(RegMrCmd, drv) == core::mem::size_of::<sys::ibv_reg_mr>());

/// The kernel's reply to `REG_MR`.
#[repr(C)]
#[derive(Default)]
struct RegMrResp {
    core: sys::ib_uverbs_reg_mr_resp,
    drv: OxeRegMrResp,
}

/// The driver flags for `create_flags`, or EINVAL: INDIRECT is required
/// (the only kind there is), REMOTE_INVALIDATE optional, nothing else.
fn reg_flags(create_flags: u32) -> Result<u32, c_int> {
    let known = sys::OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT
        | sys::OXEDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE;
    if create_flags & !known != 0 || create_flags & sys::OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT == 0 {
        return Err(EINVAL);
    }
    let mut flags = OXE_REG_MR_INDIRECT;
    if create_flags & sys::OXEDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE != 0 {
        flags |= OXE_REG_MR_REMOTE_INVALIDATE;
    }
    Ok(flags)
}

/// `oxedv_create_mkey()`.
///
/// # Safety
/// `attr` is NULL or the caller's attributes, whose `pd` is NULL or live.
#[no_mangle]
unsafe extern "C" fn oxedv_create_mkey(
    attr: *mut sys::oxedv_mkey_init_attr,
) -> *mut sys::oxedv_mkey {
    // SAFETY: NULL or the caller's attributes.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        set_errno(EINVAL);
        return ptr::null_mut();
    };
    let context = if a.pd.is_null() {
        ptr::null_mut()
    } else {
        // SAFETY: a live PD, per the contract.
        unsafe { (*a.pd).context }
    };
    // SAFETY: NULL or the live PD's context.
    let oxe = unsafe { is_oxe_context(context) };
    let max = u32::from(a.max_entries);
    let flags = match reg_flags(a.create_flags) {
        Ok(f) if oxe && (1..=OXE_MKEY_MAX_ENTRIES).contains(&max) => f,
        _ => {
            set_errno(EINVAL);
            return ptr::null_mut();
        }
    };
    let mut mk = Box::new(OxeMkey {
        mkey: sys::oxedv_mkey::default(),
        vmr: sys::verbs_mr::default(),
    });
    let vmr: *mut sys::verbs_mr = &raw mut mk.vmr;
    let mut cmd = RegMrCmd {
        drv: OxeRegMrCmd {
            flags,
            max_entries: max,
        },
        ..Default::default()
    };
    let mut resp = RegMrResp::default();
    // SAFETY: `vmr` is the fresh allocation's, which the helper fills in;
    // `cmd` and `resp` are live locals of the sizes given, each pointer
    // derived from the whole struct so the driver parts are reached; an
    // empty range at address 0 is what the kernel expects of an indirect
    // key, and `pd` is live (checked above).
    let ret = unsafe {
        sys::ibv_cmd_reg_mr(
            a.pd,
            ptr::null_mut(),
            0,
            0,
            0,
            vmr,
            (&raw mut cmd).cast::<sys::ibv_reg_mr>(),
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_reg_mr_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        set_errno(ret);
        return ptr::null_mut();
    }
    mk.mkey.lkey = mk.vmr.ibv_mr.lkey;
    mk.mkey.rkey = mk.vmr.ibv_mr.rkey;
    // The whole `OxeMkey`, which starts with the `oxedv_mkey`: given back
    // to `Box::from_raw` by `oxedv_destroy_mkey`.
    Box::into_raw(mk).cast::<sys::oxedv_mkey>()
}

/// `oxedv_destroy_mkey()`: the key stops resolving at once. A key the
/// kernel refuses to let go of stays valid for another try.
///
/// # Safety
/// `mkey` is NULL or a live key from [`oxedv_create_mkey`].
#[no_mangle]
unsafe extern "C" fn oxedv_destroy_mkey(mkey: *mut sys::oxedv_mkey) -> c_int {
    if mkey.is_null() {
        return errno_ret(EINVAL);
    }
    let mk = mkey.cast::<OxeMkey>();
    // SAFETY: a live key of ours: the `OxeMkey` starts with it.
    let vmr = unsafe { &raw mut (*mk).vmr };
    // SAFETY: the key's MR, registered by `oxedv_create_mkey`.
    let ret = unsafe { sys::ibv_cmd_dereg_mr(vmr) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: the kernel object is gone, and `mk` is the pointer
    // `oxedv_create_mkey` took from `Box::into_raw`, to the whole struct.
    drop(unsafe { Box::from_raw(mk) });
    0
}

/// Opens the configuration of `mkey` with `access` and `repeat` rounds
/// (0: a list) in the batch of `qp`, its entries the SGEs `slots`.
///
/// # Safety
/// `qp` is a live extended QP of this provider, inside `wr_start` ..
/// `wr_complete`; `mkey` is NULL or live.
unsafe fn configure(
    qp: *mut sys::ibv_qp_ex,
    mkey: *mut sys::oxedv_mkey,
    access: u32,
    repeat: u32,
    slots: Result<&[sys::ibv_sge], c_int>,
) {
    // SAFETY: a live QP (an extended QP starts with its `ibv_qp`).
    let context = unsafe { (*qp.cast::<sys::ibv_qp>()).context };
    // SAFETY: a live QP's context.
    if !unsafe { is_oxe_context(context) } {
        // Not a batch of ours: nothing to record the failure in.
        return;
    }
    let slots = match slots {
        Ok(s) if !mkey.is_null() && !s.is_empty() => s,
        Ok(_) | Err(_) => {
            let err = slots.err().unwrap_or(EINVAL);
            // SAFETY: per the contract.
            unsafe { with_batch(qp, |sq| sq.wr_fail(err)) };
            return;
        }
    };
    // Every configuration gives the key a new variant, as a type 1
    // window's bind does: an rkey handed out for the last layout must not
    // reach the next one. The application's key changes at once, as
    // `ibv_bind_mw` changes a window's; a batch that fails leaves the key
    // unconfigured under the new value, which the next configuration
    // accepts (the kernel names the key by its index).
    // SAFETY: checked non-NULL; the caller's live key, which nothing else
    // touches while its configuration is being built.
    let mk = unsafe { &mut *mkey };
    let key = next_rkey(mk.lkey);
    mk.lkey = key;
    mk.rkey = key;
    // SAFETY: per the contract.
    unsafe {
        begin(qp, SendOp::MkeyConfigure, |wr| {
            wr.imm_data = key;
            wr.remote = Remote {
                compare_add: u64::from(repeat),
                swap: u64::from(access),
                ..Remote::default()
            };
        })
    };
    // SAFETY: per the contract.
    unsafe { with_batch(qp, |sq| sq.wr_set_sges(slots)) };
}

/// `oxedv_wr_mr_list()`: the key becomes the `num_sges` ranges one after
/// another, addressed from 0.
///
/// # Safety
/// As for [`configure`]; `sge` is readable for `num_sges` entries.
#[no_mangle]
unsafe extern "C" fn oxedv_wr_mr_list(
    qp: *mut sys::ibv_qp_ex,
    mkey: *mut sys::oxedv_mkey,
    access_flags: u32,
    num_sges: u16,
    sge: *const sys::ibv_sge,
) {
    // SAFETY: per the contract.
    let slots = unsafe { sge_array(sge, num_sges.into()) };
    // SAFETY: per the contract.
    unsafe { configure(qp, mkey, access_flags, 0, slots) };
}

/// `oxedv_wr_mr_interleaved()`: the key becomes `repeat_count` rounds of
/// the entries, each round taking `bytes_count` bytes of each entry and
/// passing over `bytes_skip` more.
///
/// # Safety
/// As for [`configure`]; `data` is readable for `num_interleaved` entries.
#[no_mangle]
unsafe extern "C" fn oxedv_wr_mr_interleaved(
    qp: *mut sys::ibv_qp_ex,
    mkey: *mut sys::oxedv_mkey,
    access_flags: u32,
    repeat_count: u32,
    num_interleaved: u16,
    data: *const sys::oxedv_mr_interleaved,
) {
    let entries = if num_interleaved == 0 || data.is_null() {
        &[][..]
    } else {
        // SAFETY: non-NULL with `num_interleaved` entries, per the contract.
        unsafe { core::slice::from_raw_parts(data, num_interleaved.into()) }
    };
    let mut slots = Vec::with_capacity(entries.len() * 2);
    for e in entries {
        slots.push(sys::ibv_sge {
            addr: e.addr,
            length: e.bytes_count,
            lkey: e.lkey,
        });
        slots.push(sys::ibv_sge {
            addr: 0,
            length: e.bytes_skip,
            lkey: 0,
        });
    }
    let slots = if repeat_count == 0 {
        Err(EINVAL)
    } else {
        Ok(&slots[..])
    };
    // SAFETY: per the contract.
    unsafe { configure(qp, mkey, access_flags, repeat_count, slots) };
}
