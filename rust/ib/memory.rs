// SPDX-License-Identifier: GPL-2.0

//! The memory behind an MR, as the data path sees it: pinned pages, or an
//! on-demand paging range. Both answer the same copies and atomics; an ODP
//! range may answer `EAGAIN` (a page is not translated now), which the
//! driver turns into a fault taken in process context.

use super::odp::OdpUmem;
use super::umem::Umem;
use kernel::prelude::*;

/// An MR's memory.
pub(crate) enum Memory {
    Pinned(Umem),
    Odp(OdpUmem),
}

impl Memory {
    /// Copies `data` in from byte `off` of the registered range.
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result {
        match self {
            Memory::Pinned(u) => u.write(off, data),
            Memory::Odp(o) => o.write(off, data),
        }
    }

    /// Copies out from byte `off` of the registered range.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) -> Result {
        match self {
            Memory::Pinned(u) => u.read(off, out),
            Memory::Odp(o) => o.read(off, out),
        }
    }

    /// An 8-byte compare-and-swap or fetch-and-add at byte `off`.
    pub(crate) fn atomic(&self, off: u64, cas: bool, cmp_add: u64, swap: u64) -> Result<u64> {
        match self {
            Memory::Pinned(u) => u.atomic(off, cas, cmp_add, swap),
            Memory::Odp(o) => o.atomic(off, cas, cmp_add, swap),
        }
    }

    /// An 8-byte single store at byte `off`.
    pub(crate) fn atomic_store(&self, off: u64, value: u64) -> Result {
        match self {
            Memory::Pinned(u) => u.atomic_store(off, value),
            Memory::Odp(o) => o.atomic_store(off, value),
        }
    }

    /// Whether `[off, off + len)` is translated now (for writing if
    /// `write`): always for pinned pages; `EAGAIN` for an ODP page that is
    /// not.
    pub(crate) fn probe(&self, off: u64, len: u64, write: bool) -> Result {
        match self {
            Memory::Pinned(_) => Ok(()),
            Memory::Odp(o) => o.probe(off, len, write),
        }
    }

    /// The ODP range, if this is one.
    pub(crate) fn odp(&self) -> Option<&OdpUmem> {
        match self {
            Memory::Pinned(_) => None,
            Memory::Odp(o) => Some(o),
        }
    }

    /// PAGE_SIZE pages the registration spans.
    pub(crate) fn page_count(&self) -> usize {
        match self {
            Memory::Pinned(u) => u.page_count(),
            Memory::Odp(o) => o.page_count(),
        }
    }
}
