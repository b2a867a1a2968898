// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Re-registration of a memory region (`ibv_rereg_mr` / `rereg_user_mr`).
//!
//! A rereg can change the translation (new address range), the PD, and the
//! access rights, in any combination. The dangerous combination is an
//! access change alone that adds a right needing writable pages to an MR
//! whose pages were pinned read-only: keeping the old pin would let the
//! device write to memory the process may only read. Upstream closed that
//! hole (`ib_umem_check_rereg()`, which refuses with `EACCES`); this module
//! makes the same decision explicit as a plan the driver follows.

use super::access::Access;
use super::errno::Errno;

/// Validated rereg flags (`enum ib_mr_rereg_flags`, include/rdma/ib_verbs.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReregFlags(u32);

impl ReregFlags {
    /// Change the address range (and therefore the pinned pages).
    pub const TRANS: u32 = 1 << 0;
    /// Move the MR to another protection domain.
    pub const PD: u32 = 1 << 1;
    /// Change the access rights.
    pub const ACCESS: u32 = 1 << 2;
    /// Every flag the kernel defines (`IB_MR_REREG_SUPPORTED`).
    pub const SUPPORTED: u32 = (Self::ACCESS << 1) - 1;

    /// Checks raw flags from a rereg request.
    ///
    /// No flag at all is `EINVAL`: there is nothing to do, and uverbs
    /// treats it as a malformed command. Undefined bits are `EOPNOTSUPP`,
    /// as `ib_uverbs_rereg_mr()` reports them; using the same errno as the
    /// kernel core means a provider-side check and the kernel's agree.
    pub const fn from_raw(raw: u32) -> Result<ReregFlags, Errno> {
        if raw == 0 {
            return Err(Errno::EINVAL);
        }
        if raw & !Self::SUPPORTED != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(ReregFlags(raw))
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether the translation changes.
    pub const fn trans(self) -> bool {
        self.0 & Self::TRANS != 0
    }

    /// Whether the PD changes.
    pub const fn pd(self) -> bool {
        self.0 & Self::PD != 0
    }

    /// Whether the access rights change.
    pub const fn access(self) -> bool {
        self.0 & Self::ACCESS != 0
    }
}

/// What the MR looks like before the rereg, as far as planning needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrState {
    /// The rights currently in force.
    pub access: Access,
    /// Whether the current pages were pinned writable. Tracked separately
    /// from `access` because a pin outlives access changes that do not
    /// re-pin, so the two can disagree.
    pub pinned_writable: bool,
}

/// Why a rereg has to pin pages again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepinReason {
    /// The caller asked for a new address range.
    NewTranslation,
    /// The new rights need writable pages but the current pin is
    /// read-only (the access-escalation case).
    WritableEscalation,
}

/// The steps a driver must take to carry out a rereg, decided up front so
/// that nothing is changed before every check has passed.
///
/// The keys are not among them: a rereg never changes the lkey or rkey,
/// whatever else it changes. rdma-core's own tests (`test_mr_rereg_*`)
/// exchange keys once and use them after a rereg, mlx5 and rdma_rxe keep
/// them, and IBTA's Reregister Memory Region verb (chapter 11) hands the
/// keys back as outputs without requiring new ones. What protects a peer
/// holding a key is the data path: it checks the MR's current PD, range and
/// rights on every access, so a key that outlives a rereg reaches exactly
/// what the MR grants now, never what it granted before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReregPlan {
    /// The rights the MR will have afterwards (unchanged if ACCESS was not
    /// requested).
    pub new_access: Access,
    /// `Some` if the pages must be pinned again, and why.
    pub repin: Option<RepinReason>,
    /// If re-pinning, whether to pin writable. Always equal to
    /// `new_access.needs_writable_pages()`; spelled out so the driver does
    /// not have to re-derive it.
    pub pin_writable: bool,
    /// Whether the MR moves to a new PD.
    pub change_pd: bool,
}

impl ReregPlan {
    /// Turns the escalation case into `EACCES`, for a driver that reuses the
    /// existing umem and cannot pin again without a new translation. This
    /// is exactly upstream's `ib_umem_check_rereg()` behaviour: userspace
    /// must then pass TRANS to get writable pages.
    pub const fn refuse_escalation(self) -> Result<ReregPlan, Errno> {
        match self.repin {
            Some(RepinReason::WritableEscalation) => Err(Errno::EACCES),
            _ => Ok(self),
        }
    }
}

