// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The `ibv_wr_*` posting API of QPs created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
//!
//! `wr_start` locks the send queue and `wr_complete`/`wr_abort` unlock it;
//! in between, the builders and setters run on the application's thread
//! with the lock held (libibverbs documents the section as exclusive per
//! QP), and only record into the batch kept by `send_queue`. The API has
//! no error returns before `wr_complete`, which reports the first failure.

use core::ffi::{c_int, c_void};
use core::slice;

use oxe_core::abi::flush_attrs;
use oxe_core::Errno;

use super::ah::ah_num;
use super::errno::errno_ret;
use super::qp_object::{ring_doorbell, send_queue};
use super::queue::MappedQueue;
use super::wr::{buffer, check_inline_buffers, sge_array};
use crate::send_queue::SendQueue;
use crate::sys;
use crate::wqe::{Remote, SendOp, SendWr, UdDest};

const EINVAL: c_int = Errno::EINVAL.to_i32();

/// Installs the entry points: `wr_start`/`wr_complete`/`wr_abort` and the
/// setters always, a builder only for each operation in `ops` (the
/// `IBV_QP_EX_WITH_*` flags, already checked against the QP type).
pub(crate) fn install(ex: &mut sys::ibv_qp_ex, ops: u64) {
    let has = |flag: u32| ops & u64::from(flag) != 0;
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
    ex.wr_send = has(sys::IBV_QP_EX_WITH_SEND).then_some(wr_send as _);
    ex.wr_send_imm = has(sys::IBV_QP_EX_WITH_SEND_WITH_IMM).then_some(wr_send_imm as _);
    ex.wr_send_inv = has(sys::IBV_QP_EX_WITH_SEND_WITH_INV).then_some(wr_send_inv as _);
    ex.wr_rdma_write = has(sys::IBV_QP_EX_WITH_RDMA_WRITE).then_some(wr_rdma_write as _);
    ex.wr_rdma_write_imm =
        has(sys::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM).then_some(wr_rdma_write_imm as _);
    ex.wr_rdma_read = has(sys::IBV_QP_EX_WITH_RDMA_READ).then_some(wr_rdma_read as _);
    ex.wr_atomic_cmp_swp =
        has(sys::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP).then_some(wr_atomic_cmp_swp as _);
    ex.wr_atomic_fetch_add =
        has(sys::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD).then_some(wr_atomic_fetch_add as _);
    ex.wr_flush = has(sys::IBV_QP_EX_WITH_FLUSH).then_some(wr_flush as _);
    ex.wr_atomic_write = has(sys::IBV_QP_EX_WITH_ATOMIC_WRITE).then_some(wr_atomic_write as _);
    ex.wr_bind_mw = has(sys::IBV_QP_EX_WITH_BIND_MW).then_some(wr_bind_mw as _);
    ex.wr_local_inv = has(sys::IBV_QP_EX_WITH_LOCAL_INV).then_some(wr_local_inv as _);
}

/// Runs `f` on the batch of the QP's send queue.
///
/// # Safety
/// `qp` is a live extended QP of this provider and the calling thread is
/// inside its `wr_start` .. `wr_complete`/`wr_abort`.
pub(super) unsafe fn with_batch(
    qp: *mut sys::ibv_qp_ex,
    f: impl FnOnce(&mut SendQueue<MappedQueue>),
) {
    // SAFETY: a live QP; the `ibv_qp` starts the `ibv_qp_ex`.
    if let Some(sq) = unsafe { send_queue(qp.cast::<sys::ibv_qp>()) } {
        // SAFETY: this thread holds the lock since `wr_start`, and the
        // reference does not outlive `f`.
        f(unsafe { sq.held() });
    }
}

/// Opens an entry for `op`, with the `wr_id` and `wr_flags` the
/// application set in the `ibv_qp_ex` beforehand. `IBV_SEND_INLINE` there
/// is ignored: the payload setter called decides.
///
/// # Safety
/// As for [`with_batch`].
pub(super) unsafe fn begin(qp: *mut sys::ibv_qp_ex, op: SendOp, fill: impl FnOnce(&mut SendWr)) {
    // SAFETY: a live QP; the application wrote these fields before calling
    // the builder and does not change them concurrently.
    let wr_id = unsafe { (*qp).wr_id };
    // SAFETY: as above.
    let flags = unsafe { (*qp).wr_flags };
    let mut wr = SendWr::new(wr_id, op, flags & !sys::IBV_SEND_INLINE);
    fill(&mut wr);
    // SAFETY: per this function's contract.
    unsafe { with_batch(qp, |sq| sq.wr_begin(wr)) };
}

