// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (ib_umem) behind an MR.

use super::device::IbDev;
use super::error::from_err_ptr;
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::types::Opaque;

/// A process's address space (its `mm_struct`), as an identity: compared,
/// never dereferenced. 0 (the default) names none. Read from C pointers
/// (`umem->owning_mm`, [`MmRef`]): the kernel crate's `current!().mm()`
/// gave a value that did not compare equal to `umem->owning_mm` here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MmId(usize);

/// The calling process's address space, held (`mmgrab`: the struct, not
/// its pages) so that its identity names no other process for as long as
/// this lives, as ib_umem holds the one it pinned from.
///
/// # Invariants
///
/// `self.0` is an `mm_struct` this handle holds a reference on.
pub(crate) struct MmRef(NonNull<core::ffi::c_void>);

// SAFETY: a counted reference to a kernel object, released from any context.
unsafe impl Send for MmRef {}
// SAFETY: shared access only reads the pointer.
unsafe impl Sync for MmRef {}

impl MmRef {
    /// The calling task's address space; `None` for a kernel thread.
    pub(crate) fn current() -> Option<MmRef> {
        // SAFETY: takes a reference on the calling task's own mm, if any.
        // INVARIANT: non-null means referenced.
        NonNull::new(unsafe { b::oxe_shim_mmgrab_current() }).map(MmRef)
    }

    /// Its identity.
    pub(crate) fn id(&self) -> MmId {
        MmId(self.0.as_ptr() as usize)
    }
}

impl Drop for MmRef {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `current` (type invariant);
        // mmdrop may run in atomic context.
        unsafe { b::oxe_shim_mmdrop(self.0.as_ptr()) };
    }
}

/// User pages pinned by `ib_umem_get` (FOLL_LONGTERM), released on drop.
///
/// # Invariants
///
/// `self.umem` is a pinned umem from `ib_umem_get`.
pub(crate) struct Umem {
    umem: UmemRef<()>,
    /// Page frame numbers of the pinned pages, in address order: the data
    /// path's O(1) translation.
    pfns: KVVec<usize>,
    /// Offset of the first byte within the first page.
    first_off: usize,
}

// SAFETY: an ib_umem is plain data owned by this handle; release may happen on any thread.
unsafe impl Send for Umem {}
// SAFETY: shared access only reads immutable fields.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `[addr, addr + len)` of the calling process, writable when `access`
    /// (IB access flags) needs it.
    pub(crate) fn pin<D: super::driver::Driver>(
        dev: IbDev<D>,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let get = || {
            // SAFETY: `dev` is a registered device (IbDev invariant);
            // ib_umem_get validates the user range itself and returns an
            // ERR_PTR on failure.
            unsafe { b::oxe_shim_ib_umem_get(dev.as_ptr(), addr, len, access as i32) }
        };
        let umem = UmemRef::get(get, ())?;
        // INVARIANT: a successful ib_umem_get.
        let mut u = Umem {
            umem,
            pfns: KVVec::new(),
            first_off: (addr as usize) & (kernel::page::PAGE_SIZE - 1),
        };
        let n = u.page_count();
        let mut pfns = KVVec::with_capacity(n, GFP_KERNEL)?;
        pfns.resize(n, 0, GFP_KERNEL)?;
        let got = u.pfns(0, &mut pfns);
        if got != n {
            return Err(EFAULT);
        }
        u.pfns = pfns;
        Ok(u)
    }

    /// Where byte `off` of the pinned range is: (page frame, offset in it,
    /// bytes left in that page); EFAULT past the end (the caller has
    /// checked the bounds).
    pub(super) fn locate(&self, off: u64) -> Result<(usize, usize, usize)> {
        let abs = usize::try_from(off)
            .ok()
            .and_then(|o| o.checked_add(self.first_off))
            .ok_or(EFAULT)?;
        let page = abs >> kernel::page::PAGE_SHIFT;
        let in_page = abs & (kernel::page::PAGE_SIZE - 1);
        let pfn = *self.pfns.get(page).ok_or(EFAULT)?;
        Ok((pfn, in_page, kernel::page::PAGE_SIZE - in_page))
    }

    fn get(&self) -> &b::ib_umem {
        // SAFETY: live until drop (UmemRef invariant).
        unsafe { &*self.umem.as_ptr() }
    }

    /// Whether the pages were pinned writable (FOLL_WRITE).
    pub(crate) fn writable(&self) -> bool {
        self.get().writable() != 0
    }

    /// The address space the pages were pinned from. ib_umem_get took a
    /// reference on it (`mmgrab`), so no other process can have it while
    /// the pages stay pinned.
    pub(crate) fn owner(&self) -> MmId {
        MmId(self.get().owning_mm as usize)
    }

    /// Number of PAGE_SIZE pages pinned.
    pub(crate) fn page_count(&self) -> usize {
        let u = self.get();
        // ib_umem_get refused any range that overflows, so this cannot be None.
        crate::oxe_core::range::pages_spanned(
            u.address as u64,
            u.length as u64,
            kernel::page::PAGE_SHIFT as u32,
        )
        .map_or(0, |n| n as usize)
    }

    /// Page frame numbers of the pinned pages from page `skip` on, in address
    /// order, into `out`; returns how many were written.
    pub(crate) fn pfns(&self, skip: usize, out: &mut [usize]) -> usize {
        // SAFETY: the umem is live; `out` is valid for `out.len()` entries.
        unsafe {
            b::oxe_shim_umem_pfns(self.umem.as_ptr(), skip, out.as_mut_ptr().cast(), out.len())
        }
    }
}

