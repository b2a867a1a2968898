// SPDX-License-Identifier: GPL-2.0

//! oxe: a software RoCE v2 RDMA device whose centre is memory registration.
//!
//! This is the module root: it registers the `oxe` rdma link type and the
//! netdev notifier, and on unload removes every oxe device. Each concern has
//! a file of its own:
//! - the entry from ib_core: `verbs.rs` (every verb oxe offers);
//! - the device: `device.rs` (attributes, creation), `limits.rs` (its object
//!   limits), `counters.rs`, `mad.rs` (the port's PerfMgmt agent);
//! - memory registration: `mr.rs` (with `mr/fastreg.rs` and
//!   `mr/indirect.rs`), `mw.rs` (memory windows), `keys.rs` (the lkey/rkey
//!   table), `odp.rs` (on-demand paging's faults), `xfer.rs` (every memory
//!   access checked against the registration rules);
//! - the data path: `cq.rs`, `qp.rs`, `srq.rs`, `table.rs` (objects by
//!   number), `wr.rs` (work requests and completions), `req.rs`
//!   (requester), `comp.rs` (completer), `resp.rs` (responder), `recv.rs`
//!   (receive dispatch), `mcast.rs` (multicast groups), `tx.rs` (packet
//!   building);
//! - `bindings.rs` and `ib/`: the only code that touches C.

use kernel::prelude::*;

mod bindings;
mod comp;
mod counters;
mod cq;
mod device;
mod ib;
mod keys;
mod limits;
mod mad;
mod mcast;
mod mr;
mod mw;
mod odp;
#[path = "core/src/lib.rs"]
pub mod oxe_core;
mod qp;
mod recv;
mod req;
mod resp;
mod srq;
mod table;
mod tx;
mod verbs;
mod wr;
mod xfer;

module! {
    type: OxeModule,
    name: "oxe",
    authors: ["The oxe developers"],
    description: "Software RoCE v2 RDMA device with complete memory registration",
    license: "GPL",
    alias: ["rdma-link-oxe"],
    params: {
        max_qp: u32 {
            default: u32::MAX,
            description: "Lowers the QPs a device allows (for tests of exhaustion)",
        },
        max_cq: u32 {
            default: u32::MAX,
            description: "Lowers the CQs a device allows",
        },
        max_srq: u32 {
            default: u32::MAX,
            description: "Lowers the SRQs a device allows",
        },
        max_pd: u32 {
            default: u32::MAX,
            description: "Lowers the PDs a device allows",
        },
        max_mr: u32 {
            default: u32::MAX,
            description: "Lowers the MRs (and MWs) a device allows",
        },
    },
}

struct OxeModule {
    /// Both are `Option` only so that `drop` can end them in the right order.
    link: Option<ib::link::LinkOps>,
    notifier: Option<ib::netdev::Notifier>,
    namespaces: Option<ib::udp::NamespaceWatch>,
}

impl kernel::Module for OxeModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        ib::udp::init();
        ib::chunked_odp::init();
        ib::work::init()?;
        ib::crc::calibrate();
        ib::debugfs::init_root();
        let namespaces = ib::udp::NamespaceWatch::register()?;
        let notifier = ib::netdev::Notifier::register::<device::OxeDevice>()?;
        let link = ib::link::LinkOps::register::<device::OxeDevice>(c"oxe")?;
        pr_info!("loaded\n");
        Ok(OxeModule {
            link: Some(link),
            notifier: Some(notifier),
            namespaces: Some(namespaces),
        })
    }
}

impl Drop for OxeModule {
    fn drop(&mut self) {
        // No new devices (the link type goes), then no devices (queued
        // unregistrations included), then nothing left to notify or to
        // close at a namespace's exit.
        drop(self.link.take());
        ib::device::unregister_all();
        drop(self.notifier.take());
        drop(self.namespaces.take());
        ib::udp::exit();
        ib::chunked_odp::exit();
        ib::work::exit();
        ib::debugfs::remove_root();
        pr_info!("unloaded\n");
    }
}
