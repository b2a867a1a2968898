// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The oxe driver-private uverbs ABI: the structs the module copies into
//! `udata`, the layout of the queues it maps into user space, and the work
//! queue and completion entries the two sides exchange through them.
//!
//! Both sides compile these definitions from this file, and the C header
//! (`oxe-abi.h`) is generated from them by [`write_c_header`]; a unit test
//! compares the generated text with the checked-in header, so the Rust
//! structs, the C structs and the two binaries cannot drift apart silently.
//!
//! ABI rules, all checked at compile time below:
//!
//! * `#[repr(C)]`, fields of explicit width only (`u32`, `u64`), no implicit
//!   padding: every byte is a named field, so nothing uninitialised can
//!   leak from kernel to user.
//! * Sizes are multiples of 8, so a later `u64` field can be appended
//!   without changing the alignment of what came before, and uverbs'
//!   "shorter or longer udata" compatibility rules keep working.
//! * Reserved fields are zero when written and ignored when read; they are
//!   the room future versions grow into.
//!
//! Everything crosses as bytes: `to_bytes` builds an image field by field
//! and `from_bytes` reads one back, so neither side needs unsafe code to
//! turn a ring slot or a udata buffer into a struct, and a slot that user
//! space scribbled over is just a struct with odd values, which the kernel
//! then validates like any other input.
//!
//! # Mapped queues
//!
//! Every queue (CQ, SQ, RQ, SRQ) is one `mmap`-able buffer: the producer
//! index at [`OXE_QUEUE_PRODUCER`], the consumer index at
//! [`OXE_QUEUE_CONSUMER`] (a cache line apart, as the two are written by
//! different sides), and `num_slots` slots of `slot_size` bytes from
//! [`OXE_QUEUE_SLOTS`]. Both counts are powers of two. Indices run freely
//! and wrap at 2^32; slot `i` lives at `i & (num_slots - 1)`. A queue is
//! empty when the indices are equal and full when they differ by
//! `num_slots`. The producer fills a slot, then stores the producer index
//! with release ordering; the consumer loads it with acquire ordering,
//! reads the slot, then stores the consumer index with release ordering.
//! Send, receive and SRQ queues are produced by user space and consumed by
//! the kernel; completion queues the other way round. The kernel never
//! trusts an index it reads: a producer index more than `num_slots` ahead
//! of its own consumer index is a broken queue, not a reason to read
//! outside it.
//!
//! # Resized queues
//!
//! Resizing a CQ or an SRQ gives it a new buffer, with a new mapping
//! described in the verb's reply ([`OxeResizeCqResp`],
//! [`OxeResizeSrqResp`]). The entries between the two indices move to the
//! new buffer at the same free-running indices, and both indices carry
//! over unchanged, so neither side's private copy of its own index changes
//! (`queue::Resize` plans the move). The provider holds its queue's lock
//! across the verb, maps the new buffer and unmaps the old one; memory the
//! old mapping covers stays valid until then but is no longer used.

use core::fmt::Write;
use core::mem::{offset_of, size_of};

/// Version of this ABI. Userspace refuses a kernel whose version differs,
/// so bump it only for incompatible changes (appending fields is not one).
pub const OXE_ABI_VERSION: u32 = 1;

/// `caps` bit: rereg with IB_MR_REREG_TRANS is implemented.
pub const OXE_UCTX_CAP_REREG_TRANS: u32 = 1 << 0;
/// `caps` bit: rereg with IB_MR_REREG_PD is implemented.
pub const OXE_UCTX_CAP_REREG_PD: u32 = 1 << 1;
/// `caps` bit: rereg with IB_MR_REREG_ACCESS is implemented.
pub const OXE_UCTX_CAP_REREG_ACCESS: u32 = 1 << 2;

/// `OxeCreateCqCmd::flags`: give the CQ slots of [`OXE_CQE_INLINE_SLOT`]
/// bytes, so that receive completions can carry short messages.
pub const OXE_CREATE_CQ_INLINE_RECV: u32 = 1 << 0;
/// `OxeCreateQpCmd::flags`: never deliver this QP's receives through the
/// completion entry (`OXEDV_QP_CREATE_DISABLE_SCATTER_TO_CQE`).
pub const OXE_CREATE_QP_NO_INLINE_RECV: u32 = 1 << 0;

