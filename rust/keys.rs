// SPDX-License-Identifier: GPL-2.0

//! The key tables: lkey/rkey → MR, and rkey → memory window.
//!
//! A key is a 24-bit index and an 8-bit variant (`oxe_core::key`). MRs take
//! indices below [`MW_FIRST_INDEX`] and windows the rest, so one rkey never
//! names both, and a window's rkey used as an lkey finds nothing (IBTA: a
//! window is reached remotely only). Indices are placed in an XArray
//! starting from a random point, and every key gets a random variant that
//! changes again on rereg or bind, so keys are neither sequential nor
//! predictable, and a stale key stops matching. Lookup is an XArray walk
//! (O(log n)) under its lock, and hands out a counted reference: an object
//! being destroyed is first removed here, so no new user can find it. As
//! for `table.rs`, the receive path looks keys up in softirq, so
//! process-context users hold softirqs off and store atomically.

#![deny(unsafe_code)]

use crate::ib::error::from_core;
use crate::ib::lock::BhOff;
use crate::oxe_core::key::{Key, KeySource};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};
use kernel::xarray::{AllocKind, XArray};

/// The first index of the windows' half of the key space.
pub(crate) const MW_FIRST_INDEX: u32 = 1 << 23;

/// MR indices: all 23-bit values but 0 (key 0 never names anything).
pub(crate) const MR_KEYS: KeySource = match KeySource::new(1, MW_FIRST_INDEX - 1) {
    Ok(s) => s,
    Err(_) => panic!("bad key range"),
};

/// Window indices: the upper half.
pub(crate) const MW_KEYS: KeySource = match KeySource::new(MW_FIRST_INDEX, Key::MAX_INDEX) {
    Ok(s) => s,
    Err(_) => panic!("bad key range"),
};

/// How many occupied slots to step over before giving up; with at most
/// `max_mr` MRs in 2^23 slots this is never reached in practice.
const MAX_PROBES: u32 = 4096;

/// An object a key names: the key it currently answers to.
pub(crate) trait Keyed: Send + Sync + 'static {
    fn current_key(&self) -> u32;
}

#[pin_data]
pub(crate) struct KeyTable<T: Keyed> {
    #[pin]
    xa: XArray<Arc<T>>,
    source: KeySource,
    /// Serializes placement (find a free slot, then store) between registrations.
    #[pin]
    placing: Mutex<()>,
}

impl<T: Keyed> KeyTable<T> {
    /// A table handing out keys from `source`.
    pub(crate) fn new(source: KeySource) -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(KeyTable {
                xa <- XArray::new(AllocKind::Alloc1),
                source,
                placing <- kernel::new_mutex!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// Places `obj` in a free slot and returns its new key.
    pub(crate) fn insert(&self, obj: &Arc<T>) -> Result<Key> {
        let _placing = self.placing.lock();
        let mut index = self.source.start_hint(crate::ib::random_u32());
        for _ in 0..MAX_PROBES {
            let _bh = BhOff::new();
            let mut xa = self.xa.lock();
            if xa.get(index as usize).is_none() {
                let key = self
                    .source
                    .key_for(index, None, crate::ib::random_u32())
                    .map_err(from_core)?;
                xa.store(index as usize, obj.clone(), GFP_ATOMIC)
                    .map_err(|e| e.error)?;
                return Ok(key);
            }
            index = if index >= self.source.max_index() {
                self.source.min_index()
            } else {
                index + 1
            };
        }
        Err(ENOSPC)
    }

    /// The object `key` names, if the key is current.
    pub(crate) fn lookup(&self, key: u32) -> Option<Arc<T>> {
        self.lookup_index(key)
            .filter(|obj| obj.current_key() == key)
    }

    /// The object at the index `key` names, whatever its variant: for a
    /// bind, which names its window by a key the application may hold
    /// from before the last bind (the PD check that follows keeps it to
    /// the application's own windows).
    pub(crate) fn lookup_index(&self, key: u32) -> Option<Arc<T>> {
        let index = Key::from_raw(key).index();
        if !self.source.contains_index(index) {
            return None;
        }
        let _bh = BhOff::new();
        let guard = self.xa.lock();
        guard.get(index as usize).map(|obj| obj.into())
    }

    /// Takes the object at `index` out of the table: from now on no key finds it.
    pub(crate) fn remove(&self, index: u32) -> Option<Arc<T>> {
        let _bh = BhOff::new();
        let mut xa = self.xa.lock();
        let removed = xa.remove(index as usize);
        drop(xa);
        removed
    }
}
