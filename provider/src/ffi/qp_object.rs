// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The provider's QP object, its two rings and its send doorbell: what the
//! QP verbs, the posting functions (classic and extended) and memory
//! window binds all reach a QP through.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, size_of_val};

use super::errno::{cmd_fd, errno};
use super::lock::Locked;
use super::queue::MappedQueue;
use crate::recv_queue::RecvQueue;
use crate::send_queue::SendQueue;
use crate::sys;
use crate::verbs::EPROTO;

/// The provider's QP: libibverbs' `verbs_qp` (whose `ibv_qp_ex` the
/// extended posting functions are installed in), then the mapped rings.
#[repr(C)]
pub(crate) struct OxeQp {
    /// Must stay first: libibverbs' `ibv_qp`/`ibv_qp_ex` pointers are
    /// pointers to the `OxeQp`.
    pub(super) vqp: sys::verbs_qp,
    /// Set before the QP is handed out; `None` only during creation.
    pub(super) sq: Option<Locked<SendQueue<MappedQueue>>>,
    /// `None` on an SRQ (and during creation).
    pub(super) rq: Option<Locked<RecvQueue<MappedQueue>>>,
}

const _: () = assert!(offset_of!(OxeQp, vqp) == 0);

/// The send queue of a QP.
///
/// # Safety
/// `qp` must be a live QP of this provider.
pub(crate) unsafe fn send_queue<'a>(
    qp: *mut sys::ibv_qp,
) -> Option<&'a Locked<SendQueue<MappedQueue>>> {
    // SAFETY: a live `OxeQp` (the `ibv_qp` is at offset 0); `sq` is only
    // written before the QP is handed out.
    unsafe { (*qp.cast::<OxeQp>()).sq.as_ref() }
}

/// The receive queue of a QP, `None` on an SRQ.
///
/// # Safety
/// `qp` must be a live QP of this provider.
pub(crate) unsafe fn recv_queue<'a>(
    qp: *mut sys::ibv_qp,
) -> Option<&'a Locked<RecvQueue<MappedQueue>>> {
    // SAFETY: as in `send_queue`.
    unsafe { (*qp.cast::<OxeQp>()).rq.as_ref() }
}

/// The `POST_SEND` command as the doorbell sends it: uverbs' header and
/// core request with no work requests behind it.
#[repr(C)]
#[derive(Default)]
struct Doorbell {
    hdr: sys::ib_uverbs_cmd_hdr,
    core: sys::ib_uverbs_post_send,
}

const _: () = assert!(size_of::<Doorbell>() == size_of::<sys::ibv_post_send>());

/// Tells the kernel the send queue has new entries: a `POST_SEND` write
/// with no work requests in it, which the kernel takes as "look at the
/// ring". Receives need none: the kernel looks when a message arrives.
///
/// # Safety
/// `qp` must be a live QP of this provider.
pub(crate) unsafe fn ring_doorbell(qp: *mut sys::ibv_qp) -> Result<(), c_int> {
    // SAFETY: a live QP.
    let handle = unsafe { (*qp).handle };
    // SAFETY: a live QP.
    let context = unsafe { (*qp).context };
    // SAFETY: a live QP's context is live.
    let cmd_fd = unsafe { cmd_fd(context) };
    let mut resp = sys::ib_uverbs_post_send_resp::default();
    let cmd = Doorbell {
        hdr: sys::ib_uverbs_cmd_hdr {
            command: sys::IB_USER_VERBS_CMD_POST_SEND,
            // Both sizes are small multiples of 4 (uverbs counts words).
            in_words: (size_of::<Doorbell>() / 4) as u16,
            out_words: (size_of_val(&resp) / 4) as u16,
        },
        core: sys::ib_uverbs_post_send {
            response: (&raw mut resp) as usize as u64,
            qp_handle: handle,
            wr_count: 0,
            sge_count: 0,
            wqe_size: size_of::<sys::ibv_send_wr>() as u32,
            ..Default::default()
        },
    };
    // SAFETY: writes the command from a live local of the size given; the
    // kernel writes its reply into `resp`, which lives until the call
    // returns and is not read.
    let written = unsafe { sys::write(cmd_fd, (&raw const cmd).cast(), size_of_val(&cmd)) };
    match usize::try_from(written) {
        Ok(n) if n == size_of_val(&cmd) => Ok(()),
        Ok(_) => Err(EPROTO),
        Err(_) => Err(errno()),
    }
}
