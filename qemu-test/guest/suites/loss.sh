# Suite: RC under loss and reordering. With netem on both ends of the veth pair,
# build/rc_xfer (qemu-test/clients/rc_xfer.c) RDMA WRITEs 32 MiB of a
# pseudo-random pattern from device A (veth0, 10.11.0.1) into a buffer on device B
# (veth1 in netns peer, 10.11.0.2) and SENDs its FNV-1a 64; the server hashes what
# landed and both must agree. rdma_cm connects them with retry_count 7.
# netem sends a quarter of the packets 1 ms ahead of the others, so most gaps are
# reordering, which a go-back-N responder NAKs like loss; the local ACK timeout
# (4.096 us * 2^14 = 67 ms) bounds the tail recoveries.
# On a debug guest of a slow host (2026-11-26) oxe used to collapse here: every
# go-back put the whole 256-packet window on the wire again, the responder's
# backlog took longer than the timeout to drain, and each timeout added another
# window (11 packets sent per packet that counted, the retry count ran out a
# quarter of the way in). Since then the requester narrows its window after a
# loss (comp.rs, Qp::shrink_window): the same run wrote 64 MiB in 223 s with 21
# ACK timeouts and nothing dropped by the responder, 4.6 packets per packet that
# counted (go-back-N under 25% reordering resends what was only late). 32 MiB
# keeps the suite within a few minutes of a debug guest.
LOSS_NETEM=(loss 1% delay 1ms reorder 25% 50%)
LOSS_SIZE=32M
LOSS_ACK_TIMEOUT=14
LOSS_TIMEOUT=600

# Clears netem on both ends (also after a failure).
netem_clear() {
    tc qdisc del dev veth0 root 2>/dev/null
    ip netns exec peer tc qdisc del dev veth1 root 2>/dev/null
    true
}

# The qdisc statistics line ("Sent ... (dropped N, ...)") of one end.
netem_stats() { # side dev
    on_side "$1" tc -s qdisc show dev "$2" | sed -n 's/^ *\(Sent .*\)/\1/p'
}

# Every non-zero hardware counter of DEV (port and device level), one line.
hw_counters() { # dev
    local d=/sys/class/infiniband/$1
    grep -H . "$d"/ports/1/hw_counters/* "$d"/hw_counters/* 2>/dev/null |
        awk -F: '$2 != 0 { n = $1; sub(".*/", "", n); printf "%s=%s ", n, $2 } END { print "" }'
}

suite_loss() { # devA devB
    local a=$1 b=$2 t0=$SECONDS rc=1 xfer=$OXE_TOP/build/rc_xfer
    local log=$OXE_RESULTS/logs/loss-$a-$b
    [ -x "$xfer" ] || { echo "$xfer missing: build it with 'make guest-tools'"; return 1; }
    pair_setup "$a" "$b" || { record loss "$a-$b" 1 0 1 0 0 $((SECONDS - t0)); return 1; }
    modprobe sch_netem 2>/dev/null
    tc qdisc add dev veth0 root netem "${LOSS_NETEM[@]}" &&
        ip netns exec peer tc qdisc add dev veth1 root netem "${LOSS_NETEM[@]}" ||
        { echo "cannot add netem qdiscs"; netem_clear; rdma_reset; return 1; }
    echo "netem on veth0 and veth1: ${LOSS_NETEM[*]}"

    ip netns exec peer timeout "$LOSS_TIMEOUT" "$xfer" server 10.11.0.2 -s "$LOSS_SIZE" -w 300 \
        >"$log.server.log" 2>&1 &
    local spid=$! i crc src t1
    for i in $(seq 150); do
        [[ $(cat "$log.server.log") == *listening* ]] && break
        kill -0 "$spid" 2>/dev/null || break
        snooze 0.2
    done
    t1=$SECONDS
    timeout "$LOSS_TIMEOUT" "$xfer" client 10.11.0.2 -s "$LOSS_SIZE" -c 1M -d 8 -t "$LOSS_ACK_TIMEOUT" -r 7 -w 300 \
        >"$log.client.log" 2>&1
    crc=$?
    echo "client done after $((SECONDS - t1)) s"
    for i in $(seq 150); do
        kill -0 "$spid" 2>/dev/null || break
        snooze 0.2
    done
    kill "$spid" 2>/dev/null
    wait "$spid"
    src=$?
    echo "server done after $((SECONDS - t1)) s"
    echo "--- client ($a, exit $crc)"
    cat "$log.client.log"
    echo "--- server ($b, exit $src)"
    cat "$log.server.log"
    echo "--- netem"
    echo "veth0: $(netem_stats a veth0)"
    echo "veth1: $(netem_stats b veth1)"
    echo "--- hardware counters"
    echo "$a: $(hw_counters "$a")"
    echo "$b: $(hw_counters "$b")"

    # Loss must have happened for the run to prove anything.
    local dropped
    dropped=$(netem_stats a veth0; netem_stats b veth1)
    dropped=$(sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' <<<"$dropped" | awk '{ s += $1 } END { print s + 0 }')
    if [ "$crc" = 0 ] && [ "$src" = 0 ] &&
        [[ $(cat "$log.server.log") == *": MATCH"* ]] && [[ $(cat "$log.client.log") == *": MATCH"* ]]; then
        if [ "$dropped" -gt 0 ]; then
            rc=0
        else
            echo "netem dropped no packet: the transfer proves nothing about loss"
        fi
    fi
    netem_clear
    rdma_reset
    echo "loss $a->$b: $([ $rc = 0 ] && echo passed || echo FAILED), $dropped packets dropped by netem, $((SECONDS - t0)) s"
    record loss "$a-$b" 1 $((rc == 0)) $((rc != 0)) 0 0 $((SECONDS - t0))
    return $rc
}
