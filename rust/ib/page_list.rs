// SPDX-License-Identifier: GPL-2.0

//! The page list of a fast-registration MR: kernel memory a kernel consumer
//! mapped with `ib_map_mr_sg`, which an `IB_WR_REG_MR` then makes the MR's.
//!
//! oxe is a virtual-DMA device, so the "DMA addresses" a consumer maps are
//! kernel virtual addresses in the direct map; the list keeps them as they
//! are and the data path copies through their page frames, as it does for
//! pinned user pages. Each address is checked to lie in the direct map when
//! it is mapped, so a wild address fails `ib_map_mr_sg` instead of being
//! dereferenced later.
//!
//! A list is a run of segments, each a contiguous piece of kernel memory:
//! the pages of an `IB_MR_TYPE_MEM_REG` MR (any page size: one page is
//! contiguous memory), or the scatterlist entries themselves, of any length
//! and alignment, for an `IB_MR_TYPE_SG_GAPS` MR.
//!
//! Two lists per MR, as a device keeps the descriptors a consumer writes
//! apart from the translation in force: mapping fills the staged one, and
//! only the REG_MR work request, in send-queue order, copies it in. A map
//! while the MR is valid therefore cannot change what peers reach through
//! it. The staged list stays as it is: a consumer may register the same
//! mapping again after an invalidate without mapping it again (rtrs-srv
//! does), and the last map is what every REG_MR registers. A REG_MR takes
//! only a mapping that completed (sealed): one that failed halfway, or is
//! under way, is refused. Both lists are allocated at `ib_alloc_mr` for the
//! MR's `max_num_sg`, so neither mapping (which ULPs do in atomic context)
//! nor registration allocates.

use super::lock::{new_spinlock_bh, SpinLockBh};
use crate::bindings as b;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;

/// One contiguous piece: its kernel address, and where it ends counted
/// from the start of the list (so a lookup is a binary search).
#[derive(Clone, Copy)]
struct Seg {
    addr: u64,
    end: u64,
}

/// A list of segments, never grown past the capacity it was made with.
struct List {
    segs: KVec<Seg>,
    /// Page size the consumer mapped with (`ib_mr.page_size`).
    page_size: u32,
}

impl List {
    fn with_capacity(n: usize) -> Result<Self> {
        Ok(List {
            segs: KVec::with_capacity(n, GFP_KERNEL)?,
            page_size: 0,
        })
    }

    fn total(&self) -> u64 {
        self.segs.last().map_or(0, |s| s.end)
    }

    /// Appends `[addr, addr + len)`, which must lie in the direct map;
    /// ENOSPC when the list is full (the MR's `max_num_sg`).
    fn push(&mut self, addr: u64, len: u64) -> Result {
        if self.segs.len() == self.segs.capacity() {
            return Err(ENOSPC);
        }
        let last = addr.checked_add(len.checked_sub(1).ok_or(EINVAL)?);
        let last = last.ok_or(EINVAL)?;
        if !direct_mapped(addr) || !direct_mapped(last) {
            return Err(EFAULT);
        }
        let end = self.total().checked_add(len).ok_or(EINVAL)?;
        // Within capacity: this push does not allocate.
        self.segs.push(Seg { addr, end }, GFP_ATOMIC)?;
        Ok(())
    }

    /// Drops the first `front` bytes and keeps `total` bytes from there:
    /// whole pages were mapped, the data starts `front` bytes into the
    /// first and ends `total` bytes later.
    fn trim(&mut self, front: u64, total: u64) -> Result {
        let Some(first) = self.segs.first_mut() else {
            return if total == 0 { Ok(()) } else { Err(EINVAL) };
        };
        if front >= first.end {
            return Err(EINVAL);
        }
        first.addr += front;
        for s in self.segs.iter_mut() {
            s.end -= front;
        }
        if total > self.total() {
            return Err(EINVAL);
        }
        let keep = self.segs.partition_point(|s| s.end < total) + 1;
        self.segs.truncate(keep);
        if let Some(last) = self.segs.last_mut() {
            last.end = total;
        }
        Ok(())
    }

    /// Where byte `off` of the list is: (page frame, offset in that page,
    /// bytes left in both the page and the segment).
    fn locate(&self, off: u64) -> Result<(usize, usize, usize)> {
        let i = self.segs.partition_point(|s| s.end <= off);
        let seg = self.segs.get(i).ok_or(EINVAL)?;
        let start = if i == 0 { 0 } else { self.segs[i - 1].end };
        let addr = seg.addr + (off - start);
        let in_page = (addr % PAGE_SIZE as u64) as usize;
        let room = (PAGE_SIZE - in_page).min((seg.end - off) as usize);
        // SAFETY: `addr` lies in a segment both of whose ends were checked
        // to be in the direct map when it was pushed; the shim only does
        // arithmetic on it.
        let pfn = unsafe { b::oxe_shim_kva_pfn(addr as kernel::ffi::c_ulong) };
        Ok((pfn as usize, in_page, room))
    }
}

