// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Coverage-guided fuzz target for what a peer controls completely: the
//! RoCE packet parser and the ICRC check over a whole IP packet.
//!
//! The input is taken two ways: as a packet from the BTH on (what
//! `packet::parse` sees once UDP has delivered it) and as a packet from
//! the IP header on with its ICRC last (what `icrc::verify` sees). Neither
//! may panic, a parsed payload must lie inside the input, and the sliced
//! CRC must agree with a bit-at-a-time one on every input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxe_core::{icrc, packet};

/// CRC-32 register update, one bit at a time: no table, nothing shared
/// with the implementation under test.
fn crc_bitwise(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ icrc::CRC32_POLY_REFLECTED
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fuzz_target!(|data: &[u8]| {
    if let Some(p) = packet::parse(data) {
        let base = data.as_ptr() as usize;
        let start = p.payload.as_ptr() as usize - base;
        assert!(
            start + p.payload.len() <= data.len(),
            "payload outside the input"
        );
        assert!(start >= 12, "payload overlaps the BTH");
    }
    let _ = icrc::verify(data);
    assert_eq!(icrc::icrc_update(!0, data), crc_bitwise(!0, data));
});
