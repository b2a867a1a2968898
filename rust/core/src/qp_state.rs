// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The IBTA queue pair state machine and the attributes each transition
//! takes.
//!
//! `modify_qp` is the verb through which a QP is brought up, and the one
//! where userspace can ask for nonsense (RTS straight from RESET, a path
//! MTU on a UD QP). The kernel core answers it with `ib_modify_qp_is_ok()`
//! and this module gives the same answers, so the provider can reject
//! early and the module can check without a C call, with one deliberate
//! difference noted on [`transition`].
//!
//! The table is written per transition, listing for each QP type the
//! attributes that must be supplied and those that may be; a transition
//! absent from the table is not allowed at all.

use super::errno::Errno;

/// QP states, numbered as `enum ib_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpState {
    /// Freshly created or reset: no resources in use.
    Reset = 0,
    /// Initialised: receives may be posted, nothing is processed.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained/draining.
    Sqd = 4,
    /// Send queue error (UC/UD only): receives still work.
    Sqe = 5,
    /// Error: everything is flushed.
    Error = 6,
}

impl QpState {
    /// The state for a raw `ib_qp_state` value, `None` if out of range
    /// (such a value from userspace is `EINVAL`).
    pub const fn from_raw(raw: u32) -> Option<QpState> {
        match raw {
            0 => Some(QpState::Reset),
            1 => Some(QpState::Init),
            2 => Some(QpState::Rtr),
            3 => Some(QpState::Rts),
            4 => Some(QpState::Sqd),
            5 => Some(QpState::Sqe),
            6 => Some(QpState::Error),
            _ => None,
        }
    }
}

/// The QP types oxe implements, numbered as `enum ib_qp_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpType {
    /// QP1, the general services (CM) QP; behaves as UD but its port and
    /// Q_Key are fixed by the device.
    Gsi = 1,
    /// Reliable Connected.
    Rc = 2,
    /// Unreliable Connected.
    Uc = 3,
    /// Unreliable Datagram.
    Ud = 4,
}

impl QpType {
    /// The type for a raw `ib_qp_type` value, `None` for types oxe does
    /// not implement (SMI, RD, XRC, raw packet...).
    pub const fn from_raw(raw: u32) -> Option<QpType> {
        match raw {
            1 => Some(QpType::Gsi),
            2 => Some(QpType::Rc),
            3 => Some(QpType::Uc),
            4 => Some(QpType::Ud),
            _ => None,
        }
    }
}

/// A set of `IB_QP_*` attribute-mask bits (`enum ib_qp_attr_mask`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QpAttrMask(pub u32);

impl QpAttrMask {
    /// The new state is being set.
    pub const STATE: u32 = 1 << 0;
    /// The caller asserts the current state.
    pub const CUR_STATE: u32 = 1 << 1;
    /// Ask for an event when the SQ has drained.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    /// Remote access rights on the QP.
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    /// P_Key index.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// Port number.
    pub const PORT: u32 = 1 << 5;
    /// Q_Key.
    pub const QKEY: u32 = 1 << 6;
    /// Primary address vector.
    pub const AV: u32 = 1 << 7;
    /// Path MTU.
    pub const PATH_MTU: u32 = 1 << 8;
    /// Local ACK timeout.
    pub const TIMEOUT: u32 = 1 << 9;
    /// Transport retry count.
    pub const RETRY_CNT: u32 = 1 << 10;
    /// RNR retry count.
    pub const RNR_RETRY: u32 = 1 << 11;
    /// Receive PSN.
    pub const RQ_PSN: u32 = 1 << 12;
    /// Outstanding RDMA reads/atomics as initiator.
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    /// Alternate path.
    pub const ALT_PATH: u32 = 1 << 14;
    /// Minimum RNR NAK timer.
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    /// Send PSN.
    pub const SQ_PSN: u32 = 1 << 16;
    /// Outstanding RDMA reads/atomics as responder.
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    /// Path migration state.
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    /// Queue capacities.
    pub const CAP: u32 = 1 << 19;
    /// Destination QP number.
    pub const DEST_QPN: u32 = 1 << 20;
    /// Packet pacing rate; accepted with any transition, like the kernel.
    pub const RATE_LIMIT: u32 = 1 << 25;

    /// Whether every bit of `bits` is set.
    pub const fn contains(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
}

/// Attributes a transition must and may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitionMasks {
    /// Attributes that must be present.
    pub required: QpAttrMask,
    /// Attributes that may be present.
    pub optional: QpAttrMask,
}

