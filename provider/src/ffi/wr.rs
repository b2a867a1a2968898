// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Reading the application's work requests: `ibv_send_wr` and
//! `ibv_recv_wr` lists, their SGE arrays, and the buffers inline data is
//! copied from.
//!
//! Counts are checked against what a slot holds before an array is read,
//! and inline lengths before any buffer is, so a bad request fails with
//! `EINVAL` without the provider touching memory on its word.

use core::ffi::c_int;
use core::slice;

use oxe_core::Errno;

use super::ah::ah_num;
use super::lock::Locked;
use super::queue::MappedQueue;
use crate::recv_queue::RecvQueue;
use crate::send_queue::SendQueue;
use crate::sys;
use crate::wqe::{ImmKind, QpKind, Remote, RemoteKind, SendOp, SendWr, UdDest};

const EINVAL: c_int = Errno::EINVAL.to_i32();

/// The SGE array of a request, `count` entries long.
///
/// # Safety
/// `list` is NULL or the application's array of at least `count` entries,
/// valid for `'a`.
pub(crate) unsafe fn sge_array<'a>(
    list: *const sys::ibv_sge,
    count: usize,
) -> Result<&'a [sys::ibv_sge], c_int> {
    if count == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: non-NULL with `count` entries, per the contract.
    Ok(unsafe { slice::from_raw_parts(list, count) })
}

/// The bytes of one inline buffer.
///
/// # Safety
/// `addr` is NULL only with `len` 0, else readable for `len` bytes during
/// `'a` (the caller checked NULL already; see [`check_inline_buffers`]).
pub(crate) unsafe fn buffer<'a>(addr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 || addr.is_null() {
        return &[];
    }
    // SAFETY: readable for `len` bytes, per the contract.
    unsafe { slice::from_raw_parts(addr, len) }
}

/// Refuses a buffer list with a NULL address under a non-zero length.
pub(crate) fn check_inline_buffers(
    mut buffers: impl Iterator<Item = (*const u8, u64)>,
) -> Result<(), c_int> {
    if buffers.any(|(addr, len)| addr.is_null() && len != 0) {
        return Err(EINVAL);
    }
    Ok(())
}

