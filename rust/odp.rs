// SPDX-License-Identifier: GPL-2.0

//! On-demand paging, the driver's side. The data path meets an ODP page
//! that is not translated in softirq, or under a QP's lock, where a fault
//! (which sleeps) cannot be taken. It queues the fault here and backs off
//! without doing anything of what missed:
//!
//! * a packet that misses (an RC or UC request, a datagram, a READ
//!   response or atomic result for the completer) goes to its QP's
//!   backlog as it came, and the packets after it queue behind it. The
//!   backlog's drain runs the fault in process context and processes the
//!   packet again. So a cold page costs a trip through process context,
//!   not a NAK: no RNR timer, no resending of all that followed (RC), no
//!   lost message (UC, which has no NAK, and loses the whole message with
//!   a packet, IBTA 9.8), no lost datagram.
//! * a packet that misses again there (its pages invalidated once more in
//!   between) gets what its transport does for any missing resource: an
//!   RC request is answered RNR NAK (IBTA 9.7.5.2.8), and the requester
//!   sends it again after the RNR timer, spending its RNR retry count, so
//!   a request that keeps missing fails with RNR_RETRY_EXC_ERR: bounded,
//!   as IBTA bounds any RNR wait, and never a storm. A response is
//!   dropped, as if lost, and the requester's retransmit timer asks
//!   again; a UC packet or a datagram is dropped.
//! * the requester, whose gather missed, stops sending; the QP's work
//!   runs the fault once it has let go of the QP, and sends again.
//!
//! A fault brings in what the access needed, then reads ahead the rest of
//! its message (of the SGE, or of the RDMA WRITE), up to [`AHEAD_MAX`],
//! best effort: one miss per message, not one per packet.
//!
//! The faults run in process context: a QP's backlog drain or its work
//! runs those of its own PD, and the device's work item runs whatever is
//! left (prefetches, and misses whose QP has not come for them yet). A
//! range with nothing mapped is marked failed, and the access that wanted
//! it then fails as one outside the MR does: a remote access NAK, or a
//! local protection error.
//!
//! A fault can wait for good: the page may be a file's whose server never
//! answers (FUSE, NFS), and a fault taken for a device is not interrupted
//! by any signal. So nothing that another PD's traffic needs may wait
//! behind a fault: no device-wide runner, and a queue bounded per PD. A
//! fault holds only its MR's fault lock, which only faults of that MR, and
//! the drains of that MR's PD waiting for them, take; a QP's drain runs
//! and waits for its own PD's faults alone. A fault that never ends then
//! holds up its own process's traffic on that PD, and the device's work
//! item, which only prefetches and stragglers rely on.
//!
//! `ibv_advise_mr` prefetches through the same faults, now or from the
//! work item.

#![deny(unsafe_code)]

use crate::counters::inc;
use crate::device::OxeDevice;
use crate::ib::mr::Advice;
use crate::ib::objects::PdId;
use crate::ib::odp::FaultMode;
use crate::mr::Mr;
use crate::oxe_core::AccessOp;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::time::{Instant, Monotonic};

/// One MR's share of the faults: what `rdma statistic mr` shows beside
/// the memory's own page counts.
#[derive(Default)]
pub(crate) struct FaultStats {
    /// Faults of the data path's misses queued for the device's work (a
    /// miss whose fault is queued already is not counted again).
    deferred: AtomicU64,
    /// Of those, the ones the work has run (whether or not the pages could
    /// be had), and how long they waited from the miss to the end of their
    /// fault, in all and at most (ns).
    run: AtomicU64,
    waited_ns: AtomicU64,
    waited_max_ns: AtomicU64,
    /// Ranges ibv_advise_mr asked for.
    prefetches: AtomicU64,
}

impl FaultStats {
    pub(crate) fn deferred(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }

    pub(crate) fn run(&self) -> u64 {
        self.run.load(Ordering::Relaxed)
    }

    pub(crate) fn prefetches(&self) -> u64 {
        self.prefetches.load(Ordering::Relaxed)
    }

    /// The wait of a deferred fault, on average and at most, in µs.
    pub(crate) fn wait_us(&self) -> (u64, u64) {
        let n = self.run().max(1);
        (
            self.waited_ns.load(Ordering::Relaxed) / n / 1000,
            self.waited_max_ns.load(Ordering::Relaxed) / 1000,
        )
    }

    fn waited(&self, since: Instant<Monotonic>) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(0);
        self.run.fetch_add(1, Ordering::Relaxed);
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
        self.waited_max_ns.fetch_max(ns, Ordering::Relaxed);
    }
}