/// `wr_start`: locks the send queue and opens a batch.
unsafe extern "C" fn wr_start(qp: *mut sys::ibv_qp_ex) {
    // SAFETY: a live extended QP of this provider.
    if let Some(sq) = unsafe { send_queue(qp.cast::<sys::ibv_qp>()) } {
        sq.enter();
        // SAFETY: entered just above, on this thread.
        unsafe { sq.held() }.wr_start();
    }
}

/// `wr_complete`: publishes the batch (or drops it on error), unlocks, and
/// rings the doorbell if anything was published.
unsafe extern "C" fn wr_complete(qp: *mut sys::ibv_qp_ex) -> c_int {
    // SAFETY: a live extended QP of this provider.
    let Some(sq) = (unsafe { send_queue(qp.cast::<sys::ibv_qp>()) }) else {
        return errno_ret(EINVAL);
    };
    // SAFETY: a live QP; libibverbs keeps `state` current across modify_qp.
    let state = unsafe { (*qp.cast::<sys::ibv_qp>()).state };
    if !crate::verbs::send_allowed(state) {
        // SAFETY: this thread holds the lock since `wr_start`.
        unsafe { sq.held() }.wr_abort();
        // SAFETY: the reference from `held` is gone.
        unsafe { sq.leave() };
        return errno_ret(EINVAL);
    }
    // SAFETY: this thread holds the lock since `wr_start`.
    let result = unsafe { sq.held() }.wr_complete();
    // SAFETY: the reference from `held` is gone.
    unsafe { sq.leave() };
    match result {
        // SAFETY: a live QP.
        Ok(true) => errno_ret(
            unsafe { ring_doorbell(qp.cast::<sys::ibv_qp>()) }
                .err()
                .unwrap_or(0),
        ),
        Ok(false) => 0,
        Err(err) => errno_ret(err),
    }
}

/// `wr_abort`: drops the batch and unlocks.
unsafe extern "C" fn wr_abort(qp: *mut sys::ibv_qp_ex) {
    // SAFETY: a live extended QP of this provider.
    if let Some(sq) = unsafe { send_queue(qp.cast::<sys::ibv_qp>()) } {
        // SAFETY: this thread holds the lock since `wr_start`.
        unsafe { sq.held() }.wr_abort();
        // SAFETY: the reference from `held` is gone.
        unsafe { sq.leave() };
    }
}

/// `wr_send`.
unsafe extern "C" fn wr_send(qp: *mut sys::ibv_qp_ex) {
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::Send, |_| {}) };
}

/// `wr_send_imm`: `imm_data` is `__be32`, stored as is.
unsafe extern "C" fn wr_send_imm(qp: *mut sys::ibv_qp_ex, imm_data: sys::__be32) {
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::SendImm, |wr| wr.imm_data = imm_data) };
}

/// `wr_send_inv`.
unsafe extern "C" fn wr_send_inv(qp: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::SendInv, |wr| wr.imm_data = invalidate_rkey) };
}

/// The remote end of an RDMA operation.
fn rdma(rkey: u32, addr: u64) -> Remote {
    Remote {
        addr,
        rkey,
        ..Remote::default()
    }
}

/// `wr_rdma_write`.
unsafe extern "C" fn wr_rdma_write(qp: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::Write, |wr| wr.remote = rdma(rkey, remote_addr)) };
}

/// `wr_rdma_write_imm`.
unsafe extern "C" fn wr_rdma_write_imm(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm_data: sys::__be32,
) {
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe {
        begin(qp, SendOp::WriteImm, |wr| {
            wr.remote = rdma(rkey, remote_addr);
            wr.imm_data = imm_data;
        })
    };
}

/// `wr_rdma_read`.
unsafe extern "C" fn wr_rdma_read(qp: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::Read, |wr| wr.remote = rdma(rkey, remote_addr)) };
}

/// `wr_atomic_cmp_swp`.
unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    let remote = Remote {
        addr: remote_addr,
        rkey,
        compare_add: compare,
        swap,
    };
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::CmpSwap, |wr| wr.remote = remote) };
}