/// Writes one `ibv_send_wr` into the send queue (unpublished).
///
/// # Safety
/// `wr` is the application's request: its union members for the opcode,
/// its SGE array and, for inline sends, its buffers are valid; on UD its
/// AH is NULL or a live AH of this provider.
pub(crate) unsafe fn post_send_one(
    sq: &mut SendQueue<MappedQueue>,
    wr: &sys::ibv_send_wr,
) -> Result<(), c_int> {
    let op = SendOp::from_ibv(wr.opcode).ok_or(EINVAL)?;
    let mut send = SendWr::new(wr.wr_id, op, wr.send_flags);
    send.imm_data = match op.imm() {
        ImmKind::None | ImmKind::Key => 0,
        // SAFETY: an operation with immediate data: the application set
        // `imm_data` (a plain integer either way).
        ImmKind::Imm => unsafe { wr.__bindgen_anon_1.imm_data },
        // SAFETY: SEND_WITH_INV: the application set `invalidate_rkey`.
        ImmKind::Inv => unsafe { wr.__bindgen_anon_1.invalidate_rkey },
    };
    send.remote = match op.remote() {
        RemoteKind::None => Remote::default(),
        RemoteKind::Rdma => {
            // SAFETY: an RDMA operation: the application set `wr.rdma`.
            let rdma = unsafe { wr.wr.rdma };
            Remote {
                addr: rdma.remote_addr,
                rkey: rdma.rkey,
                ..Remote::default()
            }
        }
        RemoteKind::Atomic => {
            // SAFETY: an atomic operation: the application set `wr.atomic`.
            let atomic = unsafe { wr.wr.atomic };
            Remote {
                addr: atomic.remote_addr,
                rkey: atomic.rkey,
                compare_add: atomic.compare_add,
                swap: atomic.swap,
            }
        }
        RemoteKind::Bind => {
            // SAFETY: a bind: the application set `bind_mw`.
            let b = unsafe { wr.__bindgen_anon_2.bind_mw };
            // Only type 2 windows are bound by work requests; type 1 goes
            // through ibv_bind_mw (IBTA 10.6.7.2).
            // SAFETY: NULL or the application's live window.
            if b.mw.is_null() || unsafe { (*b.mw).type_ } != sys::IBV_MW_TYPE_2 {
                return Err(EINVAL);
            }
            // SAFETY: a live window; the MR is NULL or live.
            let (remote, objects) = unsafe { super::mw::bind_operands(b.mw, b.rkey, &b.bind_info) };
            send.bind = objects;
            remote
        }
    };
    if sq.kind() == QpKind::Ud {
        // SAFETY: a UD send (the only operations UD allows, checked when
        // the entry is written): the application set `wr.ud`.
        let ud = unsafe { wr.wr.ud };
        // SAFETY: NULL or a live AH, per the contract.
        send.ud = unsafe { ah_num(ud.ah) }.map(|ah_num| UdDest {
            ah_num,
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
        });
    }
    if wr.send_flags & sys::IBV_SEND_INLINE != 0 {
        let count = usize::try_from(wr.num_sge).map_err(|_| EINVAL)?;
        // SAFETY: the application's array of `num_sge` buffers.
        let bufs = unsafe { sge_array(wr.sg_list, count) }?;
        sq.capacity()
            .check_inline_len(bufs.iter().map(|b| u64::from(b.length)))?;
        check_inline_buffers(
            bufs.iter()
                .map(|b| (b.addr as *const u8, u64::from(b.length))),
        )?;
        sq.post_inline(
            &send,
            bufs.iter()
                // SAFETY: each buffer is readable for its length (contract),
                // and none is NULL with a length (checked above).
                .map(|b| unsafe { buffer(b.addr as *const u8, b.length as usize) }),
        )
    } else {
        let count = sq.capacity().check_sge_count(wr.num_sge)?;
        // SAFETY: the application's array of `num_sge` (= `count`) SGEs.
        let sges = unsafe { sge_array(wr.sg_list, count) }?;
        sq.post_sges(&send, sges)
    }
}

/// Posts an `ibv_recv_wr` list to a receive queue (a QP's or an SRQ's):
/// every request up to the first bad one, which `bad_wr` then names.
///
/// # Safety
/// `list` is the application's NULL-terminated list of valid requests;
/// `bad_wr` is NULL or writable.
pub(crate) unsafe fn post_recv_list(
    rq: &Locked<RecvQueue<MappedQueue>>,
    list: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    let mut rq = rq.lock();
    let mut err = 0;
    let mut wr = list;
    while !wr.is_null() {
        // SAFETY: a non-NULL entry of the application's list.
        let w = unsafe { &*wr };
        let posted = rq
            .capacity()
            .check_sge_count(w.num_sge)
            // SAFETY: the application's array of `num_sge` SGEs.
            .and_then(|count| unsafe { sge_array(w.sg_list, count) })
            .and_then(|sges| rq.post(w.wr_id, sges));
        if let Err(e) = posted {
            err = e;
            if !bad_wr.is_null() {
                // SAFETY: writable, per the contract.
                unsafe { *bad_wr = wr };
            }
            break;
        }
        wr = w.next;
    }
    rq.publish();
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_inline_buffers_only_when_empty() {
        let data = [1u8];
        assert_eq!(
            check_inline_buffers([(data.as_ptr(), 1)].into_iter()),
            Ok(())
        );
        assert_eq!(
            check_inline_buffers([(core::ptr::null(), 0)].into_iter()),
            Ok(())
        );
        assert_eq!(
            check_inline_buffers([(data.as_ptr(), 1), (core::ptr::null(), 4)].into_iter()),
            Err(EINVAL)
        );
    }
}