/// `OxeRegMrCmd::flags`: make an indirect key (`oxedv_create_mkey`), Free
/// until a [`OXE_WR_MKEY_CONFIGURE`] gives it a layout. `start`, `length`
/// and `hca_va` of the verb must be zero.
pub const OXE_REG_MR_INDIRECT: u32 = 1 << 0;
/// `OxeRegMrCmd::flags`, with [`OXE_REG_MR_INDIRECT`]: a peer's SEND with
/// Invalidate may invalidate the key (mlx5's
/// `MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE`).
pub const OXE_REG_MR_REMOTE_INVALIDATE: u32 = 1 << 1;
/// The most entries an indirect key may be created for. One configuration
/// carries its entries in its send WQE, so it is further bounded by the
/// QP's `max_send_sge` (a list entry takes one SGE slot, an interleaved one
/// two).
pub const OXE_MKEY_MAX_ENTRIES: u32 = 32;
/// How deep indirect keys may nest: a key whose entries name indirect keys
/// whose entries name ... MRs, at most this many levels of indirect keys.
pub const OXE_MKEY_MAX_DEPTH: u32 = 4;
/// `OxeSendWqe::opcode` (user QPs): configure an indirect key, in send
/// queue order. `imm_data` is the key it takes: the key's index, which
/// names it, with a variant other than its current one (the provider's
/// `oxedv_mkey` holds the new key from the post on), `swap` the access
/// flags it grants, `compare_add` the number
/// of rounds of an interleaved layout, or 0 for a list. The entries sit in the
/// SGE slots (`num_sge` slots): a list entry is an [`OxeSge`]; an
/// interleaved entry takes two slots, an [`OxeSge`] with its address,
/// bytes per round and key, then one whose `length` is the bytes skipped
/// after each round (its other fields zero). Completes with
/// [`OXE_WC_MKEY_CONFIGURE`].
pub const OXE_WR_MKEY_CONFIGURE: u32 = 0xf0;
/// `OxeCqe::opcode` of a completed [`OXE_WR_MKEY_CONFIGURE`]:
/// `IBV_WC_DRIVER1`, as mlx5 reports its UMR.
pub const OXE_WC_MKEY_CONFIGURE: u32 = 135;

/// Inline receive (`OXE_WC_INLINE`): where the message and the places it
/// goes sit in an inline-receive CQ slot. The slot starts with its
/// [`OxeCqe`], then [`OXE_INLINE_RECV_MAX`] bytes of message at
/// [`OXE_CQE_INLINE_DATA`], then [`OXE_INLINE_RECV_PIECES`]
/// [`OxeInlinePiece`]s at [`OXE_CQE_INLINE_PIECES`]: the user addresses,
/// in the receiving process, of the receive buffer the kernel resolved and
/// checked. The provider copies the message there in order before it
/// reports the completion. The addresses travel with the completion
/// because a receive queue slot is free again once the kernel consumed it,
/// long before the completion is polled, and an SRQ's are consumed in an
/// order no one QP's completions follow.
pub const OXE_CQE_INLINE_SLOT: u32 = 256;
/// Byte offset of an inline message in its slot.
pub const OXE_CQE_INLINE_DATA: u32 = 64;
/// The largest message a completion carries: the threshold of inline
/// receive. mlx5's 128-byte CQEs carry as much.
pub const OXE_INLINE_RECV_MAX: u32 = 64;
/// Byte offset of the first [`OxeInlinePiece`] in its slot.
pub const OXE_CQE_INLINE_PIECES: u32 = 128;
/// How many pieces a receive buffer may be cut into for its message to be
/// delivered inline; one cut into more is written by the kernel as before.
pub const OXE_INLINE_RECV_PIECES: u32 = 8;

/// Byte offset of the producer index (`u32`) in a mapped queue.
pub const OXE_QUEUE_PRODUCER: u32 = 0;
/// Byte offset of the consumer index (`u32`) in a mapped queue.
pub const OXE_QUEUE_CONSUMER: u32 = 64;
/// Byte offset of slot 0 in a mapped queue.
pub const OXE_QUEUE_SLOTS: u32 = 128;

/// `OxeSendWqe::send_flags`: the values of `IBV_SEND_*` and `IB_SEND_*`,
/// which agree.
pub const OXE_SEND_FENCE: u32 = 1 << 0;
/// Generate a completion even on a QP without `sq_sig_all`.
pub const OXE_SEND_SIGNALED: u32 = 1 << 1;
/// Set the solicited-event bit in the last packet.
pub const OXE_SEND_SOLICITED: u32 = 1 << 2;
/// The payload follows the WQE header instead of SGEs; `num_sge` holds
/// its length in bytes.
pub const OXE_SEND_INLINE: u32 = 1 << 3;

