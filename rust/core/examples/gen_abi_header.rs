// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Prints `oxe-abi.h`, the C view of the oxe driver ABI.
//!
//! Regenerate the checked-in header after changing `src/abi.rs` with
//! `cargo run --example gen_abi_header > oxe-abi.h` (from rust/core); the
//! unit tests fail until the two agree.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut header = String::new();
    if oxe_core::abi::write_c_header(&mut header).is_err() {
        eprintln!("gen_abi_header: formatting the header failed");
        return ExitCode::FAILURE;
    }
    print!("{header}");
    ExitCode::SUCCESS
}
