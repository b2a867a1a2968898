// SPDX-License-Identifier: GPL-2.0

//! The ib_mr objects oxe allocates (ib_core leaves MR allocation to drivers).

use super::debugfs::{object_file, ObjectFile};
use crate::bindings as b;
use crate::mr::{Mr, MrKeys};
use kernel::prelude::*;
use kernel::sync::Arc;

/// An MR as ib_core sees it (the `ib_mr`) plus oxe's shared MR state.
/// Field order is drop order: the debugfs file (which points at the MR) goes first.
#[repr(C)]
struct MrObj {
    ib: b::ib_mr,
    debugfs: Option<ObjectFile<Mr>>,
    mr: Arc<Mr>,
}

/// Allocates the ib_mr for a new MR; ownership passes to ib_core until `free`.
pub(super) fn alloc(
    mr: Arc<Mr>,
    keys: &MrKeys,
    dir: Option<&kernel::debugfs::Dir>,
) -> Result<*mut b::ib_mr> {
    let mut obj = KBox::new(
        MrObj {
            ib: Default::default(),
            debugfs: None,
            mr,
        },
        GFP_KERNEL,
    )?;
    publish(&mut obj.ib, keys);
    let index = crate::oxe_core::Key::from_raw(keys.lkey).index();
    // The file holds a reference to the MR, and goes first when `obj` is freed.
    obj.debugfs = dir.and_then(|d| object_file(d, "mr", index, obj.mr.clone()));
    Ok(KBox::into_raw(obj).cast::<b::ib_mr>())
}

/// Copies the keys and translation ib_core reports back to the caller.
fn publish(ib: &mut b::ib_mr, keys: &MrKeys) {
    ib.lkey = keys.lkey;
    ib.rkey = keys.rkey;
    ib.iova = keys.iova;
    ib.length = keys.length;
    ib.page_size = keys.page_size;
}

/// The oxe MR behind an ib_mr that oxe allocated.
///
/// # Safety
///
/// `ib` must come from `alloc` and not have been freed.
pub(super) unsafe fn get<'a>(ib: *mut b::ib_mr) -> &'a Arc<Mr> {
    // SAFETY: `ib` is the first field of a live MrObj (caller contract).
    unsafe { &(*ib.cast::<MrObj>()).mr }
}

/// Updates the ib_mr after an in-place rereg.
///
/// # Safety
///
/// As for `get`, and the caller must hold ib_core's write lock on the MR (uverbs does).
pub(super) unsafe fn republish(ib: *mut b::ib_mr, keys: &MrKeys) {
    // SAFETY: caller contract.
    publish(unsafe { &mut *ib }, keys);
}

/// Frees an ib_mr from `alloc`.
///
/// # Safety
///
/// As for `get`; ib_core no longer uses `ib`.
pub(super) unsafe fn free(ib: *mut b::ib_mr) {
    // SAFETY: allocated by KBox in `alloc` (caller contract).
    drop(unsafe { KBox::from_raw(ib.cast::<MrObj>()) });
}