/// `OxeCqe::wc_flags`: a GRH (the first 40 bytes of a UD receive buffer)
/// is valid. Translated to `IBV_WC_GRH` / `IB_WC_GRH` by each side, since
/// the user and kernel flag values differ.
pub const OXE_WC_GRH: u32 = 1 << 0;
/// `imm_data` carries immediate data.
pub const OXE_WC_WITH_IMM: u32 = 1 << 1;
/// `imm_data` carries the rkey the sender invalidated.
pub const OXE_WC_WITH_INV: u32 = 1 << 2;
/// The message (`byte_len` bytes, at most [`OXE_INLINE_RECV_MAX`]) is in
/// the slot, for the provider to copy to its pieces (see
/// [`OXE_CQE_INLINE_SLOT`]). Never reported to the application.
pub const OXE_WC_INLINE: u32 = 1 << 3;

/// A field type the ABI allows, with its byte image (native endian: both
/// ends of this ABI run on one machine).
trait AbiField: Copy {
    const C_TYPE: &'static str;
    fn put(self, out: &mut [u8], at: usize);
    fn get(from: &[u8], at: usize) -> Self;
}

macro_rules! abi_field_int {
    ($t:ty, $c:literal) => {
        impl AbiField for $t {
            const C_TYPE: &'static str = $c;
            fn put(self, out: &mut [u8], at: usize) {
                let end = at.wrapping_add(size_of::<$t>());
                if let Some(dst) = out.get_mut(at..end) {
                    dst.copy_from_slice(&self.to_ne_bytes());
                }
            }
            fn get(from: &[u8], at: usize) -> Self {
                let end = at.wrapping_add(size_of::<$t>());
                from.get(at..end)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, <$t>::from_ne_bytes)
            }
        }
    };
}
abi_field_int!(u32, "__u32");
abi_field_int!(u64, "__aligned_u64");

/// One field of a C struct, as the header generator needs it.
struct CField {
    name: &'static str,
    c_type: &'static str,
    offset: usize,
    size: usize,
}

/// One C struct: its name, size and fields in order.
struct CStruct {
    name: &'static str,
    size: usize,
    fields: &'static [CField],
}

/// Defines ABI structs: the Rust struct, its byte image in both
/// directions, and its description for the C header. The description is
/// derived from the same tokens as the struct, so the two cannot disagree.
macro_rules! abi_structs {
    ($(
        $(#[$meta:meta])*
        $c_name:literal => pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident: $ty:ty, )*
        }
    )*) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct $name {
                $( $(#[$fmeta])* pub $field: $ty, )*
            }

            impl $name {
                /// Size of the byte image.
                pub const SIZE: usize = size_of::<$name>();

                /// The byte image, built field by field (no padding exists
                /// to leak, and no unsafe is needed).
                pub fn to_bytes(&self) -> [u8; size_of::<$name>()] {
                    let mut out = [0u8; size_of::<$name>()];
                    self.write_to(&mut out);
                    out
                }

                /// Writes the byte image to the start of `out`; a shorter
                /// `out` receives the fields that fit whole.
                pub fn write_to(&self, out: &mut [u8]) {
                    $( AbiField::put(self.$field, out, offset_of!($name, $field)); )*
                }

                /// Reads an image. Input shorter than the struct is
                /// refused; longer input (from a newer peer) is accepted
                /// and the tail ignored.
                pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
                    if bytes.len() < Self::SIZE {
                        return None;
                    }
                    Some($name {
                        $( $field: AbiField::get(bytes, offset_of!($name, $field)), )*
                    })
                }
            }

            const _: () = assert!(size_of::<$name>() & 7 == 0);
        )*

        const STRUCTS: &[CStruct] = &[$(
            CStruct {
                name: $c_name,
                size: size_of::<$name>(),
                fields: &[$(
                    CField {
                        name: stringify!($field),
                        c_type: <$ty as AbiField>::C_TYPE,
                        offset: offset_of!($name, $field),
                        size: size_of::<$ty>(),
                    },
                )*],
            },
        )*];
    };
}

