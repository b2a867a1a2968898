// SPDX-License-Identifier: GPL-2.0

//! Management datagrams the device answers itself: its port's Performance
//! Management Agent (`oxe_core::pma`), which is what gives the port its
//! `counters/` directory in sysfs (ib_core creates it for devices with a
//! `process_mad`) and answers a performance manager asking over QP1.

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::oxe_core::pma::{self, Answer, MAD_LEN};
use kernel::prelude::*;

impl OxeDevice {
    /// Answers `req`, a MAD for (or received on) `port`, into `resp`;
    /// `EINVAL` for a port the device does not have.
    pub(crate) fn process_mad(
        &self,
        port: u32,
        req: &[u8; MAD_LEN],
        resp: &mut [u8; MAD_LEN],
    ) -> Result<Answer> {
        if port != 1 {
            return Err(EINVAL);
        }
        Ok(pma::answer(req, resp, 1, &self.counters.port.snapshot()))
    }
}
