// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Memory access rights, as carried by `reg_mr`, `rereg_mr` and QP/MW verbs.
//!
//! The bit values are ABI: userspace passes them through uverbs unchanged
//! and the kernel's `enum ib_access_flags` (include/rdma/ib_verbs.h, built
//! from `IB_UVERBS_ACCESS_*`) uses the same numbers. They are restated here
//! so the provider can validate before a system call and the module can
//! validate without reaching for C headers, and both reach the same verdict.

use super::errno::Errno;

/// A set of IB access flags.
///
/// A newtype rather than a bare `u32` so that a value that has been through
/// [`Access::validate_for_mr`] can be told apart, by type, from raw user
/// input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Access(u32);

/// The kinds of access an operation needs from a memory region, for
/// [`Access::permits`].
///
/// Callers on the data path ask "may this operation touch this MR?"; naming
/// the operation rather than a flag keeps the rules for the implicit rights
/// (local read is always granted) in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessOp {
    /// The HCA reads the MR on behalf of a local work request (gather for a
    /// send or RDMA write). Always permitted: IBTA grants local read to every
    /// registered region.
    LocalRead,
    /// The HCA writes the MR on behalf of a local work request (receive
    /// scatter, RDMA read response, atomic result).
    LocalWrite,
    /// A remote peer reads through an rkey (RDMA read).
    RemoteRead,
    /// A remote peer writes through an rkey (RDMA write, atomic write).
    RemoteWrite,
    /// A remote peer performs an atomic through an rkey.
    RemoteAtomic,
    /// A memory window is bound on top of the MR.
    MwBind,
    /// A remote FLUSH to the global visibility point through an rkey.
    FlushGlobal,
    /// A remote FLUSH to the persistence point through an rkey.
    FlushPersistent,
}

impl Access {
    /// Local write: the device may store into the region for local work.
    pub const LOCAL_WRITE: Access = Access(1 << 0);
    /// Remote write through the rkey.
    pub const REMOTE_WRITE: Access = Access(1 << 1);
    /// Remote read through the rkey.
    pub const REMOTE_READ: Access = Access(1 << 2);
    /// Remote atomics through the rkey.
    pub const REMOTE_ATOMIC: Access = Access(1 << 3);
    /// Memory windows may be bound to the region.
    pub const MW_BIND: Access = Access(1 << 4);
    /// Addresses in the region are offsets from zero rather than virtual
    /// addresses (`IB_ZERO_BASED`).
    pub const ZERO_BASED: Access = Access(1 << 5);
    /// On-demand paging: pages are faulted in on access, not pinned.
    pub const ON_DEMAND: Access = Access(1 << 6);
    /// The caller promises the range is backed by huge pages.
    pub const HUGETLB: Access = Access(1 << 7);
    /// Remote FLUSH to the global visibility point.
    pub const FLUSH_GLOBAL: Access = Access(1 << 8);
    /// Remote FLUSH to the persistence point.
    pub const FLUSH_PERSISTENT: Access = Access(1 << 9);
    /// Relaxed PCIe ordering; the first of the optional bits.
    pub const RELAXED_ORDERING: Access = Access(Self::OPTIONAL_FIRST);

    /// Lowest bit of the optional range (`IB_UVERBS_ACCESS_OPTIONAL_FIRST`).
    pub const OPTIONAL_FIRST: u32 = 1 << 20;
    /// Highest bit of the optional range (`IB_UVERBS_ACCESS_OPTIONAL_LAST`).
    pub const OPTIONAL_LAST: u32 = 1 << 29;
    /// Bits 20..=29. Userspace may set these speculatively: a device that
    /// does not know one must ignore it rather than fail, which is how new
    /// performance hints can be added without breaking old drivers.
    pub const OPTIONAL_MASK: u32 = ((Self::OPTIONAL_LAST << 1) - 1) & !(Self::OPTIONAL_FIRST - 1);
    /// Every bit the kernel's uverbs layer knows (`IB_ACCESS_SUPPORTED`):
    /// anything else is rejected as malformed before any driver sees it.
    pub const KERNEL_KNOWN_MASK: u32 = ((Self::FLUSH_PERSISTENT.0 << 1) - 1) | Self::OPTIONAL_MASK;

    /// Bits that let a remote peer reach the region through its rkey. The
    /// FLUSH bits are included because a FLUSH is a remote operation that
    /// names the region by rkey, exactly like a read.
    pub const REMOTE_MASK: u32 = Self::REMOTE_READ.0
        | Self::REMOTE_WRITE.0
        | Self::REMOTE_ATOMIC.0
        | Self::FLUSH_GLOBAL.0
        | Self::FLUSH_PERSISTENT.0;

