# oxe: one entry point.
#   make run    build whatever is stale, boot a guest, create devices and show them working
#   make test   every test: host unit tests, then the guest suites
# Caches (kernel trees, rdma-core build, tools) live in $(OXE_CACHE), outside the clone.
# Two guest kernels (scripts/lib.sh, kernel_fragments): `plain`, the yardstick
# for rxe and `make bench`, and `debug` (KASAN, lockdep), where oxe is tested.

SHELL := /bin/bash
# A bare `make` explains; it never installs packages or builds kernels.
.DEFAULT_GOAL := help
OXE_CACHE ?= $(HOME)/.cache/oxe
export OXE_CACHE

KRUSTC := /usr/bin/rustc
KLLVM := /usr/lib/llvm-19/bin/
KMAKE = $(MAKE) LLVM=$(KLLVM) RUSTC=$(KRUSTC) CLIPPY_DRIVER=/usr/bin/clippy-driver \
	BINDGEN=$(OXE_CACHE)/tools/bin/bindgen \
	LIBCLANG_PATH=/usr/lib/llvm-19/lib
# CLIPPY=1 runs clippy over the module's Rust as the kernel build does (`make CLIPPY=1 module`).
CLIPPY ?=
RESULTS := build/results
TIMED = scripts/timed.sh $(RESULTS)/timings.txt
# Never two kernel builds at once (2 cores): the steps below run one by one.
.NOTPARALLEL:

.PHONY: help run test bench shell deps kernel kernel-plain kernel-debug kernel-own module module-plain module-debug \
	module-kdir kmod kmod-plain kmod-debug kmod-kdir install install-module install-provider \
	rdma-core rdma-core-65 provider provider-65 guest-tools host-test check dkms-check fmt fuzz expectations clean distclean

help:
	@echo 'oxe: a software RoCE v2 RDMA device (kernel module + rdma-core provider).'
	@echo
	@echo 'The first build needs root on Debian bookworm: it installs Debian packages,'
	@echo 'then builds two guest kernels (15 to 25 minutes each on 2 cores) and'
	@echo 'rdma-core v59 into $(OXE_CACHE), outside the clone.'
	@echo
	@echo '  make run      build what is stale, boot a guest, show oxe working'
	@echo '  make test     every test: host checks, then the guest suites (over an hour)'
	@echo '  make shell    a guest shell with oxe loaded, for trying things by hand'
	@echo '                (OXE_KERNEL=debug make shell: on the KASAN + lockdep kernel)'
	@echo '  make bench    oxe against rxe in one guest, written to build/results/'
	@echo '  make check    rustfmt, clippy, the layering check'
	@echo '  make deps     only install what the build needs'
	@echo '  make module KDIR=/path/to/tree    oxe.ko for your own kernel tree (checked first)'
	@echo '  make install [KDIR=...] [DESTDIR=...]    the module and the provider, installed'
	@echo '  make dkms-check [KDIR=...]    DKMS builds and installs oxe.ko from dkms.conf (staged)'
	@echo '  make clean    drop build outputs; make distclean also drops $(OXE_CACHE)'
	@echo
	@echo 'More: README.md, and qemu-test/vm.sh for the guest modes.'

deps:
	@scripts/deps.sh

kernel: kernel-plain kernel-debug
# kernel-own: the stand-in for a developer's tree that `make test` builds
# oxe against through KDIR (qemu-test/kernel-own.fragment).
kernel-plain kernel-debug kernel-own: deps
	@scripts/kernel.sh build $(@:kernel-%=%) >/dev/null

rdma-core: deps
	@scripts/rdma-core.sh build >/dev/null
# rdma-core v65, the newest Debian ships: the provider's other ABI, tested on
# the host (host-test) and with rdma-core 65's stock tests (the stock65 guest).
rdma-core-65: deps
	@OXE_RDMA_CORE_VERSION=65 scripts/rdma-core.sh build >/dev/null

