# Where a transfer's CPU time goes (qemu-test/vm.sh profile): perf samples
# both vCPUs (cpu-clock, 499 Hz, call chains) while one perftest measure runs
# between TYPE0 and TYPE1, for oxe and then rxe. perf runs from the host's
# root; the kernel has PERF_EVENTS. Writes $OXE_RESULTS/profile/TYPE-sym.txt
# (by symbol), TYPE-comm.txt (by CPU and task) and, for `perf report -i
# TYPE.data --kallsyms TYPE.kallsyms` on the host, the samples and the
# guest's symbols (oxe's with them). The measure is the first of
# OXE_BENCH_MEASURES (default write_bw); call chains through Rust code are
# unreliable, the symbols themselves are not.

suite_profile() { # type...
    local out=$OXE_RESULTS/profile type m=${OXE_BENCH_MEASURES:-write_bw} ppid
    m=${m%% *}
    command -v perf >/dev/null || { echo "perf is not installed (Debian: linux-perf)"; return 1; }
    rm -rf "$out" && mkdir -p "$out"
    CDIR=$out
    echo 0 >/proc/sys/kernel/kptr_restrict
    echo -1 >/proc/sys/kernel/perf_event_paranoid
    # perf's first start reads its own files over 9p for seconds: not during the run.
    perf record -o /tmp/warm.data -- true >/dev/null 2>&1
    for type in "$@"; do
        pair_setup "${type}0" "${type}1" || return 1
        # perf writes its samples with mmap, which the results mount refuses.
        perf record -a -g -e cpu-clock -F 499 -o "/tmp/$type.data" >"$out/$type-perf.log" 2>&1 &
        ppid=$!
        sleep 3
        bench_perf_run "$type" "$m" profile >"$out/$type-value.txt" || { kill -INT $ppid; wait $ppid; return 1; }
        kill -INT $ppid
        wait $ppid
        echo "$type $m: $(cat "$out/$type-value.txt")"
        cp "/tmp/$type.data" "$out/$type.data"
        cat /proc/kallsyms >"$out/$type.kallsyms"
        perf report -i "/tmp/$type.data" --no-children --sort sym --stdio -g none 2>/dev/null |
            grep -v '^#' | grep -v '^$' | head -n 60 >"$out/$type-sym.txt"
        perf report -i "/tmp/$type.data" --no-children --sort cpu,comm --stdio -g none 2>/dev/null |
            grep -v '^#' | grep -v '^$' | head -n 20 >"$out/$type-comm.txt"
        head -n 15 "$out/$type-sym.txt"
        rdma_reset
    done
}
