// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The oxe driver-private uverbs ABI: the structs the module copies into
//! `udata` and the provider reads back.
//!
//! Both sides compile these definitions from this file, and the C header
//! the provider's C glue includes (`oxe-abi.h`) is generated from them by
//! [`write_c_header`]; a unit test compares the generated text with the
//! checked-in header, so the Rust structs, the C structs and the two
//! binaries cannot drift apart silently.
//!
//! ABI rules, all checked at compile time below:
//!
//! * `#[repr(C)]`, fields of explicit width only (`u32`), no implicit
//!   padding: every byte is a named field, so nothing uninitialised can
//!   leak from kernel to user.
//! * Sizes are multiples of 8, so a later `u64` field can be appended
//!   without changing the alignment of what came before, and uverbs'
//!   "shorter or longer udata" compatibility rules keep working.
//! * Reserved fields are zero when written and ignored when read; they are
//!   the room future versions grow into.

use core::fmt::Write;
use core::mem::{offset_of, size_of};

/// Version of this ABI. Userspace refuses a kernel whose version differs,
/// so bump it only for incompatible changes (appending fields is not one).
pub const OXE_ABI_VERSION: u32 = 1;

/// `caps` bit: rereg with IB_MR_REREG_TRANS is implemented.
pub const OXE_UCTX_CAP_REREG_TRANS: u32 = 1 << 0;
/// `caps` bit: rereg with IB_MR_REREG_PD is implemented.
pub const OXE_UCTX_CAP_REREG_PD: u32 = 1 << 1;
/// `caps` bit: rereg with IB_MR_REREG_ACCESS is implemented.
pub const OXE_UCTX_CAP_REREG_ACCESS: u32 = 1 << 2;

/// Reply to `alloc_ucontext`: what the provider needs to know about the
/// kernel side before it can do anything else.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OxeAllocUcontextResp {
    /// Must equal [`OXE_ABI_VERSION`]; checked first by the provider.
    pub abi_version: u32,
    /// `OXE_UCTX_CAP_*` bits, so the provider can refuse early (or emulate)
    /// instead of discovering a missing feature through an errno.
    pub caps: u32,
    /// Largest inline send the kernel accepts, in bytes.
    pub max_inline: u32,
    /// Zero; room to grow.
    pub reserved: u32,
}

/// Reply to `reg_mr`/`rereg_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OxeRegMrResp {
    /// log2 of the page size the MR was pinned with, which the provider
    /// needs for any userspace-side address translation.
    pub page_shift: u32,
    /// Zero; room to grow.
    pub reserved: u32,
}

const _: () = assert!(size_of::<OxeAllocUcontextResp>() == 16);
const _: () = assert!(size_of::<OxeRegMrResp>() == 8);
const _: () = assert!(size_of::<OxeAllocUcontextResp>() & 7 == 0);
const _: () = assert!(size_of::<OxeRegMrResp>() & 7 == 0);

impl OxeAllocUcontextResp {
    /// Size on the wire.
    pub const SIZE: usize = size_of::<Self>();

    /// Native-endian bytes for `copy_to_user` (both ends of this ABI run on
    /// the same machine). Built field by field, so it needs no unsafe and
    /// no padding can leak.
    pub const fn to_bytes(&self) -> [u8; 16] {
        let [a0, a1, a2, a3] = self.abi_version.to_ne_bytes();
        let [c0, c1, c2, c3] = self.caps.to_ne_bytes();
        let [m0, m1, m2, m3] = self.max_inline.to_ne_bytes();
        let [r0, r1, r2, r3] = self.reserved.to_ne_bytes();
        [
            a0, a1, a2, a3, c0, c1, c2, c3, m0, m1, m2, m3, r0, r1, r2, r3,
        ]
    }

    /// Reads a reply. Shorter input than the struct is rejected; longer
    /// input (from a newer kernel) is accepted and the tail ignored.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let b = bytes.first_chunk::<16>()?;
        Some(OxeAllocUcontextResp {
            abi_version: get_u32(b, 0),
            caps: get_u32(b, 4),
            max_inline: get_u32(b, 8),
            reserved: get_u32(b, 12),
        })
    }
}