/// Whether `addr` is a kernel address in the direct map (a page the
/// kernel has, not a hole, not vmalloc space, not user space).
fn direct_mapped(addr: u64) -> bool {
    // SAFETY: virt_addr_valid only computes on the address.
    unsafe { b::oxe_shim_kva_valid(addr as kernel::ffi::c_ulong) }
}

struct Lists {
    /// What the data path uses.
    active: List,
    /// What the consumer mapped last, for the next REG_MR.
    staged: List,
    /// The staged mapping completed (`stage_end` succeeded).
    sealed: bool,
}

/// A fast-registration MR's page lists.
#[pin_data]
pub(crate) struct PageList {
    #[pin]
    lists: SpinLockBh<Lists>,
}

/// What a page list holds, for `rdma resource show mr` and debugfs.
pub(crate) struct PageListView {
    pub(crate) segments: usize,
    pub(crate) bytes: u64,
    pub(crate) page_size: u32,
}

impl PageList {
    /// Lists for up to `max` pages (or scatterlist entries) each.
    pub(crate) fn new(max: u32) -> Result<Pin<KBox<Self>>> {
        let n = max as usize;
        let (active, staged) = (List::with_capacity(n)?, List::with_capacity(n)?);
        KBox::pin_init(
            pin_init!(PageList {
                lists <- new_spinlock_bh!(Lists {
                    active,
                    staged,
                    sealed: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Starts a new mapping of pages of `page_size` bytes.
    pub(crate) fn stage_begin(&self, page_size: u32) {
        let mut l = self.lists.lock();
        l.sealed = false;
        l.staged.segs.clear();
        l.staged.page_size = page_size;
    }

    /// Adds kernel memory `[addr, addr + len)` to the mapping.
    pub(crate) fn stage(&self, addr: u64, len: u64) -> Result {
        let mut l = self.lists.lock();
        l.sealed = false;
        l.staged.push(addr, len)
    }

    /// Ends a mapping of whole pages whose data starts `front` bytes into
    /// the first and is `total` bytes long.
    pub(crate) fn stage_end(&self, front: u64, total: u64) -> Result {
        let mut l = self.lists.lock();
        let r = l.staged.trim(front, total);
        l.sealed = r.is_ok();
        r
    }

    /// Leaves the staged mapping unusable (a map that failed).
    pub(crate) fn stage_abort(&self) {
        self.lists.lock().sealed = false;
    }

    /// The REG_MR: the last completed mapping, if it covers `len` bytes,
    /// becomes the one in force (a copy: the staged one stays, for a REG_MR
    /// of the same mapping after an invalidate). EINVAL otherwise.
    pub(crate) fn commit(&self, len: u64) -> Result {
        let mut l = self.lists.lock();
        let l = &mut *l;
        if !l.sealed || len > l.staged.total() {
            return Err(EINVAL);
        }
        l.active.segs.clear();
        // Both lists have the MR's capacity: this copy does not allocate.
        l.active
            .segs
            .extend_from_slice(&l.staged.segs, GFP_ATOMIC)?;
        l.active.page_size = l.staged.page_size;
        Ok(())
    }

    /// Runs `f` with the lookup of the mapping in force, under the lists'
    /// lock (a REG_MR waits for the copy).
    pub(crate) fn with_active<R>(
        &self,
        f: impl FnOnce(&dyn Fn(u64) -> Result<(usize, usize, usize)>) -> R,
    ) -> R {
        let l = self.lists.lock();
        f(&|off| l.active.locate(off))
    }

    pub(crate) fn view(&self) -> PageListView {
        let l = self.lists.lock();
        PageListView {
            segments: l.active.segs.len(),
            bytes: l.active.total(),
            page_size: l.active.page_size,
        }
    }

    /// Writes the mapping in force, a segment a line (up to `max`):
    /// offset in the MR, length, page frame and offset in that page (not
    /// the kernel address, which would give the kernel's layout away).
    pub(crate) fn describe(&self, w: &mut impl core::fmt::Write, max: usize) -> core::fmt::Result {
        let l = self.lists.lock();
        writeln!(w, "seg   offset      length    pfn         in page")?;
        let mut start = 0;
        for (i, s) in l.active.segs.iter().take(max).enumerate() {
            // SAFETY: a pushed segment's address (see `List::locate`).
            let pfn = unsafe { b::oxe_shim_kva_pfn(s.addr as kernel::ffi::c_ulong) };
            let in_page = s.addr % PAGE_SIZE as u64;
            writeln!(
                w,
                "{i:<5} {start:<11} {:<9} {pfn:<#11x} {in_page}",
                s.end - start
            )?;
            start = s.end;
        }
        if l.active.segs.len() > max {
            writeln!(w, "... {} more segments", l.active.segs.len() - max)?;
        }
        Ok(())
    }
}