# The provider builds against the configured rdma-core tree and is installed into
# its build/lib, where the oxe.driver file (rdma-core-patches/0001) points, under
# the name of that tree's provider ABI (liboxe-rdmav59.so for v59, 65 for v65).
# OXE_RDMA_CORE_VERSION=65 (in the environment) selects rdma-core v65 for every
# target, the guests' included; a build for v65 has a cargo target directory of
# its own, so that the two never overwrite each other. provider-65 builds that
# one whatever the variable says.
RDMA_CORE_DIR = $$(scripts/rdma-core.sh dir)
PROVIDER_LIB = -l:liboxe-rdmav$$(scripts/rdma-core.sh pabi).so
OXE_RDMA_CORE_VERSION ?= 59
export OXE_RDMA_CORE_VERSION
provider_target = provider/target$(if $(filter-out 59,$(1)),/rdma-core-$(1))
PROVIDER_TARGET = $(call provider_target,$(OXE_RDMA_CORE_VERSION))
provider: rdma-core
	@rc=$(RDMA_CORE_DIR) && \
	OXE_RDMA_CORE=$$rc CARGO_TARGET_DIR=$(PROVIDER_TARGET) \
		cargo build -q --release --manifest-path provider/Cargo.toml && \
	install -m0755 $(PROVIDER_TARGET)/release/liboxe_rdmav59.so \
		$$rc/build/lib/liboxe-rdmav$$(scripts/rdma-core.sh pabi).so
provider-65: rdma-core-65
	@$(MAKE) -s provider OXE_RDMA_CORE_VERSION=65

# The module builds against each cached kernel tree, from this tree (Kbuild),
# into build/module-<flavour>/ (MO=): the two kernels need their own bindings.
#
# Your own kernel tree instead: `make module KDIR=/path/to/tree` (the tree's
# object directory, configured and built with Rust) checks the tree and the
# toolchain first (scripts/kdir.sh), then builds into build/module-kdir/.
# OXE_KDIR=/path/to/tree in the environment does the same for every target,
# and makes `make shell` and qemu-test/vm.sh boot that tree.
KDIR ?= $(OXE_KDIR)
ifneq ($(KDIR),)
module: module-kdir
kmod: kmod-kdir
else
module: module-plain module-debug
kmod: kmod-plain kmod-debug
endif
module-plain: kernel-plain
module-debug: kernel-debug
module-plain module-debug:
	@f=$(@:module-%=%) && kdir=$$(scripts/kernel.sh dir $$f) && mo=$(CURDIR)/build/module-$$f && \
	mkdir -p $$mo && $(KMAKE) -s -C $$kdir M=$(CURDIR) MO=$$mo $(if $(CLIPPY),CLIPPY=1) modules
module-kdir:
	@[ -n "$(KDIR)" ] || { echo 'module-kdir: set KDIR=/path/to/your/kernel/tree'; exit 1; }
	@mkdir -p build/module-kdir && scripts/kdir.sh make $(KDIR) -s M=$(CURDIR) \
		MO=$(CURDIR)/build/module-kdir $(if $(CLIPPY),CLIPPY=1) modules && \
		realpath $(KDIR) >build/module-kdir/.kdir

# The kernel consumer the guest's kconsumer suite loads, built like the module.
kmod-plain: kernel-plain
kmod-debug: kernel-debug
kmod-plain kmod-debug:
	@f=$(@:kmod-%=%) && kdir=$$(scripts/kernel.sh dir $$f) && mo=$(CURDIR)/build/kmod-$$f && \
	mkdir -p $$mo && $(KMAKE) -s -C $$kdir M=$(CURDIR)/qemu-test/kmod MO=$$mo modules
kmod-kdir:
	@[ -n "$(KDIR)" ] || { echo 'kmod-kdir: set KDIR=/path/to/your/kernel/tree'; exit 1; }
	@mkdir -p build/kmod-kdir && scripts/kdir.sh make $(KDIR) -s M=$(CURDIR)/qemu-test/kmod \
		MO=$(CURDIR)/build/kmod-kdir modules

