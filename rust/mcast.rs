// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: which UD QPs of a device are attached to which
//! multicast GID (`ib_attach_mcast`, `ib_detach_mcast`), and to which QPs a
//! packet sent to a group (DestQP 0xFFFFFF) is delivered: a copy to every
//! one attached, each checking its own state and Q_Key as for a datagram
//! sent to it alone.
//!
//! The receive path looks groups up in softirq, so the table sits behind a
//! softirq-safe spinlock. A packet takes only a snapshot of its group's
//! members under it (counted references, no allocation) and is delivered
//! outside it, so no QP lock is ever taken under the table's. Changes run
//! in process context, one at a time: a new group allocates its node and
//! puts its address in the netdev's multicast filter before it is
//! published; joining or leaving an existing group fills or empties one
//! of its fixed slots, which needs no memory, so a QP can always leave.
//!
//! ib_core refuses to destroy a QP that is still attached, and uverbs
//! detaches a QP before destroying it on cleanup; still, a destroyed QP
//! leaves every group it is in ([`Groups::forget`]) before it waits for
//! receivers, so that no softirq can hold it afterwards.

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::netdev::{McFilter, NetDev};
use crate::oxe_core::gid::{self, Gid};
use crate::oxe_core::qp_state::QpType;
use crate::qp::Qp;
use core::sync::atomic::Ordering;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::sync::{Arc, Mutex};

/// Groups per device (query_device's max_mcast_grp).
pub(crate) const MAX_GROUPS: u32 = 8192;
/// QPs per group (max_mcast_qp_attach): a group's slots, fixed when it is
/// created, and the most copies one packet makes.
pub(crate) const MAX_QPS_PER_GROUP: usize = 64;
/// QP attachments over all groups (max_total_mcast_qp_attach).
pub(crate) const MAX_ATTACHMENTS: u32 = 1 << 16;

/// A QP in a group.
struct Member {
    qp: Arc<Qp>,
    /// Successful attaches not yet undone: ib_core counts every one on the
    /// QP (it cannot be destroyed while any is left), so each needs its
    /// own detach.
    attaches: u32,
}

struct Group {
    members: [Option<Member>; MAX_QPS_PER_GROUP],
    /// The group's address in the netdev's filter, removed with the group.
    _filter: McFilter,
}

impl Group {
    /// The slot holding `qp`.
    fn slot_of(&mut self, qp: &Qp) -> Option<&mut Option<Member>> {
        self.members
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|m| core::ptr::eq(&*m.qp, qp)))
    }

    fn is_empty(&self) -> bool {
        self.members.iter().all(Option::is_none)
    }
}

/// What the limits count; changed only with `Groups::changing` held.
#[derive(Default)]
struct Counts {
    groups: u32,
    attachments: u32,
}

/// A device's multicast groups, by GID.
#[pin_data]
pub(crate) struct Groups {
    /// Serializes changes, which may sleep (allocation, the netdev's filter).
    #[pin]
    changing: Mutex<Counts>,
    /// Read by the receive softirq.
    #[pin]
    table: SpinLockBh<RBTree<Gid, Group>>,
}

/// A group's members as one packet sees them.
type Snapshot = [Option<Arc<Qp>>; MAX_QPS_PER_GROUP];

/// What leaves the table in one change, dropped after its lock is released
/// (an emptied group's filter entry is removed in the drop).
type Removed = (Option<Member>, Option<RBTreeNode<Gid, Group>>);

