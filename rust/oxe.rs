// SPDX-License-Identifier: GPL-2.0

//! oxe: a software RoCE v2 RDMA device whose centre is memory registration.
//!
//! This is the module root. It owns the module's lifetime and nothing else:
//! every concern (device, net, keys, MRs, ...) lives in a file of its own.

use kernel::prelude::*;

module! {
    type: OxeModule,
    name: "oxe",
    authors: ["The oxe developers"],
    description: "Software RoCE v2 RDMA device with complete memory registration",
    license: "GPL",
}

struct OxeModule;

impl kernel::Module for OxeModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("loaded\n");
        Ok(OxeModule)
    }
}

impl Drop for OxeModule {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}