const fn masks(required: u32, optional: u32) -> Option<TransitionMasks> {
    Some(TransitionMasks {
        required: QpAttrMask(required),
        optional: QpAttrMask(optional),
    })
}

/// The attribute masks for moving a QP of type `ty` from `cur` to `next`,
/// or `None` if that transition is not allowed.
///
/// Mirrors the kernel's `qp_state_table` in drivers/infiniband/core/verbs.c
/// with one exception, where we follow IBTA: SQE -> RTS is refused for RC.
/// The SQE state exists only for UC and UD (an RC send error takes the QP
/// to Error), so an RC QP claiming to be in SQE is a caller bug, which the
/// kernel table would wave through with an empty attribute set.
pub const fn transition(cur: QpState, next: QpState, ty: QpType) -> Option<TransitionMasks> {
    use QpAttrMask as M;
    use QpState::{Error, Init, Reset, Rtr, Rts, Sqd, Sqe};
    use QpType::{Gsi, Rc, Uc, Ud};

    // Attributes shared by several rows.
    const RTS_OPT_UD: u32 = M::CUR_STATE | M::QKEY;
    const RTS_OPT_UC: u32 = M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE;
    const RTS_OPT_RC: u32 = RTS_OPT_UC | M::MIN_RNR_TIMER;
    const RTR_REQ_UC: u32 = M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;

    match (cur, next) {
        // Any state may go to Reset or Error without attributes, except
        // Reset -> Error, which the kernel refuses: a QP that was never
        // initialised has nothing to flush.
        (Reset, Error) => None,
        (_, Reset | Error) => masks(0, 0),

        (Reset, Init) => match ty {
            Ud => masks(M::PKEY_INDEX | M::PORT | M::QKEY, 0),
            Gsi => masks(M::PKEY_INDEX | M::QKEY, 0),
            Uc | Rc => masks(M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, 0),
        },
        (Init, Init) => match ty {
            Ud => masks(0, M::PKEY_INDEX | M::PORT | M::QKEY),
            Gsi => masks(0, M::PKEY_INDEX | M::QKEY),
            Uc | Rc => masks(0, M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        },
        (Init, Rtr) => match ty {
            Ud | Gsi => masks(0, M::PKEY_INDEX | M::QKEY),
            Uc => masks(RTR_REQ_UC, M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX),
            Rc => masks(
                RTR_REQ_UC | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
            ),
        },
        (Rtr, Rts) => match ty {
            Ud | Gsi => masks(M::SQ_PSN, RTS_OPT_UD),
            Uc => masks(M::SQ_PSN, RTS_OPT_UC),
            Rc => masks(
                M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
                RTS_OPT_RC,
            ),
        },
        (Rts | Sqd, Rts) => match ty {
            Ud | Gsi => masks(0, RTS_OPT_UD),
            Uc => masks(0, RTS_OPT_UC),
            Rc => masks(0, RTS_OPT_RC),
        },
        (Rts, Sqd) => masks(0, M::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd) => match ty {
            Ud | Gsi => masks(0, M::PKEY_INDEX | M::QKEY),
            Uc => masks(
                0,
                M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE,
            ),
            Rc => masks(
                0,
                M::PORT
                    | M::AV
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
                    | M::MAX_DEST_RD_ATOMIC
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
            ),
        },
        (Sqe, Rts) => match ty {
            Ud | Gsi => masks(0, RTS_OPT_UD),
            Uc => masks(0, M::CUR_STATE | M::ACCESS_FLAGS),
            // IBTA: RC QPs never enter SQE (see above).
            Rc => None,
        },
        _ => None,
    }
}

/// Whether a QP of type `ty` may move from `cur` to `next` at all.
pub const fn transition_allowed(cur: QpState, next: QpState, ty: QpType) -> bool {
    transition(cur, next, ty).is_some()
}

/// Whether a `modify_qp` with attribute mask `mask` is acceptable, with the
/// same rules as `ib_modify_qp_is_ok()`:
///
/// * CUR_STATE may only be given when the QP is in RTR, RTS, SQD or SQE
///   (the states where the consumer can know better than the driver, e.g.
///   after an asynchronous SQE);
/// * the transition must exist and every required attribute be present;
/// * nothing outside required | optional | STATE | RATE_LIMIT may be set.
pub const fn modify_is_ok(cur: QpState, next: QpState, ty: QpType, mask: QpAttrMask) -> bool {
    if mask.contains(QpAttrMask::CUR_STATE)
        && !matches!(
            cur,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    {
        return false;
    }
    let Some(t) = transition(cur, next, ty) else {
        return false;
    };
    if !mask.contains(t.required.0) {
        return false;
    }
    let allowed = t.required.0 | t.optional.0 | QpAttrMask::STATE | QpAttrMask::RATE_LIMIT;
    mask.0 & !allowed == 0
}

/// [`modify_is_ok`] as a `Result`, for verbs that return an errno: a bad
/// transition or attribute set is `EINVAL`, as in every Linux driver.
pub const fn check_modify(
    cur: QpState,
    next: QpState,
    ty: QpType,
    mask: QpAttrMask,
) -> Result<(), Errno> {
    if modify_is_ok(cur, next, ty, mask) {
        Ok(())
    } else {
        Err(Errno::EINVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::{
        check_modify, modify_is_ok, transition, transition_allowed, Errno, QpAttrMask as M,
        QpState, QpType,
    };
    use QpState::{Error, Init, Reset, Rtr, Rts, Sqd, Sqe};

    const STATES: [QpState; 7] = [Reset, Init, Rtr, Rts, Sqd, Sqe, Error];
    const TYPES: [QpType; 4] = [QpType::Gsi, QpType::Rc, QpType::Uc, QpType::Ud];

    use super::super::test_rng::XorShift;

    #[test]
    fn raw_values_match_kernel_enums() {
        for (i, s) in STATES.iter().enumerate() {
            assert_eq!(QpState::from_raw(i as u32), Some(*s));
            assert_eq!(*s as u32, i as u32);
        }
        assert_eq!(QpState::from_raw(7), None);
        assert_eq!(QpType::from_raw(0), None, "SMI is not implemented");
        assert_eq!(QpType::from_raw(1), Some(QpType::Gsi));
        assert_eq!(QpType::from_raw(2), Some(QpType::Rc));
        assert_eq!(QpType::from_raw(3), Some(QpType::Uc));
        assert_eq!(QpType::from_raw(4), Some(QpType::Ud));
        assert_eq!(QpType::from_raw(9), None);
        assert_eq!(M::DEST_QPN, 1 << 20);
        assert_eq!(M::RATE_LIMIT, 1 << 25);
    }

    #[test]
    fn allowed_transition_matrix() {
        // Rows: from; columns: to (Reset Init Rtr Rts Sqd Sqe Error).
        // For UD/UC/GSI; RC differs only in Sqe -> Rts.
        let ud = [
            [1, 1, 0, 0, 0, 0, 0], // Reset
            [1, 1, 1, 0, 0, 0, 1], // Init
            [1, 0, 0, 1, 0, 0, 1], // Rtr
            [1, 0, 0, 1, 1, 0, 1], // Rts
            [1, 0, 0, 1, 1, 0, 1], // Sqd
            [1, 0, 0, 1, 0, 0, 1], // Sqe
            [1, 0, 0, 0, 0, 0, 1], // Error
        ];
        for ty in TYPES {
            for (i, from) in STATES.iter().enumerate() {
                for (j, to) in STATES.iter().enumerate() {
                    let mut expect = ud[i][j] == 1;
                    if ty == QpType::Rc && *from == Sqe && *to == Rts {
                        expect = false;
                    }
                    assert_eq!(
                        transition_allowed(*from, *to, ty),
                        expect,
                        "{ty:?} {from:?}->{to:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn rc_bring_up_sequence() {
        let ty = QpType::Rc;
        let init = M(M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS);
        assert!(modify_is_ok(Reset, Init, ty, init));
        let rtr = M(M::STATE
            | M::AV
            | M::PATH_MTU
            | M::DEST_QPN
            | M::RQ_PSN
            | M::MAX_DEST_RD_ATOMIC
            | M::MIN_RNR_TIMER);
        assert!(modify_is_ok(Init, Rtr, ty, rtr));
        let rts = M(M::STATE
            | M::TIMEOUT
            | M::RETRY_CNT
            | M::RNR_RETRY
            | M::SQ_PSN
            | M::MAX_QP_RD_ATOMIC);
        assert!(modify_is_ok(Rtr, Rts, ty, rts));

        // Dropping any single required bit fails.
        for (from, to, mask) in [(Reset, Init, init), (Init, Rtr, rtr), (Rtr, Rts, rts)] {
            let req = transition(from, to, ty).unwrap().required.0;
            for bit in 0..32 {
                let b = 1u32 << bit;
                if req & b != 0 {
                    assert!(
                        !modify_is_ok(from, to, ty, M(mask.0 & !b)),
                        "{from:?}->{to:?} without {b:#x}"
                    );
                }
            }
        }
        assert_eq!(check_modify(Reset, Rts, ty, rts), Err(Errno::EINVAL));
        assert_eq!(check_modify(Rtr, Rts, ty, rts), Ok(()));
    }

    #[test]
    fn ud_bring_up_and_rc_only_attrs_rejected() {
        let ty = QpType::Ud;
        assert!(modify_is_ok(
            Reset,
            Init,
            ty,
            M(M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY)
        ));
        assert!(modify_is_ok(Init, Rtr, ty, M(M::STATE)));
        assert!(modify_is_ok(Rtr, Rts, ty, M(M::STATE | M::SQ_PSN)));
        assert!(!modify_is_ok(Init, Rtr, ty, M(M::STATE | M::PATH_MTU)));
        assert!(!modify_is_ok(
            Rtr,
            Rts,
            ty,
            M(M::STATE | M::SQ_PSN | M::TIMEOUT)
        ));
        // GSI does not take a port at Reset -> Init.
        assert!(modify_is_ok(
            Reset,
            Init,
            QpType::Gsi,
            M(M::STATE | M::PKEY_INDEX | M::QKEY)
        ));
        assert!(!modify_is_ok(
            Reset,
            Init,
            QpType::Gsi,
            M(M::STATE | M::PKEY_INDEX | M::QKEY | M::PORT)
        ));
    }

    #[test]
    fn cur_state_only_in_later_states() {
        for ty in TYPES {
            assert!(!modify_is_ok(Init, Init, ty, M(M::STATE | M::CUR_STATE)));
            assert!(!modify_is_ok(Reset, Reset, ty, M(M::CUR_STATE)));
            assert!(!modify_is_ok(Error, Reset, ty, M(M::CUR_STATE)));
            assert!(modify_is_ok(Rts, Rts, ty, M(M::STATE | M::CUR_STATE)));
            // CUR_STATE is allowed by the state rule but not in Rts -> Error's
            // (empty) optional set.
            assert!(!modify_is_ok(Rts, Error, ty, M(M::STATE | M::CUR_STATE)));
        }
    }

    #[test]
    fn rate_limit_and_state_always_tolerated() {
        for ty in TYPES {
            for from in STATES {
                for to in STATES {
                    let Some(t) = transition(from, to, ty) else {
                        continue;
                    };
                    let base = t.required.0;
                    assert!(modify_is_ok(from, to, ty, M(base)));
                    assert!(modify_is_ok(
                        from,
                        to,
                        ty,
                        M(base | M::STATE | M::RATE_LIMIT)
                    ));
                    assert!(modify_is_ok(from, to, ty, M(base | t.optional.0)));
                }
            }
        }
    }

    #[test]
    fn random_masks_respect_the_rules() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        for _ in 0..100_000 {
            let from = STATES[(rng.next() % 7) as usize];
            let to = STATES[(rng.next() % 7) as usize];
            let ty = TYPES[(rng.next() % 4) as usize];
            let mask = M(rng.next() as u32
                & ((1 << 26) - 1)
                & if rng.next() & 1 == 0 { 0x3f_ffff } else { !0 });
            let ok = modify_is_ok(from, to, ty, mask);
            if ok {
                let t = transition(from, to, ty).unwrap();
                assert!(mask.contains(t.required.0));
                assert_eq!(
                    mask.0 & !(t.required.0 | t.optional.0 | M::STATE | M::RATE_LIMIT),
                    0
                );
                if mask.contains(M::CUR_STATE) {
                    assert!(matches!(from, Rtr | Rts | Sqd | Sqe));
                }
            }
        }
    }

    #[test]
    fn sqe_is_not_an_rc_state() {
        assert!(!transition_allowed(Sqe, Rts, QpType::Rc));
        assert!(transition_allowed(Sqe, Rts, QpType::Uc));
        assert!(transition_allowed(Sqe, Rts, QpType::Ud));
        assert!(modify_is_ok(
            Sqe,
            Rts,
            QpType::Uc,
            M(M::STATE | M::CUR_STATE | M::ACCESS_FLAGS)
        ));
        assert!(!modify_is_ok(Sqe, Rts, QpType::Uc, M(M::STATE | M::QKEY)));
        // No transition ever leads into SQE: only the device does that.
        for ty in TYPES {
            for from in STATES {
                assert!(!transition_allowed(from, Sqe, ty));
            }
        }
    }
}