/// Decides how to carry out a rereg.
///
/// `requested_access` is only read when `flags` has ACCESS, and is then
/// validated exactly as for a fresh registration against
/// `supported_mask` (see [`Access::validate_for_mr`]), because a rereg must
/// not be a way around those rules.
pub const fn plan(
    flags: ReregFlags,
    current: MrState,
    requested_access: u32,
    supported_mask: u32,
) -> Result<ReregPlan, Errno> {
    let new_access = if flags.access() {
        match Access::validate_for_mr(requested_access, supported_mask) {
            Ok(a) => a,
            Err(e) => return Err(e),
        }
    } else {
        current.access
    };
    // ON_DEMAND and HUGETLB say what the translation is (pinned pages or
    // a watched range, and its page size), not what it allows: they change
    // only with a new translation. The request is malformed otherwise
    // (EINVAL), whatever the device supports.
    let shape = Access::ON_DEMAND.bits() | Access::HUGETLB.bits();
    if !flags.trans() && (new_access.bits() ^ current.access.bits()) & shape != 0 {
        return Err(Errno::EINVAL);
    }
    let pin_writable = new_access.needs_writable_pages();
    let repin = if flags.trans() {
        Some(RepinReason::NewTranslation)
    } else if pin_writable && !current.pinned_writable {
        Some(RepinReason::WritableEscalation)
    } else {
        None
    };
    Ok(ReregPlan {
        new_access,
        repin,
        pin_writable,
        change_pd: flags.pd(),
    })
}

#[cfg(test)]
mod tests {
    use super::{plan, Access, Errno, MrState, RepinReason, ReregFlags};

    const MASK: u32 = Access::LOCAL_WRITE.bits()
        | Access::REMOTE_READ.bits()
        | Access::REMOTE_WRITE.bits()
        | Access::REMOTE_ATOMIC.bits()
        | Access::MW_BIND.bits();

    fn ro(access: Access) -> MrState {
        MrState {
            access,
            pinned_writable: false,
        }
    }

    #[test]
    fn on_demand_and_hugetlb_change_only_with_a_translation() {
        let odp = Access::LOCAL_WRITE.union(Access::ON_DEMAND);
        let mask = MASK | Access::ON_DEMAND.bits() | Access::HUGETLB.bits();
        let access = ReregFlags::from_raw(ReregFlags::ACCESS).unwrap();
        let both = ReregFlags::from_raw(ReregFlags::ACCESS | ReregFlags::TRANS).unwrap();
        let lw = Access::LOCAL_WRITE.bits();
        // Toggling either way without TRANS is refused.
        assert_eq!(plan(access, ro(odp), lw, mask), Err(Errno::EINVAL));
        assert_eq!(
            plan(access, ro(Access::LOCAL_WRITE), odp.bits(), mask),
            Err(Errno::EINVAL)
        );
        let huge = odp.bits() | Access::HUGETLB.bits();
        assert_eq!(plan(access, ro(odp), huge, mask), Err(Errno::EINVAL));
        // With TRANS it is a new translation.
        let p = plan(both, ro(odp), lw, mask).unwrap();
        assert_eq!(p.repin, Some(RepinReason::NewTranslation));
        // Keeping ON_DEMAND while changing rights is fine.
        let more = odp.bits() | Access::REMOTE_READ.bits();
        assert!(plan(access, ro(odp), more, mask).is_ok());
    }

    #[test]
    fn flag_values_match_ib_verbs_h() {
        assert_eq!(ReregFlags::TRANS, 1);
        assert_eq!(ReregFlags::PD, 2);
        assert_eq!(ReregFlags::ACCESS, 4);
        assert_eq!(ReregFlags::SUPPORTED, 7);
    }

    #[test]
    fn flag_validation() {
        assert_eq!(ReregFlags::from_raw(0), Err(Errno::EINVAL));
        for bad in [8u32, 9, 0x10, 1 << 31, u32::MAX] {
            assert_eq!(
                ReregFlags::from_raw(bad),
                Err(Errno::EOPNOTSUPP),
                "{bad:#x}"
            );
        }
        for good in 1..=7u32 {
            let f = ReregFlags::from_raw(good).unwrap();
            assert_eq!(f.bits(), good);
            assert_eq!(f.trans(), good & 1 != 0);
            assert_eq!(f.pd(), good & 2 != 0);
            assert_eq!(f.access(), good & 4 != 0);
        }
    }