impl OxeRegMrResp {
    /// Size on the wire.
    pub const SIZE: usize = size_of::<Self>();

    /// Native-endian bytes for `copy_to_user`; see
    /// [`OxeAllocUcontextResp::to_bytes`].
    pub const fn to_bytes(&self) -> [u8; 8] {
        let [p0, p1, p2, p3] = self.page_shift.to_ne_bytes();
        let [r0, r1, r2, r3] = self.reserved.to_ne_bytes();
        [p0, p1, p2, p3, r0, r1, r2, r3]
    }

    /// Reads a reply; see [`OxeAllocUcontextResp::from_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let b = bytes.first_chunk::<8>()?;
        Some(OxeRegMrResp {
            page_shift: get_u32(b, 0),
            reserved: get_u32(b, 4),
        })
    }
}

/// Loads a u32 from byte `at` of `b`; missing bytes read as zero.
fn get_u32<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    let mut v = [0u8; 4];
    for (i, byte) in v.iter_mut().enumerate() {
        *byte = b.get(at.wrapping_add(i)).copied().unwrap_or(0);
    }
    u32::from_ne_bytes(v)
}

/// One field of a C struct, as the header generator needs it.
struct CField {
    name: &'static str,
    c_type: &'static str,
    offset: usize,
    size: usize,
}

/// One C struct: its name, size and fields in order.
struct CStruct {
    name: &'static str,
    size: usize,
    fields: &'static [CField],
}

/// Describes a `u32` field. The nested function fails to compile if the
/// field is not a `u32`, and `offset_of!` if it does not exist, so the
/// description cannot disagree with the Rust struct.
macro_rules! u32_field {
    ($ty:ty, $field:ident) => {{
        #[allow(dead_code)]
        fn field_is_u32(s: &$ty) -> u32 {
            s.$field
        }
        CField {
            name: stringify!($field),
            c_type: "__u32",
            offset: offset_of!($ty, $field),
            size: size_of::<u32>(),
        }
    }};
}

const STRUCTS: [CStruct; 2] = [
    CStruct {
        name: "oxe_alloc_ucontext_resp",
        size: size_of::<OxeAllocUcontextResp>(),
        fields: &[
            u32_field!(OxeAllocUcontextResp, abi_version),
            u32_field!(OxeAllocUcontextResp, caps),
            u32_field!(OxeAllocUcontextResp, max_inline),
            u32_field!(OxeAllocUcontextResp, reserved),
        ],
    },
    CStruct {
        name: "oxe_reg_mr_resp",
        size: size_of::<OxeRegMrResp>(),
        fields: &[
            u32_field!(OxeRegMrResp, page_shift),
            u32_field!(OxeRegMrResp, reserved),
        ],
    },
];

/// Whether the fields are in offset order, back to back from 0, and fill
/// the struct exactly: i.e. there is no implicit padding the C header
/// would not show.
const fn is_dense(s: &CStruct) -> bool {
    let mut expect = 0usize;
    let mut rest = s.fields;
    while let [f, tail @ ..] = rest {
        if f.offset != expect {
            return false;
        }
        expect = expect.wrapping_add(f.size);
        rest = tail;
    }
    expect == s.size
}

const _: () = {
    let mut rest = STRUCTS.as_slice();
    while let [s, tail @ ..] = rest {
        assert!(is_dense(s));
        assert!(s.size & 7 == 0);
        rest = tail;
    }
};