/// `wr_atomic_fetch_add`.
unsafe extern "C" fn wr_atomic_fetch_add(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    let remote = Remote {
        addr: remote_addr,
        rkey,
        compare_add: add,
        swap: 0,
    };
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::FetchAdd, |wr| wr.remote = remote) };
}

/// `wr_flush`. The RETH carries a 32-bit length: a longer range is EINVAL
/// from `wr_complete`.
unsafe extern "C" fn wr_flush(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    len: usize,
    placement: u8,
    level: u8,
) {
    let Ok(len) = u32::try_from(len) else {
        // SAFETY: builders run inside `wr_start` .. `wr_complete`.
        unsafe { with_batch(qp, |sq| sq.wr_fail(EINVAL)) };
        return;
    };
    let remote = Remote {
        addr: remote_addr,
        rkey,
        compare_add: u64::from(len),
        swap: flush_attrs(placement, level),
    };
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::Flush, |wr| wr.remote = remote) };
}

/// `wr_atomic_write`: `atomic_wr` points at the 8 bytes to store.
unsafe extern "C" fn wr_atomic_write(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    if atomic_wr.is_null() {
        // SAFETY: builders run inside `wr_start` .. `wr_complete`.
        unsafe { with_batch(qp, |sq| sq.wr_fail(EINVAL)) };
        return;
    }
    // SAFETY: the application passes 8 readable bytes, of any alignment.
    let bytes = unsafe { atomic_wr.cast::<[u8; 8]>().read_unaligned() };
    let remote = Remote {
        addr: remote_addr,
        rkey,
        compare_add: u64::from_ne_bytes(bytes),
        swap: 0,
    };
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::AtomicWrite, |wr| wr.remote = remote) };
}

/// `wr_bind_mw`: a type 2 window (type 1 goes through `ibv_bind_mw`).
unsafe extern "C" fn wr_bind_mw(
    qp: *mut sys::ibv_qp_ex,
    mw: *mut sys::ibv_mw,
    rkey: u32,
    bind_info: *const sys::ibv_mw_bind_info,
) {
    // SAFETY: NULL or the application's live window and bind description.
    let ok = !mw.is_null() && !bind_info.is_null() && unsafe { (*mw).type_ } == sys::IBV_MW_TYPE_2;
    if !ok {
        // SAFETY: builders run inside `wr_start` .. `wr_complete`.
        unsafe { with_batch(qp, |sq| sq.wr_fail(EINVAL)) };
        return;
    }
    // SAFETY: checked non-NULL above; the MR in it is NULL or live.
    let info = unsafe { &*bind_info };
    // SAFETY: a live window; the MR in `info` is NULL or live.
    let (remote, objects) = unsafe { super::mw::bind_operands(mw, rkey, info) };
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe {
        begin(qp, SendOp::Bind, |wr| {
            wr.remote = remote;
            wr.bind = objects;
        })
    };
}

/// `wr_local_inv`.
unsafe extern "C" fn wr_local_inv(qp: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: builders run inside `wr_start` .. `wr_complete`.
    unsafe { begin(qp, SendOp::LocalInv, |wr| wr.imm_data = invalidate_rkey) };
}

/// `wr_set_ud_addr`.
unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut sys::ibv_qp_ex,
    ah: *mut sys::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: the application passes NULL or one of its live AHs.
    let ah_num = unsafe { ah_num(ah) };
    // SAFETY: setters run inside `wr_start` .. `wr_complete`.
    unsafe {
        with_batch(qp, |sq| match ah_num {
            Some(ah_num) => sq.wr_set_ud(UdDest {
                ah_num,
                remote_qpn,
                remote_qkey,
            }),
            None => sq.wr_fail(EINVAL),
        })
    };
}

/// `wr_set_sge`.
unsafe extern "C" fn wr_set_sge(qp: *mut sys::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    let sge = [sys::ibv_sge { addr, length, lkey }];
    // SAFETY: setters run inside `wr_start` .. `wr_complete`.
    unsafe { with_batch(qp, |sq| sq.wr_set_sges(&sge)) };
}

/// `wr_set_sge_list`.
unsafe extern "C" fn wr_set_sge_list(
    qp: *mut sys::ibv_qp_ex,
    num_sge: usize,
    sg_list: *const sys::ibv_sge,
) {
    let set = |sq: &mut SendQueue<MappedQueue>| {
        let sges = sq
            .capacity()
            .check_sge_count(num_sge)
            // SAFETY: the application's array of `num_sge` SGEs.
            .and_then(|count| unsafe { sge_array(sg_list, count) });
        match sges {
            Ok(sges) => sq.wr_set_sges(sges),
            Err(err) => sq.wr_fail(err),
        }
    };
    // SAFETY: setters run inside `wr_start` .. `wr_complete`.
    unsafe { with_batch(qp, set) };
}

