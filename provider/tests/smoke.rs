// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Host smoke tests of the built provider library: no oxe device, no
//! pyverbs, no C. They check what libibverbs relies on when it
//! `dlopen()`s `liboxe-rdmav<ABI>.so`:
//!
//! * the library exports nothing (like rdma-core's C providers, whose
//!   `provider.map` is `local: *`): libibverbs finds it only through its
//!   constructor, and no symbol can clash with another provider's;
//! * it imports only libc/libgcc and libibverbs' private provider ABI of
//!   the tree it is built against (`OXE_PABI`, from build.rs), and exactly
//!   the helpers the implemented verbs need;
//! * it loads, with every import resolved, against the configured rdma-core
//!   tree's libibverbs (which also runs the registering constructor).
//!
//! The library is the one cargo builds for these tests (the crate is also an
//! `rlib`, so `cargo test` produces the cdylib next to the test binary); the
//! release build is the same code with other optimisation settings.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIB: &str = "liboxe_rdmav59.so";

/// The cdylib cargo built alongside this test.
fn provider_so() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test>: the cdylib is in deps/ (built for the
    // test) or, after a `cargo build`, in target/<profile>/.
    let deps = exe.parent().expect("deps dir");
    let candidates = [
        deps.join(LIB),
        deps.parent().expect("profile dir").join(LIB),
    ];
    candidates
        .iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{LIB} not found in {candidates:?}"))
        .clone()
}

/// Runs a binutils tool on the library and returns its standard output.
fn tool(program: &str, args: &[&str]) -> String {
    let so = provider_so();
    let out = Command::new(program)
        .args(args)
        .arg(&so)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (binutils): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} {} failed: {}",
        so.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// The functions `include/oxedv.h` declares: `oxedv_name(` at the start
