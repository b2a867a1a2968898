// SPDX-License-Identifier: GPL-2.0

//! hw counters (rdma_hw_stats): the names come from the driver as a static
//! table ([`stat_descs`]), the values from [`Driver::stats`]. The one table
//! serves both the device (`hw_counters/`) and its single port
//! (`ports/1/hw_counters/`, which `rdma statistic show link` reads): a port
//! is the whole device.

use super::driver::Driver;
use super::ops::dev_of;
use crate::bindings as b;
use core::ffi::CStr;

/// One counter's name as ib_core reads it (`static`: ib_core keeps a
/// pointer to the table for the device's life).
#[repr(transparent)]
pub(crate) struct StatDesc(b::rdma_stat_desc);

// SAFETY: read-only; holds only a pointer to a static string.
unsafe impl Sync for StatDesc {}

/// The table for `names`, built at compile time into a driver's `static`.
pub(crate) const fn stat_descs<const N: usize>(names: &[&'static CStr; N]) -> [StatDesc; N] {
    let mut d = [const {
        StatDesc(b::rdma_stat_desc {
            name: core::ptr::null(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }; N];
    let mut i = 0;
    while i < N {
        // `as_char_ptr` is not usable in a const fn; this is the same cast.
        #[allow(clippy::disallowed_methods)]
        let name = names[i].as_ptr().cast();
        d[i].0.name = name;
        i += 1;
    }
    d
}

/// ops.alloc_hw_device_stats
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn alloc_device_stats<D: Driver>(
    _ib: *mut b::ib_device,
) -> *mut b::rdma_hw_stats {
    alloc_stats::<D>()
}

/// ops.alloc_hw_port_stats
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn alloc_port_stats<D: Driver>(
    _ib: *mut b::ib_device,
    _port: u32,
) -> *mut b::rdma_hw_stats {
    alloc_stats::<D>()
}

fn alloc_stats<D: Driver>() -> *mut b::rdma_hw_stats {
    let descs = D::stat_descs();
    // Lifespan 0: a read refreshes unless another read came in the same jiffy
    // (ib_core caches for at least that long): tests wait a few ms before reading.
    // SAFETY: a static table (repr(transparent) descriptors) that outlives
    // every device.
    unsafe { b::rdma_alloc_hw_stats_struct(descs.as_ptr().cast(), descs.len() as i32, 0) }
}

/// ops.get_hw_stats
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn get_stats<D: Driver>(
    ib: *mut b::ib_device,
    stats: *mut b::rdma_hw_stats,
    _port: u32,
    _index: kernel::ffi::c_int,
) -> kernel::ffi::c_int {
    // SAFETY: ib_core calls this on a registered device of `D`.
    let Ok((_, drv)) = (unsafe { dev_of::<D>(ib) }) else {
        return 0;
    };
    // SAFETY: `stats` came from alloc_stats, with a `value` of
    // `num_counters` entries.
    let out = unsafe { (*stats).value.as_mut_slice((*stats).num_counters as usize) };
    drv.stats(out);
    out.len() as i32
}
