// SPDX-License-Identifier: GPL-2.0

//! Device-wide hw counters (rdma_hw_stats) backed by `crate::counters`.

use super::device::IbDev;
use crate::bindings as b;
use crate::counters::NAMES;

const N: usize = NAMES.len();

struct Descs([b::rdma_stat_desc; N]);

// SAFETY: read-only after compile time; only pointers to static strings.
unsafe impl Sync for Descs {}

static DESCS: Descs = Descs(descs());

const fn descs() -> [b::rdma_stat_desc; N] {
    let mut d = [b::rdma_stat_desc {
        name: core::ptr::null(),
        flags: 0,
        priv_: core::ptr::null(),
    }; N];
    let mut i = 0;
    while i < N {
        // `as_char_ptr` is not usable in a const fn; this is the same cast.
        #[allow(clippy::disallowed_methods)]
        let name = NAMES[i].as_ptr().cast();
        d[i].name = name;
        i += 1;
    }
    d
}

/// ops.alloc_hw_device_stats
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn alloc_device_stats(
    _ib: *mut b::ib_device,
) -> *mut b::rdma_hw_stats {
    // Lifespan 0: a read refreshes unless another read came in the same jiffy
    // (ib_core caches for at least that long): tests wait a few ms before reading.
    // SAFETY: static descriptors that outlive every device.
    unsafe { b::rdma_alloc_hw_stats_struct(DESCS.0.as_ptr(), N as i32, 0) }
}

/// ops.get_hw_stats
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn get_stats(
    ib: *mut b::ib_device,
    stats: *mut b::rdma_hw_stats,
    _port: u32,
    _index: kernel::ffi::c_int,
) -> kernel::ffi::c_int {
    // SAFETY: ib_core calls this on a registered oxe device.
    let Some(dev) = (unsafe { IbDev::from_raw(ib) }) else {
        return 0;
    };
    let Ok(drv) = dev.drv() else { return 0 };
    let values = drv.counters.snapshot();
    // SAFETY: `stats` came from alloc_device_stats, so `value` has N entries.
    let out = unsafe { (*stats).value.as_mut_slice(N) };
    for (o, v) in out.iter_mut().zip(values) {
        *o = v;
    }
    N as i32
}
