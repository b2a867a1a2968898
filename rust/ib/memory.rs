// SPDX-License-Identifier: GPL-2.0

//! The memory behind an MR, as the data path sees it: pinned pages, an
//! on-demand paging range in one piece (HUGETLB), or in children made on
//! demand (any other ODP MR, implicit or not), or the kernel memory a
//! kernel consumer fast-registered (`page_list`). All answer
//! the same copies and atomics; ODP memory may answer `EAGAIN` (a page is
//! not translated now), which the driver turns into a fault taken in
//! process context.

use super::chunked_odp::ChunkedOdp;
use super::odp::{FaultMode, History, OdpUmem};
use super::page_list::PageList;
use super::umem::Umem;
use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;

/// An MR's memory.
pub(crate) enum Memory {
    Pinned(Umem),
    /// A HUGETLB ODP MR: one umem of huge pages.
    Odp(OdpUmem),
    /// Any other ODP MR, in children (for an implicit MR, the whole
    /// address space: offsets are addresses).
    Chunked(ChunkedOdp),
    /// A fast-registration MR's kernel memory: what the last REG_MR put
    /// in force.
    Kernel(Pin<KBox<PageList>>),
    /// No memory of its own: an indirect key, whose bytes are other keys'.
    /// The driver follows its layout before it gets here; any copy asked
    /// of it fails.
    None,
}

/// Where byte `off` of a registered range is: (page frame, offset in it,
/// bytes left in that page), or why not. Pinned pages and an ODP table
/// both answer it, and the copies below need no more.
type Locate<'a> = dyn Fn(u64) -> Result<(usize, usize, usize)> + 'a;

/// What runs on each part of an access that one translation holds: its
/// [`Locate`], the offset of the part there, and which bytes of the
/// access it is.
type Span<'a> = dyn FnMut(&Locate<'_>, u64, Range<usize>) -> Result + 'a;

/// The ODP statistics of an MR's memory.
pub(crate) struct OdpStats {
    pub(crate) implicit: bool,
    /// Pages translated now.
    pub(crate) present: u64,
    pub(crate) history: History,
}

impl Memory {
    /// Runs `f` on the parts of bytes `[off, off + len)` (for a write if
    /// `write`), each under what keeps its translation valid: the pin, or
    /// an ODP table's lock (an invalidation then waits for the copy). A
    /// pinned or HUGETLB range is one part; chunked ODP memory has a part
    /// per child. An ODP page (or child) that is not there (writable)
    /// answers `EAGAIN`, and nothing is copied past it.
    fn spans(&self, off: u64, len: usize, write: bool, f: &mut Span<'_>) -> Result {
        match self {
            Memory::Pinned(u) => f(&|o| u.locate(o), off, 0..len),
            Memory::Odp(o) => o.with_pages(|p| f(&|x| p.locate(x, write), off, 0..len)),
            Memory::Chunked(i) => i.for_each_span(off, len as u64, |child, at, r| {
                child.with_pages(|p| f(&|x| p.locate(x, write), at, r))
            }),
            Memory::Kernel(k) => k.with_active(|l| f(l, off, 0..len)),
            Memory::None => Err(EFAULT),
        }
    }

    /// Copies `data` in from byte `off` of the registered range.
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result {
        self.spans(off, data.len(), true, &mut |l, at, r| {
            copy_in(l, at, &data[r])
        })
    }

    /// Copies out from byte `off` of the registered range.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) -> Result {
        self.spans(off, out.len(), false, &mut |l, at, r| {
            copy_out(l, at, &mut out[r])
        })
    }

    /// Runs `f` on the 8-byte word at byte `off` (8-byte aligned in the
    /// address space, so within one page and one part).
    fn on_word(&self, off: u64, f: impl FnOnce(&AtomicU64) -> u64) -> Result<u64> {
        let mut f = Some(f);
        let mut old = 0;
        self.spans(off, 8, true, &mut |l, at, _| {
            let f = f.take().ok_or(EINVAL)?;
            old = word(l, at, f)?;
            Ok(())
        })?;
        Ok(old)
    }

    /// An 8-byte compare-and-swap or fetch-and-add at byte `off`; the
    /// original value.
    pub(crate) fn atomic(&self, off: u64, cas: bool, cmp_add: u64, swap: u64) -> Result<u64> {
        self.on_word(off, |w| atomic_op(w, cas, cmp_add, swap))
    }

    /// An 8-byte single store at byte `off`.
    pub(crate) fn atomic_store(&self, off: u64, value: u64) -> Result {
        self.on_word(off, |w| {
            w.store(value, Ordering::SeqCst);
            0
        })
        .map(|_| ())
    }

    /// Whether `[off, off + len)` is translated now (for writing if
    /// `write`): always for pinned pages; `EAGAIN` for an ODP page that is
    /// not.
    pub(crate) fn probe(&self, off: u64, len: u64, write: bool) -> Result {
        match self {
            Memory::Pinned(_) | Memory::Kernel(_) => Ok(()),
            Memory::None => Err(EFAULT),
            Memory::Odp(o) => o.probe(off, len, write),
            Memory::Chunked(i) => i.probe(off, len, write),
        }
    }

    /// Brings `[off, off + len)` of ODP memory in (writable if `write`),
    /// as `mode` says. Sleeps: process context. EINVAL for pinned memory.
    pub(crate) fn fault(&self, off: u64, len: u64, write: bool, mode: FaultMode) -> Result {
        match self {
            Memory::Pinned(_) | Memory::Kernel(_) | Memory::None => Err(EINVAL),
            Memory::Odp(o) => o.fault(off, len, write, mode),
            Memory::Chunked(i) => i.fault(off, len, write, mode),
        }
    }

    /// The ODP statistics, if this is ODP memory.
    pub(crate) fn odp_stats(&self) -> Option<OdpStats> {
        let (implicit, present, history) = match self {
            Memory::Pinned(_) | Memory::Kernel(_) | Memory::None => return None,
            Memory::Odp(o) => (false, o.present(), o.history()),
            Memory::Chunked(i) => (i.is_implicit(), i.present(), i.history()),
        };
        Some(OdpStats {
            implicit,
            present,
            history,
        })
    }

    /// PAGE_SIZE pages the memory spans now (for chunked memory, the
    /// pages its children cover).
    pub(crate) fn page_count(&self) -> usize {
        match self {
            Memory::Pinned(u) => u.page_count(),
            Memory::Odp(o) => o.page_count(),
            Memory::Chunked(i) => i.children().1,
            // (Segments: pages for a MEM_REG MR.)
            Memory::Kernel(k) => k.view().segments,
            Memory::None => 0,
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
fn word(locate: &Locate<'_>, off: u64, f: impl FnOnce(&AtomicU64) -> u64) -> Result<u64> {
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
