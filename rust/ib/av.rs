// SPDX-License-Identifier: GPL-2.0

//! Address vectors: where a RoCE v2 packet goes (from a connected QP's path,
//! or a UD address handle), and the address handles user space names by
//! number. Plain data that ib_core's attributes are turned into here, in
//! `ib/`, and that the driver and the packet layer both take.

/// A RoCE v2 path: source and destination GIDs (IPv4-mapped or IPv6) and
/// the IP header fields the GRH asks for.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Av {
    pub(crate) sgid: [u8; 16],
    pub(crate) dgid: [u8; 16],
    pub(crate) flow_label: u32,
    pub(crate) ipv6: bool,
    pub(crate) traffic_class: u8,
    pub(crate) hop_limit: u8,
    /// The source GID's index in the port's table, for queries.
    pub(crate) sgid_index: u8,
}

/// An address handle.
pub(crate) struct Ah {
    pub(crate) av: Av,
    pub(crate) pd: super::objects::PdId,
}