/// Runs `f` on page `pfn`, mapped into the kernel (kmap_local) for the
/// call.
///
/// # Safety
///
/// `pfn` is a page that stays the registration's for the call: one of a
/// live pin, or an ODP table's entry read under the table's lock.
pub(super) unsafe fn with_page<R>(pfn: usize, f: impl FnOnce(*mut u8) -> R) -> R {
    // SAFETY: a page held for the call (caller contract), mapped until
    // the unmap below.
    let va = unsafe { b::oxe_shim_kmap_local_pfn(pfn as kernel::ffi::c_ulong) };
    let r = f(va.cast());
    // SAFETY: the mapping taken above, the last one this CPU took (`f`
    // took none it did not release).
    unsafe { b::oxe_shim_kunmap_local(va) };
    r
}

/// An ib_umem (pinned or ODP), released on drop in process context:
/// releasing sleeps (unpinning dirty pages takes the page lock; an ODP umem
/// removes its notifier), and an MR's last reference can go in the receive
/// path's softirq. From atomic context the release is deferred to a work
/// item, allocated with the handle so that dropping never allocates,
/// together with `K`, which must live as long as the umem.
///
/// # Invariants
///
/// `self.0` is a live umem, not yet released; `self.1` holds an unused
/// release (work not initialized) until the drop.
pub(super) struct UmemRef<K: Send + 'static>(NonNull<b::ib_umem>, Option<KBox<Release<K>>>);

/// A umem release deferred to process context.
#[repr(C)]
struct Release<K> {
    /// First, so that the work's address is the release's.
    work: Opaque<b::work_struct>,
    umem: *mut b::ib_umem,
    /// Dropped after the release.
    keep: Option<K>,
}

impl<K: Send + 'static> UmemRef<K> {
    /// The umem `get` returns (an ERR_PTR on failure), kept with `keep`.
    pub(super) fn get(get: impl FnOnce() -> *mut b::ib_umem, keep: K) -> Result<Self> {
        let release = KBox::new(
            Release {
                work: Opaque::uninit(),
                umem: core::ptr::null_mut(),
                keep: Some(keep),
            },
            GFP_KERNEL,
        )?;
        let umem = from_err_ptr(get()).and_then(|p| NonNull::new(p).ok_or(ENOMEM))?;
        // INVARIANT: a umem just obtained; an unused release.
        Ok(UmemRef(umem, Some(release)))
    }

    pub(super) fn as_ptr(&self) -> *mut b::ib_umem {
        self.0.as_ptr()
    }

    /// What the handle keeps alive with the umem.
    pub(super) fn keep(&self) -> Option<&K> {
        self.1.as_ref().and_then(|r| r.keep.as_ref())
    }
}

/// The `struct device` of the ib_device a umem belongs to.
///
/// # Safety
///
/// `umem` is a live umem.
unsafe fn device_of(umem: *mut b::ib_umem) -> *mut b::device {
    // SAFETY: a live umem's device is registered (caller contract).
    unsafe { core::ptr::addr_of_mut!((*(*umem).ibdev).__bindgen_anon_1.dev).cast() }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn run_release<K>(work: *mut b::work_struct) {
    // SAFETY: `work` is the first field of a `Release<K>` that
    // `UmemRef::drop` gave up with `KBox::into_raw`; this is its only run.
    let r = unsafe { KBox::from_raw(work.cast::<Release<K>>()) };
    let umem = r.umem;
    // SAFETY: a live umem (the handle's, released here for it), on a
    // device `UmemRef::drop` took a reference to.
    unsafe {
        let dev = device_of(umem);
        b::ib_umem_release(umem);
        b::put_device(dev);
    }
    drop(r);
}

impl<K: Send + 'static> Drop for UmemRef<K> {
    fn drop(&mut self) {
        let umem = self.0.as_ptr();
        // SAFETY: reads this CPU's context.
        let atomic = unsafe { b::oxe_shim_in_atomic() };
        match self.1.take() {
            Some(mut r) if atomic => {
                r.umem = umem;
                // SAFETY: the umem and its device are live; the reference
                // keeps the device until the release has run.
                unsafe { b::get_device(device_of(umem)) };
                let work = r.work.get();
                // SAFETY: INIT_WORK of the box's work, then queued on our
                // unbound queue, drained at module exit; the box is the
                // work's until `run_release` takes it back.
                unsafe {
                    b::init_work_with_key(
                        work,
                        Some(run_release::<K>),
                        false,
                        c"oxe_umem_release".as_char_ptr(),
                        kernel::static_lock_class!().as_ptr(),
                    );
                    let _ = KBox::into_raw(r);
                    b::queue_work_on(
                        b::wq_misc_consts_WORK_CPU_UNBOUND as i32,
                        super::work::unbound_wq(),
                        work,
                    );
                }
            }
            r => {
                // SAFETY: releases the umem, exactly once (type invariant).
                unsafe { b::ib_umem_release(umem) };
                // `keep` goes after the umem.
                drop(r);
            }
        }
    }
}