# Installs oxe like any RDMA driver, from what `make module provider` built
# (it builds nothing, so it runs as root against a read-only clone):
#   oxe.ko through the kernel tree's modules_install into
#     $(INSTALL_MOD_PATH)/lib/modules/<release>/updates, then depmod, so that
#     `rdma link add NAME type oxe netdev DEV` loads it by its alias;
#   the provider into an rdma-core installation: liboxe-rdmav<ABI>.so into
#     $(IBV_PROVIDER_DIR), oxe.driver into $(IBV_CONFIG_DIR), oxedv.h into
#     $(includedir)/infiniband and liboxe.pc into $(libdir)/pkgconfig, each under
#     $(DESTDIR).
# KDIR as for `make module`; without it, the running kernel's build tree, as
# for any out-of-tree module.
prefix ?= /usr
libdir ?= $(prefix)/lib/$(shell gcc -print-multiarch)
includedir ?= $(prefix)/include
IBV_PROVIDER_DIR ?= $(libdir)/libibverbs
IBV_CONFIG_DIR ?= /etc/libibverbs.d
INSTALL_MOD_PATH ?=
OXE_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' provider/Cargo.toml)
INSTALL_KDIR = $(or $(KDIR),/lib/modules/$(shell uname -r)/build)
install: install-module install-provider
install-module:
	@scripts/install.sh module $(INSTALL_KDIR) "$(INSTALL_MOD_PATH)"
install-provider:
	@scripts/install.sh provider $(PROVIDER_TARGET)/release/liboxe_rdmav59.so "$(DESTDIR)" \
		"$(IBV_PROVIDER_DIR)" "$(IBV_CONFIG_DIR)" "$(includedir)" "$(libdir)" "$(OXE_VERSION)" "$(prefix)"

# Userspace tests that need no guest: the setup logic, oxe-core, the provider.
host-test: provider provider-65
	@mkdir -p $(RESULTS) && scripts/test-setup.sh >$(RESULTS)/setup-tests.log 2>&1 || { cat $(RESULTS)/setup-tests.log; exit 1; }
	@cargo test -q --manifest-path rust/core/Cargo.toml
	@OXE_RDMA_CORE=$(RDMA_CORE_DIR) CARGO_TARGET_DIR=$(PROVIDER_TARGET) \
		cargo test -q --release --manifest-path provider/Cargo.toml
	@# The provider against rdma-core v65 too, in its own target directory.
	@OXE_RDMA_CORE=$$(OXE_RDMA_CORE_VERSION=65 scripts/rdma-core.sh dir) \
		CARGO_TARGET_DIR=$(call provider_target,65) \
		cargo test -q --release --manifest-path provider/Cargo.toml
	@cd qemu-test/bench && out=$$(PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 test_report.py 2>&1) || \
		{ echo "$$out"; exit 1; }

check: rdma-core rdma-core-65
	@export OXE_RDMA_CORE=$(RDMA_CORE_DIR); for d in rust/core rust/core/fuzz provider; do \
		cargo fmt --manifest-path $$d/Cargo.toml -- --check && \
		cargo clippy -q --manifest-path $$d/Cargo.toml --all-targets -- -D warnings || exit 1; \
	done
	@OXE_RDMA_CORE=$$(OXE_RDMA_CORE_VERSION=65 scripts/rdma-core.sh dir) \
		CARGO_TARGET_DIR=$(call provider_target,65) \
		cargo clippy -q --manifest-path provider/Cargo.toml --all-targets -- -D warnings
	@rustfmt --edition 2021 --check $$(git ls-files 'rust/*.rs' | grep -v '^rust/core/')
	@python3 scripts/check_layers.py .
	@python3 scripts/check_prose.py .
	@python3 scripts/check_man.py .

# DKMS's own run of dkms.conf (add, build, install, all staged) for KDIR, by
# default the `own` stand-in kernel (make kernel-own).
dkms-check: deps
	@scripts/dkms-check.sh $(KDIR)

fmt:
	@for d in rust/core rust/core/fuzz provider; do [ -f $$d/Cargo.toml ] && cargo fmt --manifest-path $$d/Cargo.toml; done; true
	@rustfmt --edition 2021 $$(git ls-files 'rust/*.rs' | grep -v '^rust/core/')

