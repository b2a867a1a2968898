# Benchmark: fio over NVMe over Fabrics, oxe (nvme-rdma on oxe7 -> nvmet-rdma
# on oxe6) against rxe (rxe7 -> rxe6) in the same guest, run and topology
# (kernel_ulp.sh; each pair talks within its own type, rxe and oxe cannot
# share the namespace's UDP port): 4 KiB random reads at queue depth 16
# (IOPS) and 128 KiB sequential reads at depth 4 (MB/s), 10 s each, for
# OXE_BENCH_ROUNDS rounds with the two types taking turns. Each run is a
# line of bench-nvmeof.jsonl: {"type", "round", "measure", "value"}. The
# guest kernel has no Linux AIO (tinyconfig), so the queue depth is that many
# threads each with one synchronous I/O in flight (psync), reported as one.
BENCH_NVMEOF_JOBS=("randread_4k_iops:--rw=randread --bs=4k --numjobs=16 --size=64M"
    "seqread_128k_mbps:--rw=read --bs=128k --numjobs=4 --size=16M --offset_increment=16M")

suite_bench_nvmeof() {
    local rounds=${OXE_BENCH_ROUNDS:-3} out=$OXE_RESULTS/bench-nvmeof.jsonl ty r job name rc=0 v
    : >"$out"
    for r in $(seq 1 "$rounds"); do
        for ty in oxe rxe; do
            if ! nvmeof_up "${ty}6" "${ty}7" "bench-nvmeof-$ty"; then
                nvmeof_down "${ty}6"
                rc=1
                continue
            fi
            for job in "${BENCH_NVMEOF_JOBS[@]}"; do
                name=${job%%:*}
                # shellcheck disable=SC2086 # the job's options are words
                # The JSON to a file of its own: fio prints notes on stdout.
                local json=$OXE_RESULTS/logs/fio-$ty-$name-$r.json
                fio --name="$name" --thread --filename="$NVMEOF_DISK" --direct=1 --ioengine=psync \
                    --group_reporting --runtime=10 --time_based ${job#*:} --output-format=json \
                    --output="$json" >"$OXE_RESULTS/logs/fio-$ty-$name.err" 2>&1
                v=$(jq -r --arg m "$name" \
                    '.jobs[0].read | if $m == "randread_4k_iops" then .iops else .bw / 1024 end' "$json" \
                    2>>"$OXE_RESULTS/logs/fio-$ty-$name.err")
                if [ -n "$v" ] && [ "$v" != null ]; then
                    printf '{"type":"%s","round":%d,"measure":"%s","value":%s}\n' "$ty" "$r" "$name" "$v" >>"$out"
                    printf '  round %d %s %-18s %10.1f\n' "$r" "$ty" "$name" "$v"
                else
                    echo "  round $r $ty $name: fio failed:"
                    tail -n 5 "$OXE_RESULTS/logs/fio-$ty-$name.err"
                    rc=1
                fi
            done
            nvmeof_down "${ty}6" || rc=1
        done
    done
    return $rc
}
