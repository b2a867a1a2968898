// SPDX-License-Identifier: GPL-2.0

//! The key table: lkey/rkey → MR.
//!
//! A key is a 24-bit index and an 8-bit variant (`oxe_core::key`). Indices are
//! placed in an XArray starting from a random point, and every key gets a
//! random variant that changes again on rereg, so keys are neither sequential
//! nor predictable, and a stale key stops matching. Lookup is an XArray walk
//! (O(log n)) under its lock, and hands out a counted reference: an MR being
//! deregistered is first removed here, so no new user can find it. As for
//! `table.rs`, the receive path looks keys up in softirq, so process-context
//! users hold softirqs off and store atomically.

use crate::ib::error::from_core;
use crate::ib::lock::BhOff;
use crate::mr::Mr;
use crate::oxe_core::key::{Key, KeySource};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};
use kernel::xarray::{AllocKind, XArray};

/// Indices handed out: all 24-bit values but 0 (key 0 never names an MR).
const SOURCE: KeySource = match KeySource::new(1, Key::MAX_INDEX) {
    Ok(s) => s,
    Err(_) => panic!("bad key range"),
};

/// How many occupied slots to step over before giving up; with at most
/// `max_mr` MRs in 2^24 slots this is never reached in practice.
const MAX_PROBES: u32 = 4096;

#[pin_data]
pub(crate) struct KeyTable {
    #[pin]
    xa: XArray<Arc<Mr>>,
    /// Serializes placement (find a free slot, then store) between registrations.
    #[pin]
    placing: Mutex<()>,
}

impl KeyTable {
    pub(crate) fn new() -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(KeyTable {
                xa <- XArray::new(AllocKind::Alloc1),
                placing <- kernel::new_mutex!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// Places `mr` in a free slot and returns its new key.
    pub(crate) fn insert(&self, mr: &Arc<Mr>) -> Result<Key> {
        let _placing = self.placing.lock();
        let mut index = SOURCE.start_hint(crate::ib::random_u32());
        for _ in 0..MAX_PROBES {
            let _bh = BhOff::new();
            let mut xa = self.xa.lock();
            if xa.get(index as usize).is_none() {
                let key = SOURCE
                    .key_for(index, None, crate::ib::random_u32())
                    .map_err(from_core)?;
                xa.store(index as usize, mr.clone(), GFP_ATOMIC)
                    .map_err(|e| e.error)?;
                return Ok(key);
            }
            index = if index >= SOURCE.max_index() {
                SOURCE.min_index()
            } else {
                index + 1
            };
        }
        Err(ENOSPC)
    }

    /// The MR `key` names, if the key is current.
    pub(crate) fn lookup(&self, key: u32) -> Option<Arc<Mr>> {
        let key = Key::from_raw(key);
        let _bh = BhOff::new();
        let guard = self.xa.lock();
        let mr = guard.get(key.index() as usize)?;
        (mr.lkey() == key.raw()).then(|| mr.into())
    }

    /// Takes the MR at `index` out of the table: from now on no key finds it.
    pub(crate) fn remove(&self, index: u32) -> Option<Arc<Mr>> {
        let _bh = BhOff::new();
        let mut xa = self.xa.lock();
        let removed = xa.remove(index as usize);
        drop(xa);
        removed
    }
}