impl Groups {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Groups {
            changing <- kernel::new_mutex!(Counts::default()),
            table <- new_spinlock_bh!(RBTree::new()),
        })
    }

    /// Runs `f` on every QP attached to `mgid`; false if no QP is. Softirq.
    pub(crate) fn for_each_member(&self, mgid: &Gid, mut f: impl FnMut(&Qp)) -> bool {
        let snapshot: Snapshot = {
            let table = self.table.lock();
            let Some(g) = table.get(mgid) else {
                return false;
            };
            g.members
                .each_ref()
                .map(|s| s.as_ref().map(|m| m.qp.clone()))
        };
        for qp in snapshot.iter().flatten() {
            f(qp);
        }
        true
    }

    /// Attaches `qp` to group `mgid`, creating the group (and its filter
    /// entry on `ndev`) if it is the first. Attaching again only counts.
    fn attach(&self, ndev: &NetDev, qp: &Arc<Qp>, mgid: &Gid) -> Result {
        if qp.ty != QpType::Ud || !gid::is_multicast(mgid) {
            return Err(EINVAL);
        }
        let mut counts = self.changing.lock();
        let c = &mut *counts;
        {
            let mut table = self.table.lock();
            if let Some(g) = table.get_mut(mgid) {
                if let Some(Some(m)) = g.slot_of(qp) {
                    m.attaches = m.attaches.checked_add(1).ok_or(ENOMEM)?;
                    return Ok(());
                }
                if c.attachments >= MAX_ATTACHMENTS {
                    return Err(ENOMEM);
                }
                let slot = g.members.iter_mut().find(|s| s.is_none()).ok_or(ENOMEM)?;
                *slot = Some(Member {
                    qp: qp.clone(),
                    attaches: 1,
                });
                c.attachments += 1;
                qp.mcast_groups.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
        }
        if c.groups >= MAX_GROUPS || c.attachments >= MAX_ATTACHMENTS {
            return Err(ENOMEM);
        }
        let mut group = Group {
            members: [const { None }; MAX_QPS_PER_GROUP],
            _filter: McFilter::add(ndev, mgid)?,
        };
        if let Some(first) = group.members.first_mut() {
            *first = Some(Member {
                qp: qp.clone(),
                attaches: 1,
            });
        }
        let node = RBTreeNode::new(*mgid, group, GFP_KERNEL)?;
        // No group of this GID: changes are serialized, and there was none.
        let _none = self.table.lock().insert(node);
        c.groups += 1;
        c.attachments += 1;
        qp.mcast_groups.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Undoes one attach of `qp` to `mgid`; the group goes with its last QP.
    fn detach(&self, qp: &Qp, mgid: &Gid) -> Result {
        let mut counts = self.changing.lock();
        let removed = {
            let mut table = self.table.lock();
            let g = table.get_mut(mgid).ok_or(EINVAL)?;
            let Some(Some(m)) = g.slot_of(qp) else {
                return Err(EINVAL);
            };
            m.attaches -= 1;
            if m.attaches > 0 {
                return Ok(());
            }
            Self::leave(&mut counts, &mut table, qp, mgid)
        };
        drop(removed);
        Ok(())
    }

    /// Takes `qp` out of group `mgid` (which holds it), and the group out of
    /// the table if that empties it. Both locks held.
    fn leave(c: &mut Counts, table: &mut RBTree<Gid, Group>, qp: &Qp, mgid: &Gid) -> Removed {
        let Some(g) = table.get_mut(mgid) else {
            return (None, None);
        };
        let member = g.slot_of(qp).and_then(Option::take);
        if member.is_none() {
            return (None, None);
        }
        c.attachments -= 1;
        qp.mcast_groups.fetch_sub(1, Ordering::Relaxed);
        let node = if g.is_empty() {
            c.groups -= 1;
            table.remove_node(mgid)
        } else {
            None
        };
        (member, node)
    }

    /// Takes a QP being destroyed out of every group it is still in.
    pub(crate) fn forget(&self, qp: &Qp) {
        if qp.mcast_groups.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut counts = self.changing.lock();
        while qp.mcast_groups.load(Ordering::Relaxed) != 0 {
            let removed = {
                let mut table = self.table.lock();
                let mut held = None;
                for (mgid, g) in table.iter_mut() {
                    if g.slot_of(qp).is_some() {
                        held = Some(*mgid);
                        break;
                    }
                }
                let Some(mgid) = held else {
                    break;
                };
                Self::leave(&mut counts, &mut table, qp, &mgid)
            };
            drop(removed);
        }
    }
}

impl OxeDevice {
    /// ib_attach_mcast: `qp` (UD) receives what is sent to group `mgid`.
    pub(crate) fn attach_mcast(&self, qp: &Arc<Qp>, mgid: &Gid) -> Result {
        self.mcast.attach(&self.netdev, qp, mgid)
    }

    /// ib_detach_mcast.
    pub(crate) fn detach_mcast(&self, qp: &Qp, mgid: &Gid) -> Result {
        self.mcast.detach(qp, mgid)
    }
}
