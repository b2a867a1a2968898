//! Build script for the oxe rdma-core provider.
//!
//! rdma-core does not install the headers a provider is written against
//! (`infiniband/driver.h`, `kern-abi.h`, `cmd_*.h`): they exist only in a
//! configured rdma-core tree, whose `build/include` links them together the
//! way rdma-core's own providers see them. So this script
//!
//! 1. locates that tree through `OXE_RDMA_CORE` (the tree's top directory),
//! 2. runs bindgen over `c/wrapper.h` with the same include path rdma-core
//!    uses for `providers/rxe`,
//! 3. compiles the C glue (`c/glue.c`: match table, device ops, constructor),
//!    which takes the kernel ABI version from oxe-core's generated C header
//!    `rust/core/oxe-abi.h`,
//! 4. links against the tree's `build/lib/libibverbs.so`.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=OXE_RDMA_CORE");
    println!("cargo:rerun-if-changed=c/wrapper.h");
    println!("cargo:rerun-if-changed=c/glue.c");
    println!("cargo:rerun-if-changed=include/oxedv.h");

    let top = rdma_core_top();
    let abi_dir = oxe_abi_dir();
    let include = top.join("build/include");
    let lib = top.join("build/lib");
    // bindgen's CargoCallbacks reports every header it reads; the library
    // is the other input that comes from the tree.
    println!(
        "cargo:rerun-if-changed={}",
        lib.join("libibverbs.so").display()
    );

    generate_bindings(&include, &abi_dir);
    compile_glue(&include, &abi_dir);

    // rdma-core's private provider ABI, which its release bumps when a
    // provider-facing interface changes: it names the libibverbs version
    // node the helpers bind to, the provider's file (lib<name>-rdmav<N>.so)
    // and the registration symbol. What differs between the ABIs oxe
    // supports is in src/ffi/pabi.rs, behind `oxe_pabi_64`.
    let pabi = provider_abi(&include);
    println!("cargo:rustc-check-cfg=cfg(oxe_pabi_64)");
    if pabi >= 64 {
        println!("cargo:rustc-cfg=oxe_pabi_64");
    }
    println!("cargo:rustc-env=OXE_PABI={pabi}");

    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    // The same run path rdma-core gives its in-place providers. A process
    // that loads the provider has libibverbs loaded already, so this only
    // matters for loading it elsewhere: the tests, which must find the
    // tree's libibverbs rather than the system's older one.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    // Like rdma-core's own providers: every symbol must resolve at link time
    // (the ibv_cmd_* helpers live in libibverbs' IBVERBS_PRIVATE_<ABI> node).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-undefined");
    // The direct verbs' version node (`src/ffi/oxedv.rs` binds each symbol
    // to it), and the name the library is installed under, which programs
    // linked against it record.
    let map = Path::new(env!("CARGO_MANIFEST_DIR")).join("liboxe.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liboxe-rdmav{pabi}.so");
}

