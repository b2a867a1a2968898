// SPDX-License-Identifier: GPL-2.0

//! Numbered objects (QPs by QPN, SRQs, user address handles): an XArray of
//! counted references, numbers placed from a hint by probing, so they need
//! not be sequential. Lookup is O(log n) and hands out a reference, so an
//! object removed here can still finish what a holder is doing with it.
//!
//! The receive path looks numbers up in softirq, so every process-context
//! use of the XArray's lock holds softirqs off ([`BhOff`]), and stores
//! allocate atomically (they cannot sleep there).

#![deny(unsafe_code)]

use crate::ib::lock::BhOff;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};
use kernel::xarray::{AllocKind, XArray};

/// How many occupied numbers to step over before giving up.
const MAX_PROBES: u32 = 4096;

#[pin_data]
pub(crate) struct Table<T: Send + Sync + 'static> {
    #[pin]
    xa: XArray<Arc<T>>,
    /// Serializes placement (find a free number, then store).
    #[pin]
    placing: Mutex<()>,
    min: u32,
    max: u32,
}

impl<T: Send + Sync + 'static> Table<T> {
    /// A table handing out numbers in `min..=max`.
    pub(crate) fn new(min: u32, max: u32) -> impl PinInit<Self> {
        pin_init!(Table {
            xa <- XArray::new(AllocKind::Alloc),
            placing <- kernel::new_mutex!(()),
            min,
            max,
        })
    }

    /// Places `v` at a free number, starting the search at `hint`.
    pub(crate) fn insert(&self, v: &Arc<T>, hint: u32) -> Result<u32> {
        let _placing = self.placing.lock();
        let span = self.max - self.min + 1;
        let mut n = self.min + hint % span;
        for _ in 0..MAX_PROBES {
            let _bh = BhOff::new();
            let mut xa = self.xa.lock();
            if xa.get(n as usize).is_none() {
                xa.store(n as usize, v.clone(), GFP_ATOMIC)
                    .map_err(|e| e.error)?;
                return Ok(n);
            }
            n = if n >= self.max { self.min } else { n + 1 };
        }
        Err(ENOSPC)
    }

    /// Places `v` at number `n`, which must be free.
    pub(crate) fn insert_at(&self, n: u32, v: &Arc<T>) -> Result {
        let _placing = self.placing.lock();
        let _bh = BhOff::new();
        let mut xa = self.xa.lock();
        if xa.get(n as usize).is_some() {
            return Err(EBUSY);
        }
        xa.store(n as usize, v.clone(), GFP_ATOMIC)
            .map_err(|e| e.error)?;
        Ok(())
    }

    pub(crate) fn get(&self, n: u32) -> Option<Arc<T>> {
        let _bh = BhOff::new();
        let xa = self.xa.lock();
        xa.get(n as usize).map(|v| v.into())
    }

    /// Takes number `n` out; the caller drops what it held, outside the lock.
    pub(crate) fn remove(&self, n: u32) -> Option<Arc<T>> {
        let _bh = BhOff::new();
        let mut xa = self.xa.lock();
        let removed = xa.remove(n as usize);
        drop(xa);
        removed
    }
}