    /// Bits whose presence means the pinned pages must be writable. This is
    /// the kernel's `ib_access_writable()` set, MW_BIND included: binding a
    /// window can later hand out write access, and `ib_umem_get()` pins with
    /// FOLL_WRITE for exactly this set, so the module and the umem code have
    /// to agree on it.
    pub const WRITABLE_MASK: u32 =
        Self::LOCAL_WRITE.0 | Self::REMOTE_WRITE.0 | Self::REMOTE_ATOMIC.0 | Self::MW_BIND.0;

    /// The empty set: a region that only the local HCA may read.
    pub const fn empty() -> Self {
        Access(0)
    }

    /// Wraps raw bits without checking them, for values that are already
    /// trusted (for instance flags this crate itself produced earlier).
    pub const fn from_bits_unchecked(bits: u32) -> Self {
        Access(bits)
    }

    /// The raw bits, for handing back to the kernel or to rdma-core.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `other` is present.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of two sets.
    pub const fn union(self, other: Access) -> Self {
        Access(self.0 | other.0)
    }

    /// Checks user-supplied flags for a memory registration and returns the
    /// set the device should actually honour.
    ///
    /// `supported_mask` is what this device implements for MRs. The rules,
    /// in the order the kernel applies them (`ib_check_mr_access()` in the
    /// core, then the driver's own mask check as rdma_rxe does):
    ///
    /// 1. REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE is `EINVAL`:
    ///    IBTA requires local write whenever remote write or remote atomic
    ///    is granted, so a peer can never change memory that the owner's
    ///    own work requests may not.
    /// 2. A bit outside [`Access::KERNEL_KNOWN_MASK`] is `EINVAL`: it is not
    ///    a flag at all, so the request is malformed whatever the device.
    /// 3. Optional bits the device does not support are dropped silently;
    ///    that is the contract of the optional range.
    /// 4. A known, non-optional bit the device does not support (ON_DEMAND,
    ///    FLUSH_*, ZERO_BASED, HUGETLB...) is `EOPNOTSUPP`: the request is
    ///    sensible, this device just cannot do it.
    pub const fn validate_for_mr(flags: u32, supported_mask: u32) -> Result<Access, Errno> {
        let needs_local_write = Self::REMOTE_WRITE.0 | Self::REMOTE_ATOMIC.0;
        if flags & needs_local_write != 0 && flags & Self::LOCAL_WRITE.0 == 0 {
            return Err(Errno::EINVAL);
        }
        if flags & !Self::KERNEL_KNOWN_MASK != 0 {
            return Err(Errno::EINVAL);
        }
        let optional_dropped = flags & Self::OPTIONAL_MASK & !supported_mask;
        let kept = flags & !optional_dropped;
        if kept & !supported_mask != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(Access(kept))
    }

    /// Whether a remote peer can use the region at all, which decides
    /// whether handing out its rkey means anything.
    pub const fn grants_remote(self) -> bool {
        self.0 & Self::REMOTE_MASK != 0
    }

    /// Whether the backing pages must be pinned writable. Pinning read-only
    /// when this is true would let the device write to pages the process
    /// may only read (or to a stale copy of a COW page); see
    /// [`Access::WRITABLE_MASK`] for why MW_BIND counts.
    pub const fn needs_writable_pages(self) -> bool {
        self.0 & Self::WRITABLE_MASK != 0
    }