/// The tree's `IBVERBS_PABI_VERSION` (its `config.h`): 59 for rdma-core
/// v59 to v63, 65 for v65.
fn provider_abi(include: &Path) -> u32 {
    let config = include.join("config.h");
    let text =
        std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{}: {e}", config.display()));
    let pabi = text
        .lines()
        .find_map(|l| l.strip_prefix("#define IBVERBS_PABI_VERSION "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{} defines no IBVERBS_PABI_VERSION", config.display()));
    if pabi != 59 && pabi != 65 {
        panic!(
            "rdma-core's provider ABI {pabi} is not one oxe's provider is built and \
             tested against: 59 (rdma-core v59 to v63) or 65 (rdma-core v65)"
        );
    }
    pabi
}

/// The configured in-place rdma-core tree (v59, or v65), from `OXE_RDMA_CORE`.
fn rdma_core_top() -> PathBuf {
    let Some(top) = env::var_os("OXE_RDMA_CORE") else {
        panic!(
            "OXE_RDMA_CORE is not set: point it at the top of an rdma-core tree \
             configured and built in place (cmake -DIN_PLACE=1, ninja), e.g. \
             OXE_RDMA_CORE=$(scripts/rdma-core.sh dir)"
        );
    };
    let top = PathBuf::from(top);
    for needed in [
        "build/include/config.h",
        "build/include/infiniband/driver.h",
        "build/lib/libibverbs.so",
    ] {
        if !top.join(needed).exists() {
            panic!(
                "OXE_RDMA_CORE={} is not a built in-place rdma-core tree: {} is missing",
                top.display(),
                needed
            );
        }
    }
    top
}

/// The directory of oxe-core's C view of the driver ABI, `oxe-abi.h`.
fn oxe_abi_dir() -> PathBuf {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dir = manifest.join("../rust/core");
    let header = dir.join("oxe-abi.h");
    if !header.exists() {
        panic!(
            "{} is missing: it is generated from rust/core/src/abi.rs \
             (cargo run --example gen_abi_header in rust/core)",
            header.display()
        );
    }
    println!("cargo:rerun-if-changed={}", header.display());
    dir
}

/// Rust declarations for exactly the rdma-core items the provider uses.
fn generate_bindings(include: &Path, abi_dir: &Path) {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bindings = bindgen::Builder::default()
        .header("c/wrapper.h")
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg(format!("-I{}", abi_dir.display()))
        .clang_arg("-Iinclude")
        .clang_arg("-std=gnu11")
        .use_core()
        .derive_default(true)
        .layout_tests(true)
        .wrap_unsafe_ops(true)
        .generate_comments(false)
        .prepend_enum_name(false)
        // libibverbs entry points the provider calls.
        .allowlist_function("ibv_cmd_get_context")
        .allowlist_function("ibv_cmd_query_device_any")
        .allowlist_function("ibv_cmd_query_port")
        // From ABI 64 (rdma-core v64.0) only.
        .allowlist_function("ibv_cmd_query_port_speed")
        .allowlist_function("ibv_cmd_alloc_pd")
        .allowlist_function("ibv_cmd_dealloc_pd")
        .allowlist_function("ibv_cmd_reg_mr")
        .allowlist_function("ibv_cmd_rereg_mr")
        .allowlist_function("ibv_cmd_dereg_mr")
        .allowlist_function("ibv_cmd_advise_mr")
        .allowlist_function("ibv_cmd_alloc_mw")
        .allowlist_function("ibv_cmd_dealloc_mw")
        .allowlist_function("ibv_cmd_create_cq")
        .allowlist_function("ibv_cmd_create_cq_ex")
        .allowlist_function("ibv_cmd_destroy_cq")
        .allowlist_function("ibv_cmd_req_notify_cq")
        .allowlist_function("ibv_cmd_resize_cq")
        .allowlist_function("ibv_cmd_create_qp")
        .allowlist_function("ibv_cmd_create_qp_ex2")
        .allowlist_function("ibv_cmd_modify_qp")
        .allowlist_function("ibv_cmd_query_qp")
        .allowlist_function("ibv_cmd_destroy_qp")
        .allowlist_function("ibv_cmd_create_srq")
        .allowlist_function("ibv_cmd_modify_srq")
        .allowlist_function("ibv_cmd_query_srq")
        .allowlist_function("ibv_cmd_destroy_srq")
        .allowlist_function("ibv_cmd_create_ah")
        .allowlist_function("ibv_cmd_destroy_ah")
        .allowlist_function("ibv_cmd_attach_mcast")
        .allowlist_function("ibv_cmd_detach_mcast")
        .allowlist_function("_verbs_init_and_alloc_context")
        .allowlist_function("verbs_uninit_context")
        .allowlist_function("verbs_set_ops")
        // libc.
        .allowlist_function("free")
        .allowlist_function("__errno_location")
        .allowlist_function("mmap")
        .allowlist_function("munmap")
        .allowlist_function("write")
        .allowlist_var("PROT_READ")
        .allowlist_var("PROT_WRITE")
        .allowlist_var("MAP_SHARED")
        // Types reached only through the above are pulled in automatically;
        // these are used directly.
        .allowlist_type("verbs_context_ops")
        .allowlist_type("verbs_device")
        .allowlist_type("verbs_sysfs_dev")
        .allowlist_type("ibv_get_context")
        .allowlist_type("ibv_query_port")
        .allowlist_type("ibv_alloc_pd")
        .allowlist_type("ibv_reg_mr")
        .allowlist_type("ibv_rereg_mr")
        .allowlist_type("ibv_rereg_mr_flags")
        .allowlist_type("ibv_alloc_mw")
        .allowlist_type("ibv_mw_bind")
        .allowlist_type("rdma_driver_id")
        // The data path: queue objects, their create/modify commands and
        // replies, and the flag sets the provider translates or checks.
        .allowlist_type("verbs_cq")
        .allowlist_type("verbs_qp")
        .allowlist_type("verbs_srq")
        .allowlist_type("verbs_qp_mask")
        .allowlist_type("ibv_create_cq")
        .allowlist_type("ibv_create_cq_ex")
        .allowlist_type("ibv_resize_cq")
        .allowlist_type("ibv_create_qp")
        .allowlist_type("ibv_create_qp_ex")
        .allowlist_type("ibv_modify_qp")
        .allowlist_type("ibv_qp_attr_mask")
        .allowlist_type("ibv_query_qp")
        .allowlist_type("ibv_create_srq")
        .allowlist_type("ibv_modify_srq")
        .allowlist_type("ibv_query_srq")
        .allowlist_type("ibv_post_send")
        .allowlist_type("ib_uverbs_post_send_resp")
        .allowlist_type("ib_uverbs_write_cmds")
        .allowlist_type("ib_uverbs_create_cq_resp")
        .allowlist_type("ib_uverbs_ex_create_cq_resp")
        .allowlist_type("ib_uverbs_resize_cq_resp")
        .allowlist_type("ib_uverbs_create_qp_resp")
        .allowlist_type("ib_uverbs_ex_create_qp_resp")
        .allowlist_type("ib_uverbs_create_srq_resp")
        .allowlist_type("ib_uverbs_create_ah_resp")
        .allowlist_type("ibv_send_flags")
        .allowlist_type("ibv_wc_flags")
        .allowlist_type("ibv_create_cq_wc_flags")
        .allowlist_type("ibv_cq_init_attr_mask")
        .allowlist_type("ibv_create_cq_attr_flags")
        .allowlist_type("ibv_qp_init_attr_mask")
        .allowlist_type("ibv_qp_create_send_ops_flags")
        .allowlist_type("ibv_srq_attr_mask")
        .allowlist_var("VERBS_MATCH_.*")
        // oxe-abi.h's structs, only to check them against oxe-core's.
        .allowlist_type("oxe_.*")
        // The direct verbs' types: the exported functions take them.
        .allowlist_type("oxedv_.*")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("bindgen failed on c/wrapper.h (is LIBCLANG_PATH set, e.g. /usr/lib/llvm-19/lib?)");
    bindings
        .write_to_file(out.join("rdma_core.rs"))
        .expect("writing the bindings to OUT_DIR");
}

/// The small C part: the name match table, the `verbs_device_ops` and the
/// `PROVIDER_DRIVER` constructor, all written with rdma-core's own macros.
fn compile_glue(include: &Path, abi_dir: &Path) {
    cc::Build::new()
        .file("c/glue.c")
        .include(include)
        .include(abi_dir)
        .std("gnu11")
        .warnings(true)
        .extra_warnings(true)
        // As rdma-core builds its providers: its inline helpers in
        // cmd_ioctl.h have unused parameters.
        .flag("-Wno-unused-parameter")
        // Nothing in Rust names a glue symbol (the glue calls Rust, and its
        // constructor is found through .init_array), so without
        // whole-archive the linker would drop the object.
        .link_lib_modifier("+whole-archive")
        .compile("oxe_glue");
}
