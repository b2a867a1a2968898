// SPDX-License-Identifier: GPL-2.0

//! The memory behind an MR, as the data path sees it: pinned pages, or an
//! on-demand paging range. Both answer the same copies and atomics; an ODP
//! range may answer `EAGAIN` (a page is not translated now), which the
//! driver turns into a fault taken in process context.

use super::odp::OdpUmem;
use super::umem::Umem;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;

/// An MR's memory.
pub(crate) enum Memory {
    Pinned(Umem),
    Odp(OdpUmem),
}

/// Where byte `off` of a registered range is: (page frame, offset in it,
/// bytes left in that page), or why not. Pinned pages and an ODP table
/// both answer it, and the copies below need no more.
type Locate<'a> = dyn Fn(u64) -> Result<(usize, usize, usize)> + 'a;

impl Memory {
    /// Runs `f` with this memory's [`Locate`] (for a write if `write`),
    /// under what keeps its answers valid: the pin, or an ODP table's lock
    /// (an invalidation then waits for the copy). An ODP page that is not
    /// there (writable) answers `EAGAIN`, and nothing is copied past it.
    fn with_locate<R>(&self, write: bool, f: impl FnOnce(&Locate<'_>) -> Result<R>) -> Result<R> {
        match self {
            Memory::Pinned(u) => f(&|o| u.locate(o)),
            Memory::Odp(o) => o.with_pages(|p| f(&|off| p.locate(off, write))),
        }
    }

    /// Copies `data` in from byte `off` of the registered range.
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result {
        self.with_locate(true, |l| copy_in(l, off, data))
    }

    /// Copies out from byte `off` of the registered range.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) -> Result {
        self.with_locate(false, |l| copy_out(l, off, out))
    }

    /// An 8-byte compare-and-swap or fetch-and-add at byte `off` (8-byte
    /// aligned in the address space, so within one page); the original
    /// value.
    pub(crate) fn atomic(&self, off: u64, cas: bool, cmp_add: u64, swap: u64) -> Result<u64> {
        self.with_locate(true, |l| word(l, off, |w| atomic_op(w, cas, cmp_add, swap)))
    }

    /// An 8-byte single store at byte `off`.
    pub(crate) fn atomic_store(&self, off: u64, value: u64) -> Result {
        self.with_locate(true, |l| word(l, off, |w| w.store(value, Ordering::SeqCst)))
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

/// Copies `data` into memory from byte `off`, page by page.
fn copy_in(locate: &Locate<'_>, mut off: u64, mut data: &[u8]) -> Result {
    while !data.is_empty() {
        let (pfn, in_page, room) = locate(off)?;
        let n = room.min(data.len());
        let (now, rest) = data.split_at(n);
        // SAFETY: a page of a live translation (`locate`'s answer, under
        // whatever keeps it valid for the caller); the copy stays within it
        // (`n <= room`), and `now` is `n` bytes of ours.
        unsafe {
            super::umem::with_page(pfn, |va| {
                core::ptr::copy_nonoverlapping(now.as_ptr(), va.add(in_page), n)
            })
        };
        data = rest;
        off += n as u64;
    }
    Ok(())
}

/// Copies from memory, from byte `off`, into `out`, page by page.
fn copy_out(locate: &Locate<'_>, mut off: u64, mut out: &mut [u8]) -> Result {
    while !out.is_empty() {
        let (pfn, in_page, room) = locate(off)?;
        let n = room.min(out.len());
        let (now, rest) = out.split_at_mut(n);
        // SAFETY: as in `copy_in`; `now` is writable for `n` bytes.
        unsafe {
            super::umem::with_page(pfn, |va| {
                core::ptr::copy_nonoverlapping(va.add(in_page), now.as_mut_ptr(), n)
            })
        };
        out = rest;
        off += n as u64;
    }
    Ok(())
}

/// Runs `f` on the aligned 8-byte word at byte `off`, as the CPU's own
/// atomic. IBTA asks that atomics be atomic against each other on the
/// device (IB_ATOMIC_HCA); the CPU's locked instructions give that, and
/// atomicity against the process's own atomics on the page as well.
fn word<R>(locate: &Locate<'_>, off: u64, f: impl FnOnce(&AtomicU64) -> R) -> Result<R> {
    let (pfn, in_page, room) = locate(off)?;
    if room < 8 || in_page % 8 != 0 {
        return Err(EINVAL);
    }
    // SAFETY: a page of a live translation (as in `copy_in`); the word lies
    // within it and is aligned; it is user memory, which others change
    // concurrently (the process, other packets), as the kernel's own
    // atomics on user pages allow.
    Ok(unsafe { super::umem::with_page(pfn, |va| f(AtomicU64::from_ptr(va.add(in_page).cast()))) })
}

/// Compare-and-swap (`cas`) or fetch-and-add on `w`; the original value.
fn atomic_op(w: &AtomicU64, cas: bool, cmp_add: u64, swap: u64) -> u64 {
    if cas {
        match w.compare_exchange(cmp_add, swap, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) | Err(v) => v,
        }
    } else {
        w.fetch_add(cmp_add, Ordering::SeqCst)
    }
}