/// of a declaration (after its return type).
fn declared_direct_verbs() -> BTreeSet<String> {
    let header = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/oxedv.h");
    let text = std::fs::read_to_string(&header).expect("include/oxedv.h");
    // Every chunk before a '(' ends with the name called or declared.
    let mut chunks: Vec<&str> = text.split('(').collect();
    chunks.pop();
    chunks
        .iter()
        .filter_map(|c| {
            c.rsplit(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .next()
        })
        .filter(|w| w.starts_with("oxedv_"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn exports_exactly_the_direct_verbs() {
    let defined = tool("nm", &["-D", "--defined-only"]);
    // "addr T name@@OXEDV_1.0"; the version node itself is an absolute
    // symbol ("A OXEDV_1.0").
    let symbols: Vec<(&str, &str)> = defined
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace().skip(1);
            Some((w.next()?, w.next()?))
        })
        .filter(|(kind, _)| *kind != "A")
        .collect();
    for (_, s) in &symbols {
        assert!(
            s.ends_with("@@OXEDV_1.0"),
            "{s}: every direct verb has version OXEDV_1.0 (liboxe.map)"
        );
    }
    let exported: BTreeSet<String> = symbols
        .iter()
        .map(|(_, s)| s.split('@').next().unwrap_or(s).to_owned())
        .collect();
    let declared = declared_direct_verbs();
    assert!(declared.contains("oxedv_create_qp"), "{declared:?}");
    // Nothing else: libibverbs reaches the provider only through its
    // constructor, as rdma-core's provider.map makes it for C providers.
    assert_eq!(exported, declared, "the provider exports only oxedv.h");
}

#[test]
fn imports_only_libc_and_the_private_verbs_abi() {
    let undefined = tool("nm", &["-D", "--undefined-only"]);
    let mut verbs = BTreeSet::new();
    for line in undefined.lines() {
        // "   U name@VERSION" or "   w name[@VERSION]"
        let mut fields = line.split_whitespace();
        let kind = fields.next().expect("symbol kind");
        let sym = fields.next().expect("symbol name");
        let (name, version) = sym.split_once('@').unwrap_or((sym, ""));
        if version.starts_with("IBVERBS") {
            assert_eq!(
                version,
                concat!("IBVERBS_PRIVATE_", env!("OXE_PABI")),
                "{name} binds to libibverbs' {version}, not the provider ABI {}",
                env!("OXE_PABI")
            );
            verbs.insert(name);
        } else if version.is_empty() {
            assert_eq!(kind, "w", "unversioned strong import {name}");
        } else {
            assert!(
                version.starts_with("GLIBC_") || version.starts_with("GCC_"),
                "unexpected import {sym}"
            );
        }
    }
    let mut expected: BTreeSet<&str> = [
        "_verbs_init_and_alloc_context",
        "ibv_cmd_advise_mr",
        "ibv_cmd_alloc_mw",
        "ibv_cmd_alloc_pd",
        "ibv_cmd_attach_mcast",
        "ibv_cmd_create_ah",
        "ibv_cmd_create_cq",
        "ibv_cmd_create_cq_ex",
        "ibv_cmd_create_qp",
        "ibv_cmd_create_qp_ex2",
        "ibv_cmd_create_srq",
        "ibv_cmd_dealloc_mw",
        "ibv_cmd_dealloc_pd",
        "ibv_cmd_dereg_mr",
        "ibv_cmd_destroy_ah",
        "ibv_cmd_destroy_cq",
        "ibv_cmd_destroy_qp",
        "ibv_cmd_destroy_srq",
        "ibv_cmd_detach_mcast",
        "ibv_cmd_get_context",
        "ibv_cmd_modify_qp",
        "ibv_cmd_modify_srq",
        "ibv_cmd_query_device_any",
        "ibv_cmd_query_port",
        "ibv_cmd_query_qp",
        "ibv_cmd_query_srq",
        "ibv_cmd_reg_mr",
        "ibv_cmd_req_notify_cq",
        "ibv_cmd_rereg_mr",
        "ibv_cmd_resize_cq",
        concat!("verbs_register_driver_", env!("OXE_PABI")),
        "verbs_set_ops",
        "verbs_uninit_context",
    ]
    .into_iter()
    .collect();
    // ibv_query_port_speed's command is ABI 64's (rdma-core v64.0).
    if env!("OXE_PABI") != "59" {
        expected.insert("ibv_cmd_query_port_speed");
    }
    assert_eq!(verbs, expected);
}

#[test]
fn needs_libibverbs_and_the_c_runtime_only() {
    let needed: BTreeSet<String> = tool("readelf", &["-d", "-W"])
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.trim_end_matches(']').to_owned()))
        .collect();
    assert!(needed.contains("libibverbs.so.1"), "{needed:?}");
    for lib in &needed {
        assert!(
            lib == "libibverbs.so.1"
                || lib.starts_with("libc.so")
                || lib.starts_with("libgcc_s.so")
                || lib.starts_with("ld-linux"),
            "unexpected dependency {lib}"
        );
    }
}

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlerror() -> *const c_char;
}

const RTLD_NOW: c_int = 2;

#[test]
fn loads_against_the_configured_libibverbs() {
    let so = CString::new(provider_so().as_os_str().as_bytes()).expect("no NUL in path");
    // RTLD_NOW as libibverbs uses: every import must resolve at load time.
    // The library's run path names the rdma-core tree's build/lib, so this
    // binds to that libibverbs (the system's may be another version). The
    // handle is never closed: libibverbs keeps providers loaded too, and
    // the constructor has registered the device ops with it.
    // SAFETY: a NUL-terminated path; loading runs the provider's
    // constructor, which only registers its ops with libibverbs.
    let handle = unsafe { dlopen(so.as_ptr(), RTLD_NOW) };
    if handle.is_null() {
        // SAFETY: a plain libc call.
        let err = unsafe { dlerror() };
        // SAFETY: after a failure dlerror returns a NUL-terminated message.
        let err = unsafe { CStr::from_ptr(err) };
        panic!("dlopen failed: {}", err.to_string_lossy());
    }
}