/// Sets inline payload from `(address, length)` buffers, checking their
/// total length and addresses before reading any (hence an iterator that
/// can be walked more than once).
///
/// # Safety
/// As for [`with_batch`]; each buffer is readable for its length.
unsafe fn set_inline<I>(qp: *mut sys::ibv_qp_ex, buffers: I)
where
    I: Iterator<Item = (*const u8, usize)> + Clone,
{
    let lengths = buffers.clone().map(|(addr, len)| (addr, len as u64));
    let set = |sq: &mut SendQueue<MappedQueue>| {
        let checked = sq
            .capacity()
            .check_inline_len(lengths.clone().map(|(_, len)| len))
            .and_then(|_| check_inline_buffers(lengths));
        match checked {
            Ok(()) => sq.wr_set_inline(
                // SAFETY: readable (contract) and not NULL with a length
                // (checked).
                buffers.map(|(addr, len)| unsafe { buffer(addr, len) }),
            ),
            Err(err) => sq.wr_fail(err),
        }
    };
    // SAFETY: per this function's contract.
    unsafe { with_batch(qp, set) };
}

/// `wr_set_inline_data`.
unsafe extern "C" fn wr_set_inline_data(qp: *mut sys::ibv_qp_ex, addr: *mut c_void, length: usize) {
    let buffer = core::iter::once((addr.cast_const().cast::<u8>(), length));
    // SAFETY: setters run inside `wr_start` .. `wr_complete`; the buffer is
    // the application's, readable for `length` bytes.
    unsafe { set_inline(qp, buffer) };
}

/// `wr_set_inline_data_list`.
unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut sys::ibv_qp_ex,
    num_buf: usize,
    buf_list: *const sys::ibv_data_buf,
) {
    let list = if num_buf == 0 {
        &[][..]
    } else if buf_list.is_null() {
        // SAFETY: setters run inside `wr_start` .. `wr_complete`.
        unsafe { with_batch(qp, |sq| sq.wr_fail(EINVAL)) };
        return;
    } else {
        // SAFETY: the application's array of `num_buf` buffers.
        unsafe { slice::from_raw_parts(buf_list, num_buf) }
    };
    let buffers = list
        .iter()
        .map(|b| (b.addr.cast_const().cast::<u8>(), b.length));
    // SAFETY: setters run inside `wr_start` .. `wr_complete`; each buffer
    // is the application's, readable for its length.
    unsafe { set_inline(qp, buffers) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::{RC_SEND_OPS, UD_SEND_OPS};

    #[test]
    fn builders_follow_the_requested_operations() {
        let mut ex = sys::ibv_qp_ex::default();
        install(&mut ex, UD_SEND_OPS);
        assert!(ex.wr_start.is_some() && ex.wr_complete.is_some() && ex.wr_abort.is_some());
        assert!(ex.wr_set_sge.is_some() && ex.wr_set_sge_list.is_some());
        assert!(ex.wr_set_inline_data.is_some() && ex.wr_set_inline_data_list.is_some());
        assert!(ex.wr_set_ud_addr.is_some());
        assert!(ex.wr_send.is_some() && ex.wr_send_imm.is_some());
        assert!(ex.wr_send_inv.is_none() && ex.wr_rdma_write.is_none());
        assert!(ex.wr_rdma_read.is_none() && ex.wr_atomic_cmp_swp.is_none());

        let mut ex = sys::ibv_qp_ex::default();
        install(&mut ex, RC_SEND_OPS);
        assert!(ex.wr_send_inv.is_some() && ex.wr_rdma_write.is_some());
        assert!(ex.wr_rdma_write_imm.is_some() && ex.wr_rdma_read.is_some());
        assert!(ex.wr_atomic_cmp_swp.is_some() && ex.wr_atomic_fetch_add.is_some());
        assert!(ex.wr_atomic_write.is_some() && ex.wr_flush.is_some());
        assert!(ex.wr_bind_mw.is_some() && ex.wr_local_inv.is_some());
        // Never offered.
        assert!(ex.wr_send_tso.is_none() && ex.wr_set_xrc_srqn.is_none());
    }
}
