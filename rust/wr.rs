// SPDX-License-Identifier: GPL-2.0

//! Work requests and completions as the data path handles them: decoded
//! from ring slots (untrusted bytes), and the completion entries it writes.

#![deny(unsafe_code)]

use crate::ib::queue::Ring;
use crate::oxe_core::abi::{OxeCqe, OxeRecvWqe, OxeSendWqe, OxeSge, OXE_SEND_INLINE};
use kernel::prelude::*;

/// `IBV_WR_*` / `IB_WR_*` opcodes oxe executes.
pub(crate) mod wr_op {
    pub(crate) const RDMA_WRITE: u32 = 0;
    pub(crate) const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub(crate) const SEND: u32 = 2;
    pub(crate) const SEND_WITH_IMM: u32 = 3;
    pub(crate) const RDMA_READ: u32 = 4;
    pub(crate) const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub(crate) const ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub(crate) const LOCAL_INV: u32 = 7;
    pub(crate) const BIND_MW: u32 = 8;
    pub(crate) const SEND_WITH_INV: u32 = 9;
    pub(crate) const FLUSH: u32 = 14;
    pub(crate) const ATOMIC_WRITE: u32 = 15;
    /// IB_WR_REG_MR: kernel consumers only (no user verb posts it).
    pub(crate) const REG_MR: u32 = 0x20;
    /// oxe's own: configure an indirect key (user QPs only).
    pub(crate) const MKEY_CONFIGURE: u32 = crate::oxe_core::abi::OXE_WR_MKEY_CONFIGURE;
}

/// `IBV_WC_*` / `IB_WC_*` completion opcodes.
pub(crate) mod wc_op {
    pub(crate) const SEND: u32 = 0;
    pub(crate) const RDMA_WRITE: u32 = 1;
    pub(crate) const RDMA_READ: u32 = 2;
    pub(crate) const COMP_SWAP: u32 = 3;
    pub(crate) const FETCH_ADD: u32 = 4;
    pub(crate) const BIND_MW: u32 = 5;
    pub(crate) const LOCAL_INV: u32 = 6;
    pub(crate) const FLUSH: u32 = 8;
    pub(crate) const ATOMIC_WRITE: u32 = 9;
    /// IB_WC_REG_MR (kernel consumers only).
    pub(crate) const REG_MR: u32 = 10;
    /// An indirect key configured (`IBV_WC_DRIVER1`).
    pub(crate) const MKEY_CONFIGURE: u32 = crate::oxe_core::abi::OXE_WC_MKEY_CONFIGURE;
    pub(crate) const RECV: u32 = 128;
    pub(crate) const RECV_RDMA_WITH_IMM: u32 = 129;
}

/// `IBV_WC_*` / `IB_WC_*` statuses.
pub(crate) mod wc_status {
    pub(crate) const SUCCESS: u32 = 0;
    pub(crate) const LOC_LEN_ERR: u32 = 1;
    pub(crate) const LOC_QP_OP_ERR: u32 = 2;
    pub(crate) const LOC_PROT_ERR: u32 = 4;
    pub(crate) const WR_FLUSH_ERR: u32 = 5;
    /// IBTA's Memory Management Operation Error: a bind, local invalidate
    /// or fast registration that could not be carried out.
    pub(crate) const MW_BIND_ERR: u32 = 6;
    pub(crate) const BAD_RESP_ERR: u32 = 7;
    pub(crate) const REM_INV_REQ_ERR: u32 = 9;
    pub(crate) const REM_ACCESS_ERR: u32 = 10;
    pub(crate) const REM_OP_ERR: u32 = 11;
    pub(crate) const RETRY_EXC_ERR: u32 = 12;
    pub(crate) const RNR_RETRY_EXC_ERR: u32 = 13;
}

pub(crate) use crate::ib::queue::MAX_SLOT;

/// A work request's SGEs: a list of one (most requests) kept in place, a
/// longer one on the heap. A kmalloc for every request, and its kfree when
/// it completed, were measurable on a small message's path.
pub(crate) enum Sges {
    /// None or one.
    Short(Option<OxeSge>),
    Long(KVec<OxeSge>),
}

impl Sges {
    pub(crate) fn none() -> Self {
        Sges::Short(None)
    }
}

impl core::ops::Deref for Sges {
    type Target = [OxeSge];

    fn deref(&self) -> &[OxeSge] {
        match self {
            Sges::Short(s) => s.as_slice(),
            Sges::Long(v) => v,
        }
    }
}

/// A send work request, copied out of its slot.
pub(crate) struct SendWr {
    pub(crate) wqe: OxeSendWqe,
    pub(crate) sges: Sges,
    /// Inline payload (`OXE_SEND_INLINE`), else empty.
    pub(crate) inline: KVec<u8>,
    /// Message length in bytes.
    pub(crate) len: u32,
}

impl SendWr {
    pub(crate) fn is_inline(&self) -> bool {
        self.wqe.send_flags & OXE_SEND_INLINE != 0
    }
}

/// A receive work request, copied out of its slot.
pub(crate) struct RecvWr {
    pub(crate) wr_id: u64,
    pub(crate) sges: Sges,
    pub(crate) len: u32,
}

