# Where a transfer's CPU time goes (qemu-test/vm.sh profile): perf samples
# both vCPUs (cpu-clock, 999 Hz, call chains) for PROFILE_SECONDS in the
# middle of one long perftest measure between TYPE0 and TYPE1, for oxe and
# then rxe, and /proc/stat says how each vCPU spent that window. Only the
# steady state is sampled: the first profiles ran perf over the whole run,
# whose process start and connection setup (seconds under TCG) showed as
# idle CPUs that the transfer itself never leaves. perf runs from the host's
# root; the kernel has PERF_EVENTS. Writes $OXE_RESULTS/profile/TYPE-sym.txt
# (by symbol), TYPE-comm.txt (by CPU and task), TYPE-cpu.txt (the window's
# /proc/stat) and, for `perf report -i TYPE.data --kallsyms TYPE.kallsyms`
# on the host, the samples and the guest's symbols (oxe's with them). The
# measure is the first of OXE_BENCH_MEASURES (default write_bw); call chains
# through Rust code are unreliable, the symbols themselves are not.

PROFILE_SECONDS=4

# Each vCPU's share of user, system, softirq and idle time between two
# copies of /proc/stat's per-CPU lines.
profile_cpu_split() { # before after
    paste <(echo "$1") <(echo "$2") | awk '{
        n = NF / 2; tot = 0
        for (i = 2; i <= 8; i++) { d[i] = $(i + n) - $i; tot += d[i] }
        if (tot == 0) tot = 1
        printf "%s user %d%% system %d%% softirq %d%% idle %d%%\n", $1,
            100 * (d[2] + d[3]) / tot, 100 * (d[4] + d[7]) / tot, 100 * d[8] / tot,
            100 * (d[5] + d[6]) / tot }'
}

suite_profile() { # type...
    local out=$OXE_RESULTS/profile type m=${OXE_BENCH_MEASURES:-write_bw} run before after
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
        # Twenty times the benchmark's iterations: the transfer outlasts
        # setup plus the sampled window even on a fast host (six times did
        # not once oxe sent several packets per skb: 375 MiB at 67 MB/s;
        # twelve did not once oxe read at 92 MB/s on a quiet host), and
        # inside the clients' 60 s timeout at rxe's slowest (30 MB/s).
        BENCH_BW_ITERS=20000 BENCH_LAT_ITERS=120000 bench_perf_run "$type" "$m" profile >"$out/$type-value.txt" &
        run=$!
        sleep 4
        before=$(grep '^cpu[0-9]' /proc/stat)
        # perf writes its samples with mmap, which the results mount refuses.
        perf record -a -g -e cpu-clock -F 999 -o "/tmp/$type.data" -- sleep $PROFILE_SECONDS \
            >"$out/$type-perf.log" 2>&1
        after=$(grep '^cpu[0-9]' /proc/stat)
        wait $run || return 1
        profile_cpu_split "$before" "$after" >"$out/$type-cpu.txt"
        echo "$type $m: $(cat "$out/$type-value.txt")"
        cat "$out/$type-cpu.txt"
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