abi_structs! {
    /// Reply to `alloc_ucontext`: what the provider needs to know about the
    /// kernel side before it can do anything else.
    "oxe_alloc_ucontext_resp" => pub struct OxeAllocUcontextResp {
        /// Must equal [`OXE_ABI_VERSION`]; checked first by the provider.
        pub abi_version: u32,
        /// `OXE_UCTX_CAP_*` bits, so the provider can refuse early (or
        /// emulate) instead of discovering a missing feature through an errno.
        pub caps: u32,
        /// Largest inline send the kernel accepts, in bytes.
        pub max_inline: u32,
        /// The inline-receive threshold: the largest message a receive
        /// completion carries ([`OXE_INLINE_RECV_MAX`]); 0 from a kernel
        /// without inline receive.
        pub inline_recv_max: u32,
    }

    /// Reply to `reg_mr`/`rereg_mr`.
    "oxe_reg_mr_resp" => pub struct OxeRegMrResp {
        /// log2 of the page size the MR was pinned with, which the provider
        /// needs for any userspace-side address translation.
        pub page_shift: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// Where one mapped queue is and how it is cut into slots.
    "oxe_queue_map" => pub struct OxeQueueMap {
        /// The `offset` argument for `mmap` on the verbs file descriptor.
        pub mmap_offset: u64,
        /// The length to map, in bytes (a multiple of the page size).
        pub mmap_len: u64,
        /// Number of slots, a power of two.
        pub num_slots: u32,
        /// Bytes per slot, a power of two.
        pub slot_size: u32,
    }

    /// Driver data of `create_cq`. A provider that sends none gets a CQ of
    /// plain [`OxeCqe`] slots.
    "oxe_create_cq_cmd" => pub struct OxeCreateCqCmd {
        /// `OXE_CREATE_CQ_*` bits.
        pub flags: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// Driver data of `reg_mr`. A provider that sends none registers
    /// memory, as any other.
    "oxe_reg_mr_cmd" => pub struct OxeRegMrCmd {
        /// `OXE_REG_MR_*` bits.
        pub flags: u32,
        /// With [`OXE_REG_MR_INDIRECT`]: the most entries a configuration
        /// may give the key, 1 to [`OXE_MKEY_MAX_ENTRIES`].
        pub max_entries: u32,
    }

    /// Driver data of `create_qp`.
    "oxe_create_qp_cmd" => pub struct OxeCreateQpCmd {
        /// `OXE_CREATE_QP_*` bits.
        pub flags: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// Where a piece of an inline message goes (see [`OXE_CQE_INLINE_SLOT`]).
    "oxe_inline_piece" => pub struct OxeInlinePiece {
        /// A user address in the receiving process.
        pub va: u64,
        /// Bytes of the message that go there, in message order; 0 ends
        /// the list.
        pub length: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// Reply to `create_cq`.
    "oxe_create_cq_resp" => pub struct OxeCreateCqResp {
        /// The completion ring, `num_slots` entries of [`OxeCqe`].
        pub cq: OxeQueueMap,
    }

    /// Reply to `resize_cq`: the CQ's new ring, which replaces the old one
    /// (see "Resized queues" above). The old mapping stays valid until
    /// unmapped but is no longer written.
    "oxe_resize_cq_resp" => pub struct OxeResizeCqResp {
        /// The new completion ring.
        pub cq: OxeQueueMap,
    }

    /// Reply to `create_qp`. A QP on an SRQ has an RQ of zero slots that
    /// must not be mapped.
    "oxe_create_qp_resp" => pub struct OxeCreateQpResp {
        /// The send ring: [`OxeSendWqe`] headers, each followed by SGEs or
        /// inline data.
        pub sq: OxeQueueMap,
        /// The receive ring: [`OxeRecvWqe`] headers, each followed by SGEs.
        pub rq: OxeQueueMap,
        /// Largest inline payload one send slot holds.
        pub max_inline: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// Reply to `create_srq`.
    "oxe_create_srq_resp" => pub struct OxeCreateSrqResp {
        /// The shared receive ring, laid out like a QP's RQ.
        pub srq: OxeQueueMap,
        /// The SRQ number (for XRC; reported for completeness).
        pub srq_num: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// Driver data of `modify_srq`. uverbs' modify_srq has no response,
    /// so a resize (`IB_SRQ_MAX_WR`) writes its reply, an
    /// [`OxeResizeSrqResp`], to user memory at `resize_resp`. The kernel
    /// refuses a user SRQ resize without it: the provider would go on
    /// posting to a ring the kernel no longer reads.
    "oxe_modify_srq_cmd" => pub struct OxeModifySrqCmd {
        /// Address of the reply, in the calling process.
        pub resize_resp: u64,
        /// Bytes there; the kernel writes at most this many.
        pub resize_resp_len: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// Reply to a `modify_srq` that resized the SRQ: its new ring, which
    /// replaces the old one (see "Resized queues" above).
    "oxe_resize_srq_resp" => pub struct OxeResizeSrqResp {
        /// The new shared receive ring.
        pub srq: OxeQueueMap,
    }

    /// Reply to `create_ah`.
    "oxe_create_ah_resp" => pub struct OxeCreateAhResp {
        /// What a UD send names the AH by in [`OxeSendWqe::ah_num`].
        pub ah_num: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// The header of a send-queue slot. `num_sge` [`OxeSge`] entries follow
    /// it, or, with [`OXE_SEND_INLINE`], `num_sge` bytes of payload.
    "oxe_send_wqe" => pub struct OxeSendWqe {
        /// Returned in the completion.
        pub wr_id: u64,
        /// `IBV_WR_*` (equal to `IB_WR_*` for every opcode oxe speaks).
        pub opcode: u32,
        /// `OXE_SEND_*` bits.
        pub send_flags: u32,
        /// SGE count, or the inline length in bytes.
        pub num_sge: u32,
        /// Immediate data as it goes on the wire (big endian), or the
        /// rkey to invalidate for SEND_WITH_INV and LOCAL_INV. BIND_MW:
        /// the window's current rkey. REG_MR (kernel QPs only): the MR's
        /// key when posted, which names the MR.
        pub imm_data: u32,
        /// RDMA and atomic: the remote virtual address. BIND_MW: the start
        /// of the range bound. REG_MR: the MR's new iova.
        pub remote_addr: u64,
        /// RDMA and atomic: the remote key. BIND_MW: the window's new rkey.
        /// REG_MR: the MR's new key.
        pub rkey: u32,
        /// UD: the destination QP number. BIND_MW: the lkey of the MR the
        /// window is bound to.
        pub remote_qpn: u32,
        /// UD: the destination Q_Key.
        pub remote_qkey: u32,
        /// UD: the address handle, as `create_ah` numbered it.
        pub ah_num: u32,
        /// Atomic: the compare value (CAS) or the addend (fetch-and-add).
        /// ATOMIC WRITE: the 8 bytes to store, in memory order. FLUSH and
        /// BIND_MW and REG_MR: the length of the range.
        pub compare_add: u64,
        /// Atomic: the swap value (CAS). FLUSH: its placement type and
        /// selectivity level, packed by [`flush_attrs`]. BIND_MW: the
        /// window's access flags. REG_MR: the MR's.
        pub swap: u64,
    }

    /// The header of a receive-queue slot; `num_sge` [`OxeSge`] follow.
    "oxe_recv_wqe" => pub struct OxeRecvWqe {
        /// Returned in the completion.
        pub wr_id: u64,
        /// SGE count.
        pub num_sge: u32,
        /// Zero; room to grow.
        pub reserved: u32,
    }

    /// One scatter/gather element, as in `ibv_sge`.
    "oxe_sge" => pub struct OxeSge {
        /// Start address, in the MR's address space (its iova).
        pub addr: u64,
        /// Length in bytes.
        pub length: u32,
        /// Local key of the MR that covers it.
        pub lkey: u32,
    }

    /// One completion-queue slot.
    "oxe_cqe" => pub struct OxeCqe {
        /// From the work request.
        pub wr_id: u64,
        /// `IBV_WC_*` status (equal to `IB_WC_*`).
        pub status: u32,
        /// `IBV_WC_*` opcode (equal to `IB_WC_*`).
        pub opcode: u32,
        /// oxe's detail for an error status, for `vendor_err`.
        pub vendor_err: u32,
        /// Bytes received (receives) or transferred (reads, atomics).
        pub byte_len: u32,
        /// Immediate data as on the wire, or the invalidated rkey.
        pub imm_data: u32,
        /// The local QP.
        pub qp_num: u32,
        /// UD receives: the sender's QP.
        pub src_qp: u32,
        /// `OXE_WC_*` bits.
        pub wc_flags: u32,
        /// P_Key index (always 0 on RoCE).
        pub pkey_index: u32,
        /// UD receives: the GRH's network header type
        /// (`RDMA_NETWORK_IPV4` = 1 or `RDMA_NETWORK_IPV6` = 2 for RoCE v2).
        pub network_hdr_type: u32,
        /// Zero; room to grow.
        pub reserved0: u64,
        /// Zero; room to grow.
        pub reserved1: u64,
    }
}

/// A nested ABI struct is a field too: its C type is the struct.
impl AbiField for OxeQueueMap {
    const C_TYPE: &'static str = "struct oxe_queue_map";
    fn put(self, out: &mut [u8], at: usize) {
        if let Some(dst) = out.get_mut(at..) {
            self.write_to(dst);
        }
    }
    fn get(from: &[u8], at: usize) -> Self {
        from.get(at..)
            .and_then(OxeQueueMap::from_bytes)
            .unwrap_or_default()
    }
}

// The two indices sit on cache lines of their own, and slots start on one.
const _: () = assert!(OXE_QUEUE_CONSUMER - OXE_QUEUE_PRODUCER >= 64);
const _: () = assert!(OXE_QUEUE_SLOTS - OXE_QUEUE_CONSUMER >= 64);
const _: () = assert!(OXE_QUEUE_SLOTS % 64 == 0);
const _: () = assert!(OxeSendWqe::SIZE == 64);
const _: () = assert!(OxeRecvWqe::SIZE == 16);
const _: () = assert!(OxeSge::SIZE == 16);
const _: () = assert!(OxeCqe::SIZE == 64);
const _: () = assert!(OxeCqe::SIZE as u32 <= OXE_CQE_INLINE_DATA);
const _: () = assert!(OXE_CQE_INLINE_DATA + OXE_INLINE_RECV_MAX <= OXE_CQE_INLINE_PIECES);
const _: () = assert!(
    OXE_CQE_INLINE_PIECES + OXE_INLINE_RECV_PIECES * OxeInlinePiece::SIZE as u32
        <= OXE_CQE_INLINE_SLOT
);
const _: () = assert!(OXE_CQE_INLINE_SLOT.is_power_of_two());

/// Whether the fields are in offset order, back to back from 0, and fill
/// the struct exactly: i.e. there is no implicit padding the C header
/// would not show.
const fn is_dense(s: &CStruct) -> bool {
    let mut expect = 0usize;
    let mut rest = s.fields;
    while let [f, tail @ ..] = rest {
        if f.offset != expect {
            return false;
        }
        expect = expect.wrapping_add(f.size);
        rest = tail;
    }
    expect == s.size
}

const _: () = {
    let mut rest = STRUCTS;
    while let [s, tail @ ..] = rest {
        assert!(is_dense(s));
        rest = tail;
    }
};

/// Packs a FLUSH's placement type (`IBV_FLUSH_GLOBAL`/`IBV_FLUSH_PERSISTENT`
/// bits) and selectivity level (`IBV_FLUSH_RANGE`/`IBV_FLUSH_MR`) into a
/// send WQE's `swap`: the type in the low byte, the level in the next. FLUSH
/// has no swap value, and reusing the field keeps every slot the same size.
pub const fn flush_attrs(placement: u8, level: u8) -> u64 {
    (placement as u64) | ((level as u64) << 8)
}

/// The (placement type, selectivity level) that [`flush_attrs`] packed.
pub const fn flush_attrs_split(swap: u64) -> (u8, u8) {
    ((swap & 0xff) as u8, ((swap >> 8) & 0xff) as u8)
}

/// Writes `oxe-abi.h`, the C view of this module.
///
/// Generated rather than hand-written so that the header is, by
/// construction, the same ABI as the Rust structs; the checked-in copy is
/// compared against this output by a unit test.
pub fn write_c_header(out: &mut impl Write) -> core::fmt::Result {
    out.write_str(
        "/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */\n\
         /*\n \
         * oxe driver-private uverbs ABI.\n \
         *\n \
         * Generated from rust/core/src/abi.rs by\n \
         * `cargo run --example gen_abi_header`; do not edit.\n \
         */\n\
         #ifndef OXE_ABI_USER_H\n\
         #define OXE_ABI_USER_H\n\
         \n\
         #include <linux/types.h>\n\
         \n",
    )?;
    writeln!(out, "#define OXE_ABI_VERSION {OXE_ABI_VERSION}")?;
    let enums: [(&str, &[(&str, u32)]); 8] = [
        (
            "oxe_uctx_caps",
            &[
                ("OXE_UCTX_CAP_REREG_TRANS", OXE_UCTX_CAP_REREG_TRANS),
                ("OXE_UCTX_CAP_REREG_PD", OXE_UCTX_CAP_REREG_PD),
                ("OXE_UCTX_CAP_REREG_ACCESS", OXE_UCTX_CAP_REREG_ACCESS),
            ],
        ),
        (
            "oxe_create_cq_flags",
            &[("OXE_CREATE_CQ_INLINE_RECV", OXE_CREATE_CQ_INLINE_RECV)],
        ),
        (
            "oxe_create_qp_flags",
            &[("OXE_CREATE_QP_NO_INLINE_RECV", OXE_CREATE_QP_NO_INLINE_RECV)],
        ),
        (
            "oxe_indirect_keys",
            &[
                ("OXE_REG_MR_INDIRECT", OXE_REG_MR_INDIRECT),
                ("OXE_REG_MR_REMOTE_INVALIDATE", OXE_REG_MR_REMOTE_INVALIDATE),
                ("OXE_MKEY_MAX_ENTRIES", OXE_MKEY_MAX_ENTRIES),
                ("OXE_MKEY_MAX_DEPTH", OXE_MKEY_MAX_DEPTH),
                ("OXE_WR_MKEY_CONFIGURE", OXE_WR_MKEY_CONFIGURE),
                ("OXE_WC_MKEY_CONFIGURE", OXE_WC_MKEY_CONFIGURE),
            ],
        ),
        (
            "oxe_inline_recv_layout",
            &[
                ("OXE_CQE_INLINE_SLOT", OXE_CQE_INLINE_SLOT),
                ("OXE_CQE_INLINE_DATA", OXE_CQE_INLINE_DATA),
                ("OXE_INLINE_RECV_MAX", OXE_INLINE_RECV_MAX),
                ("OXE_CQE_INLINE_PIECES", OXE_CQE_INLINE_PIECES),
                ("OXE_INLINE_RECV_PIECES", OXE_INLINE_RECV_PIECES),
            ],
        ),
        (
            "oxe_queue_layout",
            &[
                ("OXE_QUEUE_PRODUCER", OXE_QUEUE_PRODUCER),
                ("OXE_QUEUE_CONSUMER", OXE_QUEUE_CONSUMER),
                ("OXE_QUEUE_SLOTS", OXE_QUEUE_SLOTS),
            ],
        ),
        (
            "oxe_send_flags",
            &[
                ("OXE_SEND_FENCE", OXE_SEND_FENCE),
                ("OXE_SEND_SIGNALED", OXE_SEND_SIGNALED),
                ("OXE_SEND_SOLICITED", OXE_SEND_SOLICITED),
                ("OXE_SEND_INLINE", OXE_SEND_INLINE),
            ],
        ),
        (
            "oxe_wc_flags",
            &[
                ("OXE_WC_GRH", OXE_WC_GRH),
                ("OXE_WC_WITH_IMM", OXE_WC_WITH_IMM),
                ("OXE_WC_WITH_INV", OXE_WC_WITH_INV),
                ("OXE_WC_INLINE", OXE_WC_INLINE),
            ],
        ),
    ];
    for (name, values) in enums {
        writeln!(out, "\nenum {name} {{")?;
        for (n, v) in values {
            if name.ends_with("_layout") {
                writeln!(out, "\t{n} = {v},")?;
            } else {
                writeln!(out, "\t{n} = 1 << {},", v.trailing_zeros())?;
            }
        }
        out.write_str("};\n")?;
    }
    for s in STRUCTS {
        writeln!(out, "\nstruct {} {{", s.name)?;
        for f in s.fields {
            writeln!(out, "\t{} {};", f.c_type, f.name)?;
        }
        out.write_str("};\n")?;
    }
    out.write_str("\n#endif /* OXE_ABI_USER_H */\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;

    #[test]
    fn flush_attrs_round_trip() {
        for placement in [1u8, 2, 3, 0x0f] {
            for level in [0u8, 1] {
                assert_eq!(
                    flush_attrs_split(flush_attrs(placement, level)),
                    (placement, level)
                );
            }
        }
    }

    #[test]
    fn checked_in_header_matches_generated() {
        let mut generated = String::new();
        write_c_header(&mut generated).unwrap();
        let checked_in = include_str!("../oxe-abi.h");
        assert_eq!(
            generated, checked_in,
            "rust/core/oxe-abi.h is stale: regenerate it with \
             `cargo run --example gen_abi_header > oxe-abi.h`"
        );
    }

    #[test]
    fn header_describes_every_field() {
        let mut h = String::new();
        write_c_header(&mut h).unwrap();
        assert!(h.contains("#include <linux/types.h>"));
        assert!(h.contains("#ifndef OXE_ABI_USER_H"));
        assert!(h.contains("#define OXE_ABI_VERSION 1\n"));
        for s in STRUCTS {
            assert!(h.contains(&std::format!("struct {} {{", s.name)));
            for f in s.fields {
                assert!(h.contains(&std::format!("\t{} {};", f.c_type, f.name)));
            }
        }
    }

    #[test]
    fn byte_images_round_trip() {
        let r = OxeAllocUcontextResp {
            abi_version: OXE_ABI_VERSION,
            caps: OXE_UCTX_CAP_REREG_TRANS | OXE_UCTX_CAP_REREG_PD | OXE_UCTX_CAP_REREG_ACCESS,
            max_inline: 0x1122_3344,
            inline_recv_max: 0,
        };
        let b = r.to_bytes();
        assert_eq!(b.len(), OxeAllocUcontextResp::SIZE);
        assert_eq!(&b[8..12], &0x1122_3344u32.to_ne_bytes());
        assert_eq!(OxeAllocUcontextResp::from_bytes(&b), Some(r));
        // A newer kernel may send more; an older one less, which we refuse.
        let mut longer = b.to_vec();
        longer.extend_from_slice(&[9; 8]);
        assert_eq!(OxeAllocUcontextResp::from_bytes(&longer), Some(r));
        assert_eq!(OxeAllocUcontextResp::from_bytes(&b[..15]), None);

        let m = OxeRegMrResp {
            page_shift: 12,
            reserved: 0,
        };
        let b = m.to_bytes();
        assert_eq!(b.len(), OxeRegMrResp::SIZE);
        assert_eq!(OxeRegMrResp::from_bytes(&b), Some(m));
        assert_eq!(OxeRegMrResp::from_bytes(&b[..7]), None);
    }

    #[test]
    fn nested_and_u64_fields_round_trip() {
        let q = OxeCreateQpResp {
            sq: OxeQueueMap {
                mmap_offset: 0x1122_3344_5566_7788,
                mmap_len: 8192,
                num_slots: 64,
                slot_size: 256,
            },
            rq: OxeQueueMap {
                mmap_offset: 0x9000,
                mmap_len: 4096,
                num_slots: 16,
                slot_size: 64,
            },
            max_inline: 128,
            reserved: 0,
        };
        let b = q.to_bytes();
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&b[24..32], &0x9000u64.to_ne_bytes());
        assert_eq!(OxeCreateQpResp::from_bytes(&b), Some(q));

        let w = OxeSendWqe {
            wr_id: u64::MAX,
            opcode: 4,
            send_flags: OXE_SEND_SIGNALED | OXE_SEND_INLINE,
            num_sge: 3,
            imm_data: 0xdead_beef,
            remote_addr: 0x1000,
            rkey: 7,
            remote_qpn: 0x11,
            remote_qkey: 0x8001_0000,
            ah_num: 9,
            compare_add: 1,
            swap: 2,
        };
        assert_eq!(OxeSendWqe::from_bytes(&w.to_bytes()), Some(w));
        let c = OxeCqe {
            wr_id: 5,
            status: 1,
            opcode: 128,
            byte_len: 4096,
            wc_flags: OXE_WC_GRH | OXE_WC_WITH_IMM,
            network_hdr_type: 2,
            ..Default::default()
        };
        assert_eq!(OxeCqe::from_bytes(&c.to_bytes()), Some(c));
    }

    #[test]
    fn resize_structs_round_trip() {
        let map = OxeQueueMap {
            mmap_offset: 0x5000,
            mmap_len: 8192,
            num_slots: 64,
            slot_size: 64,
        };
        let cq = OxeResizeCqResp { cq: map };
        assert_eq!(OxeResizeCqResp::from_bytes(&cq.to_bytes()), Some(cq));
        let srq = OxeResizeSrqResp { srq: map };
        assert_eq!(OxeResizeSrqResp::from_bytes(&srq.to_bytes()), Some(srq));
        let cmd = OxeModifySrqCmd {
            resize_resp: 0x7fff_0000_1000,
            resize_resp_len: OxeResizeSrqResp::SIZE as u32,
            reserved: 0,
        };
        let b = cmd.to_bytes();
        assert_eq!(&b[0..8], &0x7fff_0000_1000u64.to_ne_bytes());
        assert_eq!(OxeModifySrqCmd::from_bytes(&b), Some(cmd));
        // A provider that sends no driver data gives the kernel nothing.
        assert_eq!(OxeModifySrqCmd::from_bytes(&[]), None);
    }

    #[test]
    fn flag_sets_are_distinct_bits() {
        for caps in [
            &[
                OXE_UCTX_CAP_REREG_TRANS,
                OXE_UCTX_CAP_REREG_PD,
                OXE_UCTX_CAP_REREG_ACCESS,
            ][..],
            &[
                OXE_SEND_FENCE,
                OXE_SEND_SIGNALED,
                OXE_SEND_SOLICITED,
                OXE_SEND_INLINE,
            ],
            &[OXE_WC_GRH, OXE_WC_WITH_IMM, OXE_WC_WITH_INV, OXE_WC_INLINE],
        ] {
            for (i, a) in caps.iter().enumerate() {
                assert_eq!(a.count_ones(), 1);
                for b in &caps[i + 1..] {
                    assert_eq!(a & b, 0);
                }
            }
        }
    }
}
