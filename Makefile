# oxe: one entry point.
#   make run    build whatever is stale, boot a guest, create devices and show them working
#   make test   every test: host unit tests, then the guest suites
# Caches (kernel tree, rdma-core build, tools) live in $(OXE_CACHE), outside the clone.

SHELL := /bin/bash
.DEFAULT_GOAL := run
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

.PHONY: run test bench shell deps kernel module rdma-core provider guest-tools host-test check fmt fuzz expectations clean distclean

deps:
	@scripts/deps.sh

kernel: deps
	@scripts/kernel.sh build >/dev/null

rdma-core: deps
	@scripts/rdma-core.sh build >/dev/null

# The provider builds against the configured rdma-core tree and is installed into
# its build/lib, where the oxe.driver file (rdma-core-patches/0001) points.
RDMA_CORE_DIR = $$(scripts/rdma-core.sh dir)
provider: rdma-core
	@rc=$(RDMA_CORE_DIR) && \
	OXE_RDMA_CORE=$$rc cargo build -q --release --manifest-path provider/Cargo.toml && \
	install -m0755 provider/target/release/liboxe_rdmav59.so $$rc/build/lib/liboxe-rdmav59.so

# The module builds against the cached kernel tree, in this tree (Kbuild).
module: kernel
	@kdir=$$(scripts/kernel.sh dir) && \
	$(KMAKE) -s -C $$kdir M=$(CURDIR) $(if $(CLIPPY),CLIPPY=1) modules

# Userspace tests that need no guest.
host-test: provider
	@cargo test -q --manifest-path rust/core/Cargo.toml
	@OXE_RDMA_CORE=$(RDMA_CORE_DIR) cargo test -q --release --manifest-path provider/Cargo.toml

check: rdma-core
	@export OXE_RDMA_CORE=$(RDMA_CORE_DIR); for d in rust/core rust/core/fuzz provider; do \
		cargo fmt --manifest-path $$d/Cargo.toml -- --check && \
		cargo clippy -q --manifest-path $$d/Cargo.toml --all-targets -- -D warnings || exit 1; \
	done
	@rustfmt --edition 2021 --check $$(git ls-files 'rust/*.rs' | grep -v '^rust/core/')

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

# Test programs the guest suites run, against the v59 build (a second of gcc each).
guest-tools: rdma-core
	@mkdir -p build && rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -Wextra -o build/rc_xfer \
		qemu-test/clients/rc_xfer.c -I$$rc/build/include -L$$rc/build/lib -lrdmacm -libverbs \
		-Wl,-rpath,$$rc/build/lib

run: module provider
	@qemu-test/vm.sh run

test: module provider guest-tools
	@mkdir -p $(RESULTS) && rm -f $(RESULTS)/checks.txt $(RESULTS)/suites/*.json
	@if $(MAKE) -s check; then echo "check pass" >>$(RESULTS)/checks.txt; \
		else echo "check fail" >>$(RESULTS)/checks.txt; fi
	@if $(MAKE) -s host-test; then echo "host-test pass" >>$(RESULTS)/checks.txt; \
		else echo "host-test fail" >>$(RESULTS)/checks.txt; fi
	@if $(MAKE) -s fuzz FUZZ_SECONDS=30; then echo "fuzz pass" >>$(RESULTS)/checks.txt; \
		else echo "fuzz fail" >>$(RESULTS)/checks.txt; fi
	@qemu-test/vm.sh test; rc=$$?; \
		cat $(RESULTS)/guest-checks.txt >>$(RESULTS)/checks.txt 2>/dev/null; \
		[ $$rc = 0 ] || echo "guest fail" >>$(RESULTS)/checks.txt
	@echo; sed 's/^/  /' $(RESULTS)/checks.txt; \
		p=$$(grep -c ' pass$$' $(RESULTS)/checks.txt); f=$$(grep -c ' fail$$' $(RESULTS)/checks.txt); \
		echo "$$p passed, $$f failed"; [ $$f = 0 ]

# Benchmarks (never timed tests): MR registration and perftest on oxe and rxe, same guest.
bench: module provider guest-tools
	@mkdir -p build && rc=$(RDMA_CORE_DIR) && gcc -O2 -Wall -o build/mr_bench qemu-test/bench/mr_bench.c \
		-I$$rc/build/include -L$$rc/build/lib -libverbs -Wl,-rpath,$$rc/build/lib
	@qemu-test/vm.sh bench
	@qemu-test/bench/report.py $(RESULTS)

shell: module provider
	@qemu-test/vm.sh shell

# Adds every test that now passes to qemu-test/expected/ (never removes one).
expectations:
	@for v in $(RESULTS)/logs/*.verdicts.json; do \
		n=$$(basename $$v .verdicts.json); \
		qemu-test/results.py grow qemu-test/expected/$$n.txt $$v; \
	done

clean:
	@kdir=$$(scripts/kernel.sh dir 2>/dev/null) && [ -d "$$kdir" ] && \
		$(KMAKE) -s -C $$kdir M=$(CURDIR) clean || true
	rm -rf build rust/core/target provider/target

# Also drops the caches outside the clone (kernel tree, rdma-core, tools).
distclean: clean
	rm -rf $(OXE_CACHE)