    /// Whether an operation of kind `op` may touch a region with these
    /// rights. Data-path checks go through here so that the implicit local
    /// read right is never forgotten.
    pub const fn permits(self, op: AccessOp) -> bool {
        match op {
            AccessOp::LocalRead => true,
            AccessOp::LocalWrite => self.contains(Self::LOCAL_WRITE),
            AccessOp::RemoteRead => self.contains(Self::REMOTE_READ),
            AccessOp::RemoteWrite => self.contains(Self::REMOTE_WRITE),
            AccessOp::RemoteAtomic => self.contains(Self::REMOTE_ATOMIC),
            AccessOp::MwBind => self.contains(Self::MW_BIND),
            AccessOp::FlushGlobal => self.contains(Self::FLUSH_GLOBAL),
            AccessOp::FlushPersistent => self.contains(Self::FLUSH_PERSISTENT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Access, AccessOp, Errno};

    const ALL_OPS: [AccessOp; 8] = [
        AccessOp::LocalRead,
        AccessOp::LocalWrite,
        AccessOp::RemoteRead,
        AccessOp::RemoteWrite,
        AccessOp::RemoteAtomic,
        AccessOp::MwBind,
        AccessOp::FlushGlobal,
        AccessOp::FlushPersistent,
    ];

    /// What rdma_rxe advertises for MRs (rxe_verbs.h), as a realistic mask.
    const RXE_LIKE: u32 = Access::REMOTE_READ.bits()
        | Access::REMOTE_WRITE.bits()
        | Access::REMOTE_ATOMIC.bits()
        | Access::LOCAL_WRITE.bits()
        | Access::MW_BIND.bits()
        | Access::ON_DEMAND.bits()
        | Access::FLUSH_GLOBAL.bits()
        | Access::FLUSH_PERSISTENT.bits()
        | Access::OPTIONAL_MASK;

    /// A device that supports the basic rights and nothing optional.
    const BASIC: u32 = Access::LOCAL_WRITE.bits()
        | Access::REMOTE_READ.bits()
        | Access::REMOTE_WRITE.bits()
        | Access::REMOTE_ATOMIC.bits()
        | Access::MW_BIND.bits();

    use super::super::test_rng::XorShift;

    #[test]
    fn bit_values_match_ib_verbs_h() {
        assert_eq!(Access::LOCAL_WRITE.bits(), 1);
        assert_eq!(Access::REMOTE_WRITE.bits(), 2);
        assert_eq!(Access::REMOTE_READ.bits(), 4);
        assert_eq!(Access::REMOTE_ATOMIC.bits(), 8);
        assert_eq!(Access::MW_BIND.bits(), 16);
        assert_eq!(Access::ZERO_BASED.bits(), 32);
        assert_eq!(Access::ON_DEMAND.bits(), 64);
        assert_eq!(Access::HUGETLB.bits(), 128);
        assert_eq!(Access::FLUSH_GLOBAL.bits(), 256);
        assert_eq!(Access::FLUSH_PERSISTENT.bits(), 512);
        assert_eq!(Access::RELAXED_ORDERING.bits(), 1 << 20);
        assert_eq!(Access::OPTIONAL_MASK, 0x3ff0_0000);
        assert_eq!(Access::KERNEL_KNOWN_MASK, 0x3ff0_03ff);
    }

    #[test]
    fn remote_write_or_atomic_needs_local_write() {
        for f in [
            Access::REMOTE_WRITE.bits(),
            Access::REMOTE_ATOMIC.bits(),
            Access::REMOTE_WRITE.bits() | Access::REMOTE_READ.bits(),
            Access::REMOTE_ATOMIC.bits() | Access::MW_BIND.bits(),
        ] {
            assert_eq!(
                Access::validate_for_mr(f, BASIC),
                Err(Errno::EINVAL),
                "{f:#x}"
            );
            let with_lw = f | Access::LOCAL_WRITE.bits();
            assert_eq!(
                Access::validate_for_mr(with_lw, BASIC),
                Ok(Access::from_bits_unchecked(with_lw))
            );
        }
        // Remote read alone and MW bind alone do not need local write.
        assert!(Access::validate_for_mr(Access::REMOTE_READ.bits(), BASIC).is_ok());
        assert!(Access::validate_for_mr(Access::MW_BIND.bits(), BASIC).is_ok());
        assert!(Access::validate_for_mr(0, BASIC).is_ok());
    }

    #[test]
    fn local_write_rule_precedes_unsupported_check() {
        // The kernel checks the local-write rule first, so a request that is
        // both malformed and unsupported reports EINVAL.
        let f = Access::REMOTE_ATOMIC.bits() | Access::ON_DEMAND.bits();
        assert_eq!(Access::validate_for_mr(f, BASIC), Err(Errno::EINVAL));
    }

    #[test]
    fn unknown_bits_are_einval_even_if_device_claims_them() {
        for bit in [10, 11, 15, 19, 30, 31] {
            let f = 1u32 << bit;
            assert_eq!(
                Access::validate_for_mr(f, u32::MAX),
                Err(Errno::EINVAL),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn known_but_unsupported_is_eopnotsupp() {
        for f in [
            Access::ON_DEMAND,
            Access::FLUSH_GLOBAL,
            Access::FLUSH_PERSISTENT,
            Access::ZERO_BASED,
            Access::HUGETLB,
        ] {
            assert_eq!(
                Access::validate_for_mr(f.bits(), BASIC),
                Err(Errno::EOPNOTSUPP)
            );
        }
        assert_eq!(
            Access::validate_for_mr(Access::ON_DEMAND.bits(), RXE_LIKE),
            Ok(Access::ON_DEMAND)
        );
        assert_eq!(
            Access::validate_for_mr(Access::ZERO_BASED.bits(), RXE_LIKE),
            Err(Errno::EOPNOTSUPP)
        );
    }

    #[test]
    fn optional_bits_are_stripped_unless_supported() {
        let f = Access::LOCAL_WRITE.bits() | Access::RELAXED_ORDERING.bits() | (1 << 29);
        assert_eq!(Access::validate_for_mr(f, BASIC), Ok(Access::LOCAL_WRITE));
        assert_eq!(
            Access::validate_for_mr(f, RXE_LIKE),
            Ok(Access::from_bits_unchecked(f))
        );
    }

    #[test]
    fn validated_result_is_always_within_mask_and_input() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let flags = rng.next() as u32;
            let flags = if rng.next() & 1 == 0 {
                flags & Access::KERNEL_KNOWN_MASK
            } else {
                flags
            };
            let mask = match rng.next() % 3 {
                0 => BASIC,
                1 => RXE_LIKE,
                _ => rng.next() as u32,
            };
            match Access::validate_for_mr(flags, mask) {
                Ok(a) => {
                    assert_eq!(a.bits() & !mask, 0);
                    assert_eq!(a.bits() & !flags, 0);
                    assert_eq!(flags & !a.bits() & !Access::OPTIONAL_MASK, 0);
                    if a.contains(Access::REMOTE_WRITE) || a.contains(Access::REMOTE_ATOMIC) {
                        assert!(a.contains(Access::LOCAL_WRITE));
                    }
                }
                Err(Errno::EINVAL) => {
                    let bad_lw =
                        flags & (Access::REMOTE_WRITE.bits() | Access::REMOTE_ATOMIC.bits()) != 0
                            && flags & Access::LOCAL_WRITE.bits() == 0;
                    assert!(bad_lw || flags & !Access::KERNEL_KNOWN_MASK != 0);
                }
                Err(Errno::EOPNOTSUPP) => {
                    assert_ne!(flags & !Access::OPTIONAL_MASK & !mask, 0);
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
    }

    #[test]
    fn grants_remote() {
        assert!(!Access::empty().grants_remote());
        assert!(!Access::LOCAL_WRITE.union(Access::MW_BIND).grants_remote());
        for f in [
            Access::REMOTE_READ,
            Access::REMOTE_WRITE,
            Access::REMOTE_ATOMIC,
            Access::FLUSH_GLOBAL,
            Access::FLUSH_PERSISTENT,
        ] {
            assert!(f.grants_remote());
        }
    }

    #[test]
    fn writable_pages_follow_ib_access_writable() {
        assert!(!Access::empty().needs_writable_pages());
        assert!(!Access::REMOTE_READ.needs_writable_pages());
        assert!(!Access::FLUSH_GLOBAL.needs_writable_pages());
        assert!(!Access::RELAXED_ORDERING.needs_writable_pages());
        for f in [
            Access::LOCAL_WRITE,
            Access::REMOTE_WRITE,
            Access::REMOTE_ATOMIC,
            Access::MW_BIND,
        ] {
            assert!(f.needs_writable_pages());
            assert!(f.union(Access::REMOTE_READ).needs_writable_pages());
        }
    }

    #[test]
    fn permits_each_op() {
        let none = Access::empty();
        for op in ALL_OPS {
            assert_eq!(none.permits(op), op == AccessOp::LocalRead, "{op:?}");
        }
        let pairs = [
            (Access::LOCAL_WRITE, AccessOp::LocalWrite),
            (Access::REMOTE_READ, AccessOp::RemoteRead),
            (Access::REMOTE_WRITE, AccessOp::RemoteWrite),
            (Access::REMOTE_ATOMIC, AccessOp::RemoteAtomic),
            (Access::MW_BIND, AccessOp::MwBind),
            (Access::FLUSH_GLOBAL, AccessOp::FlushGlobal),
            (Access::FLUSH_PERSISTENT, AccessOp::FlushPersistent),
        ];
        for (flag, granted) in pairs {
            for op in ALL_OPS {
                let expect = op == granted || op == AccessOp::LocalRead;
                assert_eq!(flag.permits(op), expect, "{flag:?} {op:?}");
            }
        }
    }
}