/// A range a data-path access found untranslated.
pub(crate) struct Fault {
    mr: Arc<Mr>,
    /// The PD of the access that missed (the MR's): whose QPs run it.
    pd: PdId,
    iova: u64,
    len: u64,
    /// Bytes past the range that the access's message goes on to need:
    /// faulted after it, best effort (FaultMode::Ahead), so that one miss
    /// brings a message's pages in, not one packet's.
    ahead: u64,
    write: bool,
    /// Demand for the data path's misses; Mapped for a PREFETCH_NO_FAULT
    /// advice.
    mode: FaultMode,
    /// When the data path missed (none for a prefetch).
    missed: Option<Instant<Monotonic>>,
}

/// Read-ahead of a fault stops after this many bytes: a message's pages
/// come in a few faults, and a large receive buffer that a short message
/// lands in costs no more than this.
const AHEAD_MAX: u64 = 1 << 20;

/// Faults of one PD waiting to run. Bounded: a request whose fault was not
/// queued asks again when it is retried. Per PD, so that a PD whose faults
/// never end leaves room for every other's.
const MAX_PENDING_PER_PD: usize = 64;

/// Faults waiting in all: a bound on the queue's memory and on the scans
/// of it, which run in softirq.
const MAX_PENDING: usize = 1024;

/// PDs a full queue looks at for one to give up a fault ([`admit`]).
const EVICT_CANDIDATES: usize = 8;

/// Puts `f` in the queue `q` unless it is there already or its PD has
/// [`MAX_PENDING_PER_PD`] waiting; gives it back if refused. A full queue
/// makes room by evicting the oldest fault of a PD with more waiting than
/// `f`'s (among the first [`EVICT_CANDIDATES`] PDs it holds), so that
/// PDs whose faults never run cannot keep every other out: returns the
/// evicted fault, whose access asks again when it is retried.
fn admit(q: &mut KVec<Fault>, f: Fault) -> Result<Option<Fault>, Fault> {
    let same = |p: &Fault| {
        Arc::ptr_eq(&p.mr, &f.mr) && p.iova == f.iova && p.len == f.len && p.write == f.write
    };
    let waiting = |pd: PdId| q.iter().filter(|p| p.pd == pd).count();
    let ours = waiting(f.pd);
    if ours >= MAX_PENDING_PER_PD || q.iter().any(same) {
        return Err(f);
    }
    let mut evicted = None;
    if q.len() >= MAX_PENDING {
        let mut seen = [PdId::NONE; EVICT_CANDIDATES];
        let mut looked = 0;
        let mut victim = None;
        for (i, p) in q.iter().enumerate() {
            if looked == EVICT_CANDIDATES {
                break;
            }
            if seen[..looked].contains(&p.pd) {
                continue;
            }
            seen[looked] = p.pd;
            looked += 1;
            if waiting(p.pd) > ours + 1 {
                victim = Some(i);
                break;
            }
        }
        let Some(i) = victim else { return Err(f) };
        evicted = q.remove(i).ok();
        if let Some(e) = evicted.as_ref().filter(|e| e.missed.is_some()) {
            e.mr.faults.deferred.fetch_sub(1, Ordering::Relaxed);
        }
    } else if q.reserve(1, GFP_ATOMIC).is_err() {
        return Err(f);
    }
    // Room was made above: this push does not allocate.
    q.push_within_capacity(f).map_err(|e| e.0)?;
    // Counted under the queue's lock, so before the work can run it.
    if let Some(p) = q.last().filter(|p| p.missed.is_some()) {
        p.mr.faults.deferred.fetch_add(1, Ordering::Relaxed);
    }
    Ok(evicted)
}

/// The device's ODP faults: those waiting to run, and the MRs whose fault
/// runs right now, by PD.
#[derive(Default)]
pub(crate) struct FaultQueue {
    pending: KVec<Fault>,
    running: KVec<(PdId, Arc<Mr>)>,
}

impl OxeDevice {
    /// Queues a fault of `[iova, iova + len)` of `mr` (for writing if
    /// `write`) for the device's work, and read-ahead of the `ahead` bytes
    /// after it that the access's message goes on to touch. Any context.
    pub(crate) fn fault_later(
        &self,
        mr: &Arc<Mr>,
        pd: PdId,
        (iova, len, ahead): (u64, u64, u64),
        write: bool,
    ) {
        inc(&self.counters.odp_faults);
        self.queue_fault(Fault {
            mr: mr.clone(),
            pd,
            iova,
            len,
            ahead: ahead.min(AHEAD_MAX),
            write,
            mode: FaultMode::Demand,
            missed: Some(Instant::now()),
        });
    }