# Coverage-guided fuzzing (libFuzzer) of what a peer controls: the packet parser and
# the ICRC check (rust/core/fuzz). Stable Rust: coverage instrumentation through
# -Cpasses/-Cllvm-args, the flags cargo-fuzz passes, with overflow and debug checks on
# as in the kernel. The corpus grows in build/fuzz/; a crash leaves its input there
# and fails the target.
FUZZ_SECONDS ?= 60
FUZZ_TRIPLE = $(shell rustc -vV | sed -n 's/^host: //p')
FUZZ_RUSTFLAGS = --cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
	-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks
fuzz: deps
	@cd rust/core/fuzz && RUSTFLAGS="$(FUZZ_RUSTFLAGS)" cargo build -q --release --target $(FUZZ_TRIPLE)
	@mkdir -p build/fuzz/packet_parse && rust/core/fuzz/target/$(FUZZ_TRIPLE)/release/packet_parse \
		-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=build/fuzz/ \
		build/fuzz/packet_parse 2>&1 | grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==|SUMMARY)' ; \
		exit $${PIPESTATUS[0]}

# Test programs the guest suites run, against the v59 build (a second of gcc each);
# inline_recv_qp, mkey_qp and rc_xfer_mkey link against the provider itself, for its direct
# verbs (oxedv.h). mpi_check is Open MPI's, with Debian's libibverbs underneath
# (the guest's LD_LIBRARY_PATH puts the v59 build in its place).
guest-tools: provider
	@mkdir -p build && rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -Wextra -o build/rc_xfer \
		qemu-test/clients/rc_xfer.c -I$$rc/build/include -L$$rc/build/lib -lrdmacm -libverbs \
		-Wl,-rpath,$$rc/build/lib && \
	gcc -O2 -Wall -Wextra -o build/uverbs_abuse qemu-test/clients/uverbs_abuse.c \
		-I$$rc/build/include -L$$rc/build/lib -libverbs -lpthread -Wl,-rpath,$$rc/build/lib
	@rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -Wextra -o build/odp_race qemu-test/clients/odp_race.c \
		-I$$rc/build/include -L$$rc/build/lib -libverbs -lpthread -Wl,-rpath,$$rc/build/lib
	@rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -Wextra -o build/verbs_races \
		qemu-test/clients/verbs_races.c -I$$rc/build/include -L$$rc/build/lib -libverbs \
		-lpthread -Wl,-rpath,$$rc/build/lib
	@rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -Wextra -o build/inline_recv_qp \
		qemu-test/clients/inline_recv_qp.c -Iprovider/include -I$$rc/build/include \
		-L$$rc/build/lib $(PROVIDER_LIB) -libverbs -Wl,-rpath,$$rc/build/lib
	@rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -Wextra -DWITH_OXEDV -o build/rc_xfer_mkey \
		qemu-test/clients/rc_xfer.c -Iprovider/include -I$$rc/build/include -L$$rc/build/lib \
		$(PROVIDER_LIB) -lrdmacm -libverbs -Wl,-rpath,$$rc/build/lib
	@rc=$(RDMA_CORE_DIR) && for t in mkey_qp mkey_inflight; do \
		gcc -O2 -Wall -Wextra -o build/$$t qemu-test/clients/$$t.c -Iprovider/include \
		-I$$rc/build/include -L$$rc/build/lib $(PROVIDER_LIB) -libverbs \
		-Wl,-rpath,$$rc/build/lib || exit 1; done
	@mpicc -O2 -Wall -Wextra -o build/mpi_check qemu-test/clients/mpi_check.c

run: $(if $(KDIR),module-kdir,module-plain) provider
	@OXE_KDIR=$(KDIR) qemu-test/vm.sh run plain