    #[test]
    fn access_escalation_on_read_only_pin_needs_repin() {
        let flags = ReregFlags::from_raw(ReregFlags::ACCESS).unwrap();
        let lw_rw = Access::LOCAL_WRITE.bits() | Access::REMOTE_WRITE.bits();
        let p = plan(flags, ro(Access::REMOTE_READ), lw_rw, MASK).unwrap();
        assert_eq!(p.repin, Some(RepinReason::WritableEscalation));
        assert!(p.pin_writable);
        assert!(!p.change_pd);
        assert_eq!(p.refuse_escalation(), Err(Errno::EACCES));

        // MW_BIND alone also needs writable pages.
        let p = plan(flags, ro(Access::empty()), Access::MW_BIND.bits(), MASK).unwrap();
        assert_eq!(p.repin, Some(RepinReason::WritableEscalation));
    }

    #[test]
    fn access_change_on_writable_pin_keeps_pages() {
        let flags = ReregFlags::from_raw(ReregFlags::ACCESS).unwrap();
        let cur = MrState {
            access: Access::LOCAL_WRITE,
            pinned_writable: true,
        };
        let p = plan(flags, cur, Access::REMOTE_READ.bits(), MASK).unwrap();
        assert_eq!(p.repin, None);
        assert!(!p.pin_writable);
        assert_eq!(p.refuse_escalation(), Ok(p));

        // Read-only pin, access drops to read-only: nothing to re-pin.
        let p = plan(flags, ro(Access::REMOTE_READ), 0, MASK).unwrap();
        assert_eq!(p.repin, None);

        // Dropping every right from a writable pin: nothing to re-pin either.
        let p = plan(flags, cur, 0, MASK).unwrap();
        assert_eq!(p.repin, None);
        assert_eq!(p.new_access, Access::empty());
    }

    #[test]
    fn trans_always_repins() {
        for raw in [1u32, 3, 5, 7] {
            let flags = ReregFlags::from_raw(raw).unwrap();
            for cur in [
                ro(Access::REMOTE_READ),
                MrState {
                    access: Access::LOCAL_WRITE,
                    pinned_writable: true,
                },
            ] {
                let p = plan(flags, cur, Access::LOCAL_WRITE.bits(), MASK).unwrap();
                assert_eq!(p.repin, Some(RepinReason::NewTranslation));
                assert_eq!(p.pin_writable, p.new_access.needs_writable_pages());
                assert_eq!(p.refuse_escalation(), Ok(p));
            }
        }
    }

    #[test]
    fn pd_only_keeps_access() {
        let flags = ReregFlags::from_raw(ReregFlags::PD).unwrap();
        let cur = ro(Access::REMOTE_READ);
        // requested_access is ignored without ACCESS, even if invalid.
        let p = plan(flags, cur, Access::REMOTE_WRITE.bits(), MASK).unwrap();
        assert_eq!(p.new_access, Access::REMOTE_READ);
        assert!(p.change_pd);
        assert_eq!(p.repin, None);
    }

    #[test]
    fn invalid_new_access_is_rejected_like_reg_mr() {
        let flags = ReregFlags::from_raw(ReregFlags::ACCESS | ReregFlags::TRANS).unwrap();
        let cur = ro(Access::empty());
        assert_eq!(
            plan(flags, cur, Access::REMOTE_WRITE.bits(), MASK),
            Err(Errno::EINVAL)
        );
        assert_eq!(plan(flags, cur, 1 << 12, MASK), Err(Errno::EINVAL));
        assert_eq!(
            plan(flags, cur, Access::ON_DEMAND.bits(), MASK),
            Err(Errno::EOPNOTSUPP)
        );
    }

    #[test]
    fn exhaustive_small_space_invariants() {
        // Every flag combination x every current access x pin state x
        // every requested access over the low 5 bits.
        for raw in 1..=7u32 {
            let flags = ReregFlags::from_raw(raw).unwrap();
            for cur_bits in 0..32u32 {
                let Ok(cur_access) = Access::validate_for_mr(cur_bits, MASK) else {
                    continue;
                };
                for pinned_writable in [false, true] {
                    if cur_access.needs_writable_pages() && !pinned_writable {
                        continue; // not a reachable state
                    }
                    let cur = MrState {
                        access: cur_access,
                        pinned_writable,
                    };
                    for req in 0..32u32 {
                        let Ok(p) = plan(flags, cur, req, MASK) else {
                            continue;
                        };
                        // Never end with writable rights over a read-only pin.
                        let final_writable = if p.repin.is_some() {
                            p.pin_writable
                        } else {
                            pinned_writable
                        };
                        assert!(!p.new_access.needs_writable_pages() || final_writable);
                        if !flags.access() {
                            assert_eq!(p.new_access, cur_access);
                        }
                    }
                }
            }
        }
    }
}