    fn queue_fault(&self, f: Fault) {
        // A fault left unqueued (refused, or evicted for this one) is dropped
        // after the lock goes: the last reference to an MR may go with it,
        // and an MR's drop may sleep.
        let (queued, unqueued) = {
            let mut queue = self.faults.lock();
            match admit(&mut queue.pending, f) {
                Ok(evicted) => (true, evicted),
                Err(f) => (false, Some(f)),
            }
        };
        drop(unqueued);
        if queued {
            if let Some(w) = self.fault_work() {
                w.queue();
            }
        }
    }

    /// Runs the queued faults of PD `pd`, or of every PD for the device's
    /// work (`None`); process context. A PD's caller (a backlog's drain
    /// that needs its packet's fault done, a requester whose gather
    /// missed) then also waits for its PD's faults that another caller
    /// is in the middle of, rather than find the queue empty and try its
    /// packet again too early (which would drop it).
    pub(crate) fn run_faults(&self, pd: Option<PdId>) {
        let mine = |p: PdId| pd.is_none_or(|pd| pd == p);
        loop {
            // (Not `while let`: its scrutinee's guard would be held across
            // the fault, which sleeps.)
            let next = {
                let mut queue = self.faults.lock();
                let at = queue.pending.iter().position(|f| mine(f.pd));
                let f = at.and_then(|i| queue.pending.remove(i).ok());
                if let Some(f) = &f {
                    // Untracked if there is no memory for it: a drain of
                    // its PD then may not wait for it, and its packet, if
                    // it misses again, takes the RNR path.
                    let _ = queue.running.push((f.pd, f.mr.clone()), GFP_ATOMIC);
                }
                f
            };
            let Some(f) = next else { break };
            {
                let _one = f.mr.fault_lock.lock();
                // A range with nothing mapped is marked failed
                // (crate::ib::odp), and the access that wanted it then
                // fails as a bad address would; another failure leaves it
                // untranslated, to try again. (Through an indirect key,
                // the MRs its layout names fault.)
                use crate::mr::indirect::fault;
                let r = fault(self, &f.mr, f.iova, f.len, f.write, f.mode);
                if r.is_ok() && f.ahead != 0 {
                    let at = f.iova + f.len;
                    let _ = fault(self, &f.mr, at, f.ahead, f.write, FaultMode::Ahead);
                }
                // Off the list before the lock goes, so that whoever
                // waited on the lock for it does not find it again.
                let mut queue = self.faults.lock();
                let done = |(p, mr): &(PdId, Arc<Mr>)| *p == f.pd && Arc::ptr_eq(mr, &f.mr);
                if let Some(i) = queue.running.iter().position(done) {
                    let _ = queue.running.remove(i);
                }
            }
            if let Some(t) = f.missed {
                f.mr.faults.waited(t);
            }
        }
        let Some(pd) = pd else { return };
        // Faults of this PD that another caller runs now: each waited for
        // by taking its MR's fault lock, which its runner holds until it
        // has taken it off the list.
        loop {
            let busy = {
                let queue = self.faults.lock();
                queue
                    .running
                    .iter()
                    .find(|(p, _)| *p == pd)
                    .map(|(_, mr)| mr.clone())
            };
            let Some(mr) = busy else { break };
            drop(mr.fault_lock.lock());
        }
    }

    /// ibv_advise_mr on PD `pd`: each range names an ODP MR of the PD by
    /// lkey, lies inside it, and a prefetch for writing needs LOCAL_WRITE.
    /// Anything else is EINVAL, before anything is prefetched.
    pub(crate) fn advise_mr(&self, pd: PdId, ranges: &[(u32, u64, u32)], advice: Advice) -> Result {
        inc(&self.counters.odp_prefetch);
        let mode = match advice.fault {
            true => FaultMode::Demand,
            false => FaultMode::Mapped,
        };
        let mut mrs = KVec::with_capacity(ranges.len(), GFP_KERNEL)?;
        for &(lkey, addr, len) in ranges {
            let mr = self.keys.lookup(lkey).ok_or(EINVAL)?;
            let op = if advice.write {
                AccessOp::LocalWrite
            } else {
                AccessOp::LocalRead
            };
            mr.check_rights(pd, op).map_err(|_| EINVAL)?;
            if !mr.is_odp() || !mr.contains(addr, len.into()) {
                return Err(EINVAL);
            }
            mrs.push((mr, addr, u64::from(len)), GFP_KERNEL)?;
        }
        for (mr, addr, len) in mrs {
            mr.faults.prefetches.fetch_add(1, Ordering::Relaxed);
            if advice.sync {
                mr.fault(addr, len, advice.write, mode)?;
            } else {
                self.queue_fault(Fault {
                    mr,
                    pd,
                    iova: addr,
                    len,
                    ahead: 0,
                    write: advice.write,
                    mode,
                    missed: None,
                });
            }
        }
        Ok(())
    }
}