# Builds first (each step timed; a failed build stops here, saying why), then
# every check, each recorded pass or fail: oxe's guest suites on the debug
# kernel (and NVMe-oF again with ib_core.force_mr=1, and against rxe in a
# second guest on one virtual wire), oxe built through KDIR against a third
# tree and installed into a staged root, then rxe's yardstick on the plain one
# (scripts/guests.sh). Ends with oxe's stock rdma-core tests against rxe's,
# and where the time went. With KDIR (or OXE_KDIR), every guest but the wire's
# boots that tree instead, and no kernel is built.
test:
	@mkdir -p $(RESULTS) && rm -f $(RESULTS)/checks.txt $(RESULTS)/timings.txt $(RESULTS)/suites/*.json \
		$(RESULTS)/boot-retries.txt
	@$(TIMED) "setup (packages, tools)" $(MAKE) -s deps
ifeq ($(KDIR),)
	@$(TIMED) "kernel, plain" $(MAKE) -s kernel-plain
	@$(TIMED) "kernel, debug" $(MAKE) -s kernel-debug
	@$(TIMED) "kernel, own (the stand-in for KDIR)" $(MAKE) -s kernel-own
endif
	@$(TIMED) "rdma-core" $(MAKE) -s rdma-core
	@$(TIMED) "rdma-core 65 (the provider's other ABI)" $(MAKE) -s rdma-core-65
	@$(TIMED) "module (each kernel), provider, guest tools" $(MAKE) -s module kmod provider provider-65 guest-tools
ifeq ($(KDIR),)
	@$(TIMED) "module, KDIR=the own tree" $(MAKE) -s module-kdir kmod-kdir KDIR=$$(scripts/kernel.sh dir own)
endif
	@for step in check host-test "fuzz FUZZ_SECONDS=30" dkms-check; do \
		if $(TIMED) "$${step%% *}" $(MAKE) -s $$step; then r=pass; else r=fail; fi; \
		echo "$${step%% *} $$r" >>$(RESULTS)/checks.txt; \
	done
	@OXE_KDIR=$(KDIR) scripts/guests.sh $(RESULTS)
	@echo; echo "where the time went (seconds):"; column -t -s "$$(printf '\t')" $(RESULTS)/timings.txt | sed 's/^/  /'
	@if [ -s $(RESULTS)/boot-retries.txt ]; then echo; echo "guests booted twice:"; sed 's/^/  /' $(RESULTS)/boot-retries.txt; fi
	@echo; sed 's/^/  /' $(RESULTS)/checks.txt; \
		p=$$(grep -c ' pass$$' $(RESULTS)/checks.txt); f=$$(grep -c ' fail$$' $(RESULTS)/checks.txt); \
		echo "$$p passed, $$f failed"; \
		if [ $$f != 0 ] && [ -s $(RESULTS)/failures.txt ]; then echo; cat $(RESULTS)/failures.txt; fi; \
		[ $$f = 0 ]

# Benchmarks (never timed tests): MR registration and perftest on oxe and rxe, same guest;
# oxe's indirect keys against what they replace.
bench: module-plain provider guest-tools
	@mkdir -p build && rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -o build/mr_bench qemu-test/bench/mr_bench.c \
		-I$$rc/build/include -L$$rc/build/lib -libverbs -Wl,-rpath,$$rc/build/lib
	@rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -Wextra -o build/mkey_bench qemu-test/bench/mkey_bench.c \
		-Iprovider/include -I$$rc/build/include -L$$rc/build/lib $(PROVIDER_LIB) -libverbs \
		-Wl,-rpath,$$rc/build/lib
	@qemu-test/vm.sh bench plain
	@qemu-test/bench/report.py $(RESULTS) docs/benchmarks.md

# OXE_KERNEL=debug make shell: the same, on the KASAN + lockdep kernel (only
# that kernel and its module are built).
OXE_KERNEL ?= plain
shell: $(if $(KDIR),module-kdir,module-$(OXE_KERNEL)) provider guest-tools
	@OXE_KDIR=$(KDIR) qemu-test/vm.sh shell $(OXE_KERNEL)

# Adds every test that now passes to qemu-test/expected/ (never removes one).
expectations:
	@for v in $(RESULTS)/logs/*.verdicts.json; do \
		n=$$(basename $$v .verdicts.json); \
		qemu-test/results.py grow qemu-test/expected/$$n.txt $$v; \
	done

clean:
	rm -rf build rust/core/target rust/core/fuzz/target provider/target

# Also drops the caches outside the clone (kernel tree, rdma-core, tools).
distclean: clean
	rm -rf $(OXE_CACHE)
