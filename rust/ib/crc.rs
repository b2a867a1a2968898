// SPDX-License-Identifier: GPL-2.0

//! The CRC-32 behind the ICRC's payload pass, chosen by measurement at module
//! load, as the kernel picks its xor and raid6 routines.
//!
//! Two candidates share one register contract (reflected CRC-32, the caller
//! handles the ICRC's seed and final inversion): the kernel's `crc32_le()` and
//! oxe-core's slicing-by-16. Which is faster depends on the machine, not on the
//! kernel's configuration: `crc32_le()` is carry-less multiply on x86 when
//! the kernel has `CONFIG_CRC32_ARCH`, which wins on real hardware, but under
//! QEMU's TCG that instruction is emulated and the table lookups of
//! slicing-by-16 win. So oxe times both at load and keeps the faster;
//! dmesg and `/sys/kernel/debug/oxe/icrc` say which, with the rates
//! measured.

use crate::bindings as b;
use crate::oxe_core::icrc;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::time::{Instant, Monotonic};

/// Whether the payload pass uses the kernel's `crc32_le()` (else slicing-by-16).
static USE_KERNEL: AtomicBool = AtomicBool::new(false);
/// The rates measured at load, in MB/s, for the debugfs view.
static KERNEL_MBPS: AtomicU64 = AtomicU64::new(0);
static SLICED_MBPS: AtomicU64 = AtomicU64::new(0);

/// Bytes per timed pass: a 4 KiB MTU's payload, the common large packet.
const SAMPLE: usize = 4096;
/// Passes per trial, and trials per candidate (the best trial counts, so a
/// preemption or an interrupt during one does not decide).
const PASSES: u32 = 16;
const TRIALS: u32 = 5;

/// Continues a CRC over `bytes` with the routine chosen at load.
pub(crate) fn update(crc: u32, bytes: &[u8]) -> u32 {
    if USE_KERNEL.load(Ordering::Relaxed) {
        kernel_crc32(crc, bytes)
    } else {
        icrc::icrc_update(crc, bytes)
    }
}

fn kernel_crc32(crc: u32, bytes: &[u8]) -> u32 {
    // SAFETY: `bytes` is a valid slice for its length.
    unsafe { b::crc32_le(crc, bytes.as_ptr().cast(), bytes.len()) }
}

/// MB/s of `f` over `buf`: the best of [`TRIALS`] trials of [`PASSES`] passes.
fn rate(buf: &[u8], f: fn(u32, &[u8]) -> u32) -> u64 {
    let mut best_ns = i64::MAX;
    let mut sink = 0u32;
    for _ in 0..TRIALS {
        let t0 = Instant::<Monotonic>::now();
        for _ in 0..PASSES {
            sink = f(sink, buf);
        }
        best_ns = best_ns.min(t0.elapsed().as_nanos().max(1));
    }
    // Keep the passes from being optimised away.
    core::hint::black_box(sink);
    let bytes = (SAMPLE as u64) * u64::from(PASSES);
    // bytes / ns * 1000 = MB/s.
    bytes.saturating_mul(1000) / best_ns.unsigned_abs()
}

/// Times both candidates and keeps the faster (module init). Without memory
/// for the sample buffer, slicing-by-16 stays: it is never slow.
pub(crate) fn calibrate() {
    let Ok(mut buf) = KVec::<u8>::with_capacity(SAMPLE, GFP_KERNEL) else {
        return;
    };
    for i in 0..SAMPLE {
        // Any bytes will do; these are not all alike.
        let _ = buf.push((i as u8).wrapping_mul(31).wrapping_add(7), GFP_KERNEL);
    }
    let kernel = rate(&buf, kernel_crc32);
    let sliced = rate(&buf, icrc::icrc_update);
    KERNEL_MBPS.store(kernel, Ordering::Relaxed);
    SLICED_MBPS.store(sliced, Ordering::Relaxed);
    USE_KERNEL.store(kernel > sliced, Ordering::Relaxed);
    pr_info!(
        "icrc: crc32_le {} MB/s, slicing-by-16 {} MB/s: using {}\n",
        kernel,
        sliced,
        chosen()
    );
}

fn chosen() -> &'static str {
    if USE_KERNEL.load(Ordering::Relaxed) {
        "crc32_le"
    } else {
        "slicing-by-16"
    }
}

/// The debugfs view (`/sys/kernel/debug/oxe/icrc`).
pub(crate) fn describe(w: &mut impl core::fmt::Write) -> core::fmt::Result {
    writeln!(w, "using         {}", chosen())?;
    writeln!(
        w,
        "crc32_le      {} MB/s",
        KERNEL_MBPS.load(Ordering::Relaxed)
    )?;
    writeln!(
        w,
        "slicing-by-16  {} MB/s",
        SLICED_MBPS.load(Ordering::Relaxed)
    )?;
    writeln!(w, "(measured at module load on {SAMPLE}-byte buffers)")
}