impl RecvWr {
    /// Why this WQE may not be taken for a message of `need` bytes: too
    /// short (`EMSGSIZE`), or not `ready` (its ODP pages not there); the
    /// RQ and SRQ then leave it in place.
    pub(crate) fn refusal(&self, need: u32, ready: impl Fn(&RecvWr) -> Result) -> Option<Error> {
        if self.len < need {
            return Some(EMSGSIZE);
        }
        ready(self).err()
    }
}

/// The `n` SGEs after a WQE of `head` bytes in slot `idx`, read one at a
/// time: an SGE list that does not fit the slot is EINVAL.
fn sges_from(ring: &Ring, idx: u32, head: usize, n: usize) -> Result<Sges> {
    let mut raw = [0u8; OxeSge::SIZE];
    let mut read = |i: usize| -> Result<OxeSge> {
        if !ring.read_slot_at(idx, head + i * OxeSge::SIZE, &mut raw) {
            return Err(EINVAL);
        }
        OxeSge::from_bytes(&raw).ok_or(EINVAL)
    };
    match n {
        0 => Ok(Sges::none()),
        1 => Ok(Sges::Short(Some(read(0)?))),
        _ => {
            let mut v = KVec::with_capacity(n, GFP_ATOMIC)?;
            for i in 0..n {
                v.push(read(i)?, GFP_ATOMIC)?;
            }
            Ok(Sges::Long(v))
        }
    }
}

/// The bytes of a slot after its WQE header: what its SGEs or inline data
/// may take (a slot is never larger than [`MAX_SLOT`]).
fn body_len(ring: &Ring, head: usize) -> usize {
    (ring.slot_size() as usize)
        .min(MAX_SLOT)
        .saturating_sub(head)
}

/// Reads send slot `idx`. A slot whose counts do not fit it is EINVAL.
///
/// Only the header and what it says follows are copied, each field once
/// (user space may be rewriting the slot: every value is checked as read).
/// Copying a whole slot through a zeroed buffer of the largest size cost a
/// small message's doorbell about a microsecond under emulation.
pub(crate) fn read_send(ring: &Ring, idx: u32, max_inline: u32) -> Result<SendWr> {
    let mut head = [0u8; OxeSendWqe::SIZE];
    if !ring.read_slot_at(idx, 0, &mut head) {
        return Err(EINVAL);
    }
    let wqe = OxeSendWqe::from_bytes(&head).ok_or(EINVAL)?;
    let body = body_len(ring, OxeSendWqe::SIZE);
    let n = wqe.num_sge as usize;
    // These two carry no local data: ATOMIC WRITE's 8 bytes travel in the
    // header (`compare_add`), and FLUSH has no payload at all.
    if matches!(wqe.opcode, wr_op::ATOMIC_WRITE | wr_op::FLUSH) {
        return Ok(SendWr {
            wqe,
            sges: Sges::none(),
            inline: KVec::new(),
            len: if wqe.opcode == wr_op::ATOMIC_WRITE {
                8
            } else {
                0
            },
        });
    }
    if wqe.send_flags & OXE_SEND_INLINE != 0 {
        if n > body || wqe.num_sge > max_inline {
            return Err(EINVAL);
        }
        let mut inline = KVec::from_elem(0u8, n, GFP_ATOMIC)?;
        if !ring.read_slot_at(idx, OxeSendWqe::SIZE, &mut inline) {
            return Err(EINVAL);
        }
        Ok(SendWr {
            wqe,
            sges: Sges::none(),
            inline,
            len: wqe.num_sge,
        })
    } else {
        if n > body / OxeSge::SIZE {
            return Err(EINVAL);
        }
        let sges = sges_from(ring, idx, OxeSendWqe::SIZE, n)?;
        // An indirect key's configuration moves no data: its slots are
        // entries, which may add up to more than a message.
        let len = if wqe.opcode == wr_op::MKEY_CONFIGURE {
            0
        } else {
            crate::xfer::sge_total(&sges).ok_or(EINVAL)?
        };
        Ok(SendWr {
            wqe,
            sges,
            inline: KVec::new(),
            len,
        })
    }
}

/// Reads receive slot `idx`, as [`read_send`] reads a send slot.
pub(crate) fn read_recv(ring: &Ring, idx: u32) -> Result<RecvWr> {
    let mut head = [0u8; OxeRecvWqe::SIZE];
    if !ring.read_slot_at(idx, 0, &mut head) {
        return Err(EINVAL);
    }
    let wqe = OxeRecvWqe::from_bytes(&head).ok_or(EINVAL)?;
    let n = wqe.num_sge as usize;
    if n > body_len(ring, OxeRecvWqe::SIZE) / OxeSge::SIZE {
        return Err(EINVAL);
    }
    let sges = sges_from(ring, idx, OxeRecvWqe::SIZE, n)?;
    let len = crate::xfer::sge_total(&sges).ok_or(EINVAL)?;
    Ok(RecvWr {
        wr_id: wqe.wr_id,
        sges,
        len,
    })
}

/// A completion for `qpn` with the given identity and outcome.
pub(crate) fn cqe(qpn: u32, wr_id: u64, opcode: u32, status: u32, byte_len: u32) -> OxeCqe {
    OxeCqe {
        wr_id,
        status,
        opcode,
        byte_len,
        qp_num: qpn,
        ..Default::default()
    }
}
