// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The handful of errnos this crate can report.
//!
//! A closed enum rather than a raw integer so a caller cannot confuse a
//! positive errno with a negative return code, and so every error this
//! crate can produce is visible in one place. The numeric values are the
//! Linux ones (identical on every architecture oxe targets), because both
//! consumers hand them straight to Linux: the module as a negative return
//! from a verb, the provider as `errno`.

/// An error number from the Linux errno space.
///
/// Only the values this crate actually returns are listed; each variant's
/// documentation says in which situations this crate chooses it, so that
/// kernel and provider pick the same one for the same mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Errno {
    /// Out of memory; reserved for callers that size buffers from this
    /// crate's answers and want one error type.
    ENOMEM = 12,
    /// Permission denied: the request would let an object do more than
    /// the pages behind it allow (for example a rereg that asks for write
    /// access over pages pinned read-only, without re-pinning).
    EACCES = 13,
    /// Bad address: an address range cannot be described at all.
    EFAULT = 14,
    /// Busy: the object is in use in a way that forbids the change.
    EBUSY = 16,
    /// Invalid argument: the request is malformed, whatever the device.
    EINVAL = 22,
    /// Out of range: a value is well-formed but outside the space
    /// configured for it (for example a key index outside its pool).
    ERANGE = 34,
    /// A computed size or count does not fit the type that must hold it.
    EOVERFLOW = 75,
    /// Well-formed, but this device does not implement it.
    EOPNOTSUPP = 95,
}

impl Errno {
    /// The positive errno value, as userspace sees it in `errno`.
    pub const fn to_i32(self) -> i32 {
        self as i32
    }

    /// The negative form the kernel returns from functions and `ERR_PTR`.
    pub const fn to_neg_i32(self) -> i32 {
        // The values are small positive constants, so negation cannot
        // overflow; `wrapping_neg` just makes that explicit for the kernel's
        // overflow checks.
        (self as i32).wrapping_neg()
    }

    /// Maps a positive errno back to the enum, for code that receives one
    /// over a boundary (the provider reading a kernel reply).
    pub const fn from_i32(value: i32) -> Option<Self> {
        match value {
            12 => Some(Self::ENOMEM),
            13 => Some(Self::EACCES),
            14 => Some(Self::EFAULT),
            16 => Some(Self::EBUSY),
            22 => Some(Self::EINVAL),
            34 => Some(Self::ERANGE),
            75 => Some(Self::EOVERFLOW),
            95 => Some(Self::EOPNOTSUPP),
            _ => None,
        }
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = match self {
            Self::ENOMEM => "ENOMEM",
            Self::EACCES => "EACCES",
            Self::EFAULT => "EFAULT",
            Self::EBUSY => "EBUSY",
            Self::EINVAL => "EINVAL",
            Self::ERANGE => "ERANGE",
            Self::EOVERFLOW => "EOVERFLOW",
            Self::EOPNOTSUPP => "EOPNOTSUPP",
        };
        f.write_str(name)
    }
}

#[cfg(test)]
mod tests {
    use super::Errno;

    const ALL: [Errno; 8] = [
        Errno::ENOMEM,
        Errno::EACCES,
        Errno::EFAULT,
        Errno::EBUSY,
        Errno::EINVAL,
        Errno::ERANGE,
        Errno::EOVERFLOW,
        Errno::EOPNOTSUPP,
    ];

    #[test]
    fn values_match_linux() {
        assert_eq!(Errno::ENOMEM.to_i32(), 12);
        assert_eq!(Errno::EACCES.to_i32(), 13);
        assert_eq!(Errno::EFAULT.to_i32(), 14);
        assert_eq!(Errno::EBUSY.to_i32(), 16);
        assert_eq!(Errno::EINVAL.to_i32(), 22);
        assert_eq!(Errno::ERANGE.to_i32(), 34);
        assert_eq!(Errno::EOVERFLOW.to_i32(), 75);
        assert_eq!(Errno::EOPNOTSUPP.to_i32(), 95);
    }

    #[test]
    fn negative_form_is_negation() {
        for e in ALL {
            assert_eq!(e.to_neg_i32(), -e.to_i32());
            assert!(e.to_neg_i32() < 0);
        }
    }

    #[test]
    fn from_i32_round_trips_and_rejects_others() {
        for e in ALL {
            assert_eq!(Errno::from_i32(e.to_i32()), Some(e));
        }
        for v in [-22, 0, 1, 11, 15, 17, 96, i32::MAX, i32::MIN] {
            assert_eq!(Errno::from_i32(v), None);
        }
    }

    #[test]
    fn display_names() {
        assert_eq!(std::format!("{}", Errno::EOPNOTSUPP), "EOPNOTSUPP");
        assert_eq!(std::format!("{}", Errno::EINVAL), "EINVAL");
    }
}