/// Writes `oxe-abi.h`, the C view of this module.
///
/// Generated rather than hand-written so that the header is, by
/// construction, the same ABI as the Rust structs; the checked-in copy is
/// compared against this output by a unit test.
pub fn write_c_header(out: &mut impl Write) -> core::fmt::Result {
    out.write_str(
        "/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */\n\
         /*\n \
         * oxe driver-private uverbs ABI.\n \
         *\n \
         * Generated from rust/core/src/abi.rs by\n \
         * `cargo run --example gen_abi_header`; do not edit.\n \
         */\n\
         #ifndef OXE_ABI_USER_H\n\
         #define OXE_ABI_USER_H\n\
         \n\
         #include <linux/types.h>\n\
         \n",
    )?;
    writeln!(out, "#define OXE_ABI_VERSION {OXE_ABI_VERSION}")?;
    out.write_str("\n")?;
    out.write_str("enum oxe_uctx_caps {\n")?;
    for (name, value) in [
        ("OXE_UCTX_CAP_REREG_TRANS", OXE_UCTX_CAP_REREG_TRANS),
        ("OXE_UCTX_CAP_REREG_PD", OXE_UCTX_CAP_REREG_PD),
        ("OXE_UCTX_CAP_REREG_ACCESS", OXE_UCTX_CAP_REREG_ACCESS),
    ] {
        writeln!(out, "\t{name} = 1 << {},", value.trailing_zeros())?;
    }
    out.write_str("};\n")?;
    for s in &STRUCTS {
        writeln!(out, "\nstruct {} {{", s.name)?;
        for f in s.fields {
            writeln!(out, "\t{} {};", f.c_type, f.name)?;
        }
        out.write_str("};\n")?;
    }
    out.write_str("\n#endif /* OXE_ABI_USER_H */\n")
}

#[cfg(test)]
mod tests {
    use super::{
        write_c_header, OxeAllocUcontextResp, OxeRegMrResp, OXE_ABI_VERSION,
        OXE_UCTX_CAP_REREG_ACCESS, OXE_UCTX_CAP_REREG_PD, OXE_UCTX_CAP_REREG_TRANS, STRUCTS,
    };
    use std::string::String;

    #[test]
    fn checked_in_header_matches_generated() {
        let mut generated = String::new();
        write_c_header(&mut generated).unwrap();
        let checked_in = include_str!("../oxe-abi.h");
        assert_eq!(
            generated, checked_in,
            "rust/core/oxe-abi.h is stale: regenerate it with \
             `cargo run --example gen_abi_header > oxe-abi.h`"
        );
    }

    #[test]
    fn header_describes_every_field() {
        let mut h = String::new();
        write_c_header(&mut h).unwrap();
        assert!(h.contains("#include <linux/types.h>"));
        assert!(h.contains("#ifndef OXE_ABI_USER_H"));
        assert!(h.contains("#define OXE_ABI_VERSION 1\n"));
        for s in &STRUCTS {
            assert!(h.contains(&std::format!("struct {} {{", s.name)));
            for f in s.fields {
                assert!(h.contains(&std::format!("\t__u32 {};", f.name)));
            }
        }
    }

    #[test]
    fn byte_images_round_trip() {
        let r = OxeAllocUcontextResp {
            abi_version: OXE_ABI_VERSION,
            caps: OXE_UCTX_CAP_REREG_TRANS | OXE_UCTX_CAP_REREG_PD | OXE_UCTX_CAP_REREG_ACCESS,
            max_inline: 0x1122_3344,
            reserved: 0,
        };
        let b = r.to_bytes();
        assert_eq!(b.len(), OxeAllocUcontextResp::SIZE);
        assert_eq!(&b[8..12], &0x1122_3344u32.to_ne_bytes());
        assert_eq!(OxeAllocUcontextResp::from_bytes(&b), Some(r));
        // A newer kernel may send more; an older one less, which we refuse.
        let mut longer = b.to_vec();
        longer.extend_from_slice(&[9; 8]);
        assert_eq!(OxeAllocUcontextResp::from_bytes(&longer), Some(r));
        assert_eq!(OxeAllocUcontextResp::from_bytes(&b[..15]), None);

        let m = OxeRegMrResp {
            page_shift: 12,
            reserved: 0,
        };
        let b = m.to_bytes();
        assert_eq!(b.len(), OxeRegMrResp::SIZE);
        assert_eq!(OxeRegMrResp::from_bytes(&b), Some(m));
        assert_eq!(OxeRegMrResp::from_bytes(&b[..7]), None);
    }

    #[test]
    fn caps_are_distinct_bits() {
        let caps = [
            OXE_UCTX_CAP_REREG_TRANS,
            OXE_UCTX_CAP_REREG_PD,
            OXE_UCTX_CAP_REREG_ACCESS,
        ];
        for (i, a) in caps.iter().enumerate() {
            assert_eq!(a.count_ones(), 1);
            for b in &caps[i + 1..] {
                assert_eq!(a & b, 0);
            }
        }
    }
}
