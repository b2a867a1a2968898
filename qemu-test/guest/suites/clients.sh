# Suite: the standard RDMA clients between two devices, A on veth0 (this namespace,
# 10.11.0.1) and B on veth1 (netns peer, 10.11.0.2): rdma-core's pingpongs and
# rping, perftest's send/write/read/atomic bandwidth and write latency. Each tool
# runs twice, client on A with the server on B and the other way round; every run
# is one check, "TOOL:CLIENT->SERVER", recorded in
# logs/clients-A-B.verdicts.json and held to qemu-test/expected/clients-A-B.txt.
# The outputs of each run are kept in logs/clients-A-B/.

# Seconds one server or client may take (TCG runs ~20x slower than native);
# a server still running CLIENT_GRACE seconds after its client ended is stopped.
CLIENT_TIMEOUT=60
CLIENT_GRACE=15

ip_of() { if [ "$1" = a ]; then echo 10.11.0.1; else echo 10.11.0.2; fi; }
ip6_of() { if [ "$1" = a ]; then echo fd11::1; else echo fd11::2; fi; }
other_side() { if [ "$1" = a ]; then echo b; else echo a; fi; }

# Waits until a listener for PORT exists for the server process PID: a TCP
# socket (the pingpongs' and perftest's out-of-band exchange) or an rdma_cm ID in
# LISTEN state (rping, perftest -R, rc_xfer). Fails early if PID is gone.
#
# A TCP listener is looked up in /proc/PID/net/tcp{,6}, which show PID's network
# namespace, by bash alone: `ip netns exec peer ss` cost a debug guest two
# seconds a poll, more than the server took to start.
wait_listen() { # side tcp|cm port pid
    local kind=$2 port=$3 pid=$4 i out
    for i in $(seq 150); do
        kill -0 "$pid" 2>/dev/null || return 1
        if [ "$kind" = tcp ]; then
            tcp_listening "$pid" "$port" && return 0
        else
            out=$(rdma resource show cm_id 2>/dev/null)
            [[ $out == *"state LISTEN"*":$port "* || $out == *"state LISTEN"*":$port" ]] && return 0
        fi
        snooze 0.2
    done
    return 1
}

# Whether a TCP socket in PID's network namespace listens on PORT (state 0A in
# /proc/net/tcp, the local port in hex after the colon).
tcp_listening() { # pid port
    local hex f _ local_addr st
    printf -v hex "%04X" "$2"
    for f in /proc/"$1"/net/tcp /proc/"$1"/net/tcp6; do
        while read -r _ local_addr _ st _; do
            [[ $local_addr == *:"$hex" && $st == 0A ]] && return 0
        done <"$f" 2>/dev/null
    done
    return 1
}

# Runs one server/client check. Reads the arrays SRV (server command) and CLI
# (client command); the server runs on SIDE, the client on the other side, each
# under CLIENT_TIMEOUT. Their outputs go to $CDIR/NAME.{server,client}.log.
# Fails if either exits non-zero or the server never listens.
run_pair() { # name server-side tcp|cm port
    local name=$1 ss=$2 kind=$3 port=$4 cs spid src crc i
    cs=$(other_side "$ss")
    local so=$CDIR/$name.server.log co=$CDIR/$name.client.log
    local pre=() cpre=()
    [ "$ss" = b ] && pre=(ip netns exec peer)
    [ "$cs" = b ] && cpre=(ip netns exec peer)
    # A simple command in the background: $! is the timeout process itself.
    "${pre[@]}" timeout "$CLIENT_TIMEOUT" "${SRV[@]}" >"$so" 2>&1 &
    spid=$!
    if ! wait_listen "$ss" "$kind" "$port" "$spid"; then
        echo "    server did not listen on $kind port $port"
        kill "$spid" 2>/dev/null
        wait "$spid"
        return 1
    fi
    "${cpre[@]}" timeout "$CLIENT_TIMEOUT" "${CLI[@]}" >"$co" 2>&1 &
    local cpid=$! waited=0
    # A client about to time out is looked at while it still hangs: once
    # `timeout` has killed it, its QPs are gone and only the device
    # counters are left to say what stalled.
    while kill -0 "$cpid" 2>/dev/null; do
        if [ "$waited" = $(((CLIENT_TIMEOUT - 5) * 5)) ]; then
            hang_state "$cpid" "$spid" >"$CDIR/$name.hang.log" 2>&1
            # Into the suite's log too, whose tail a failed `make test` shows.
            echo "    still running after $((CLIENT_TIMEOUT - 5)) s ($name.hang.log):"
            sed 's/^/      /' "$CDIR/$name.hang.log"
        fi
        waited=$((waited + 1))
        snooze 0.2
    done
    wait "$cpid"
    crc=$?
    for i in $(seq $((CLIENT_GRACE * 5))); do
        kill -0 "$spid" 2>/dev/null || break
        snooze 0.2
    done
    kill "$spid" 2>/dev/null
    wait "$spid"
    src=$?
    [ "$crc" = 0 ] || echo "    client exit $crc$([ "$crc" = 124 ] && echo ' (timeout)')"
    [ "$src" = 0 ] || echo "    server exit $src$([ "$src" = 124 ] && echo ' (timeout)')$([ "$src" = 143 ] && echo ' (stopped)')"
    [ "$crc" = 0 ] && [ "$src" = 0 ]
}

# The last lines of run_pair NAME's logs, after it failed.
pair_tails() { # name
    local f
    for f in "$CDIR/$1".{client,server}.log; do
        [ -f "$f" ] || continue
        echo "    --- $(basename "$f") (last lines)"
        tail -n 6 "$f" | sed 's/^/    /'
    done
}

# What a hung client and server are doing: each process's threads (state, and
# the kernel function a sleeping one waits in), every QP the devices have
# (state, PSNs), and each device's non-zero counters (retries, timeouts, drops,
# sequence errors).
hang_state() { # client-timeout-pid server-timeout-pid
    local p t d
    for p in $(pgrep -P "$1") $(pgrep -P "$2"); do
        echo "== process $p: $(tr '\0' ' ' <"/proc/$p/cmdline")"
        for t in /proc/"$p"/task/*; do
            echo "-- thread ${t##*/} $(cat "$t/comm") state $(awk '{print $3}' "$t/stat") in $(cat "$t/wchan")"
        done
    done
    echo "== rdma resource show qp"
    rdma resource show qp
    for d in /sys/class/infiniband/*; do
        echo "== ${d##*/} non-zero counters"
        grep -H . "$d"/ports/1/hw_counters/* "$d"/hw_counters/* 2>/dev/null | grep -v ':0$' | sed 's|.*/||'
    done
}

# perftest converts TSC cycles with a rate it samples when it starts; under TCG
# that sampling sometimes fails ("Correlation coefficient r^2: ... < 0.9") and the
# run then reports 0. Such a run measured nothing: it is repeated, twice at most.
run_perf_pair() { # as run_pair
    local n
    for n in 1 2 3; do
        run_pair "$@" || return 1
        [[ $(cat "$CDIR/$1.client.log") == *"Correlation coefficient"* ]] || return 0
        echo "    perftest's clock calibration failed (run $n): again"
    done
    return 1
}

# pingpong output: "BYTES bytes in S seconds = X Mbit/sec" and "N iters in ...".
check_pingpong() { # log bytes iters
    local out
    out=$(cat "$1")
    [[ $out == *"$2 bytes in "* && $out == *"$3 iters in "* ]] ||
        { echo "    $(basename "$1"): no '$2 bytes in' / '$3 iters in' line"; return 1; }
    PERF=$(sed -n 's/.* = \([0-9.]*\) Mbit\/sec/\1 Mbit\/s/p' "$1" | head -n1)
}

# The value in column COL of perftest's result row (the last line whose first two
# fields are integers, with at least COL fields); fails unless it is positive.
perf_value() { # log col
    local v
    v=$(awk -v c="$2" '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= c && $c ~ /^[0-9.]+$/ { v = $c } END { print v }' "$1")
    [ -n "$v" ] || { echo "    $(basename "$1"): no result row" >&2; return 1; }
    awk -v v="$v" 'BEGIN { exit !(v > 0) }' || { echo "    $(basename "$1"): result $v is not positive" >&2; return 1; }
    echo "$v"
}

# rping -v prints every ping's buffer as "ping data: rdma-ping-N: " followed by
# letters from 'A'+N (mod 58) upwards, up to SIZE-1 bytes. Checks that the client
# printed COUNT of them, each as rping's pattern has it, and the server the same.
check_rping() { # client-log server-log count size
    /usr/bin/python3 - "$@" <<'EOF'
import sys
cli, srv, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def want(i):
    s = "rdma-ping-%d: " % i
    c = 65 + i % 58
    while len(s) < size - 1:
        s += chr(c)
        c = 65 if c == 122 else c + 1
    return s[: size - 1]
ok = True
for path, prefix in ((cli, "ping data: "), (srv, "server ping data: ")):
    got = [l[len(prefix):] for l in open(path, errors="replace").read().splitlines() if l.startswith(prefix)]
    exp = [want(i) for i in range(count)]
    if got != exp:
        ok = False
        bad = next((i for i, (g, e) in enumerate(zip(got, exp)) if g != e), min(len(got), len(exp)))
        print(f"    {path.rsplit('/', 1)[-1]}: {len(got)} pings, expected {count}; first difference at ping {bad}")
        if bad < len(got):
            print(f"      got      {got[bad]!r}\n      expected {exp[bad] if bad < count else None!r}")
sys.exit(0 if ok else 1)
EOF
}

# One tool in one direction: client on side CS, server on the other.
# Sets PERF (a figure for the log) and returns the check's status.
client_check() { # tool client-side
    local tool=$1 cs=$2 ss dc ds gc gs sip
    ss=$(other_side "$cs")
    if [ "$cs" = a ]; then dc=$DEV_A ds=$DEV_B gc=$GID_A gs=$GID_B; else dc=$DEV_B ds=$DEV_A gc=$GID_B gs=$GID_A; fi
    sip=$(ip_of "$ss")
    local name=$tool:$dc-\>$ds
    local perf_args=(-i 1 -F -n 200)
    # Bandwidth runs move 16 KiB messages (16 packets at the 1024 MTU, so
    # first, middle and last), not perftest's 64 KiB: on a debug guest the
    # data itself took half of each run (12.8 MB at about 2 MB/s).
    local bw_size=(-s 16384)
    PERF=
    case $tool in
    ibv_rc_pingpong | ibv_ud_pingpong | ibv_srq_pingpong | ibv_uc_pingpong)
        local size=4096 iters=200 extra=()
        [ "$tool" = ibv_ud_pingpong ] && size=512      # UD: one packet, below the 1024 MTU
        [ "$tool" = ibv_srq_pingpong ] && extra=(-q 4) iters=100
        # -c: the server stamps its buffer, the client checks each page of
        # what it received and prints "invalid data" for a page that lacks
        # the stamp (a weak check, one byte a page: test_wire_payload.py
        # compares every byte).
        SRV=("$tool" -d "$ds" -i 1 -g "$gs" -s $size -n $iters -c "${extra[@]}")
        CLI=("$tool" -d "$dc" -i 1 -g "$gc" -s $size -n $iters -c "${extra[@]}" "$sip")
        run_pair "$name" "$ss" tcp 18515 || return 1
        check_pingpong "$CDIR/$name.client.log" $((size * iters * 2)) $iters || return 1
        check_pingpong "$CDIR/$name.server.log" $((size * iters * 2)) $iters || return 1
        if grep -q "invalid data" "$CDIR/$name.client.log" "$CDIR/$name.server.log"; then
            echo "    $name: the received buffer failed the pingpong's -c check"
            return 1
        fi
        ;;
    rping | rping6)
        # The listener binds the server's address, so it is on the server's
        # device; rping6 goes over the IPv6 addresses (RoCE v2 IPv6 GIDs).
        [ "$tool" = rping6 ] && sip=$(ip6_of "$ss")
        SRV=(rping -s -a "$sip" -v -V)
        CLI=(rping -c -a "$sip" -v -V -C 20 -S 64)
        run_pair "$name" "$ss" cm 7174 || return 1
        check_rping "$CDIR/$name.client.log" "$CDIR/$name.server.log" 20 64 || return 1
        PERF="20 pings verified"
        ;;
    ib_send_bw)
        # Through rdma_cm (-R): the GID comes from the route, not from -x.
        SRV=(ib_send_bw -d "$ds" "${perf_args[@]}" "${bw_size[@]}" -R)
        CLI=(ib_send_bw -d "$dc" "${perf_args[@]}" "${bw_size[@]}" -R "$sip")
        run_perf_pair "$name" "$ss" cm 18515 || return 1
        PERF="$(perf_value "$CDIR/$name.client.log" 4) MB/s" || return 1
        ;;
    ib_write_bw | ib_read_bw | ib_atomic_bw | ib_write_bw_uc)
        local exe=$tool
        # Unreliable connected: RDMA WRITE with nothing acknowledged.
        [ "$tool" = ib_write_bw_uc ] && exe=ib_write_bw perf_args+=(-c UC)
        [ "$tool" = ib_atomic_bw ] || perf_args+=("${bw_size[@]}")
        SRV=("$exe" -d "$ds" "${perf_args[@]}" -x "$gs")
        CLI=("$exe" -d "$dc" "${perf_args[@]}" -x "$gc" "$sip")
        run_perf_pair "$name" "$ss" tcp 18515 || return 1
        if [ "$tool" = ib_atomic_bw ]; then
            PERF="$(perf_value "$CDIR/$name.client.log" 5) Mpps" || return 1
        else
            PERF="$(perf_value "$CDIR/$name.client.log" 4) MB/s" || return 1
        fi
        ;;
    ib_write_bw_gso)
        # oxe sends the packets of a message several to an skb (ib/pkt.rs,
        # TxPacket): over 100 WRITEs of 64 KiB (64 packets each), the
        # client's veth sends at most a quarter as many skbs as its port
        # sends RoCE packets (perftest's TCP exchange included). One packet
        # per skb, as rxe sends, would be one to one.
        local nd=veth0 sk0 sk1 pk0 pk1 pc=/sys/class/infiniband/$dc/ports/1/counters/port_xmit_packets
        [ "$cs" = b ] && nd=veth1
        SRV=(ib_write_bw -d "$ds" -i 1 -F -n 100 -s 65536 -x "$gs")
        CLI=(ib_write_bw -d "$dc" -i 1 -F -n 100 -s 65536 -x "$gc" "$sip")
        sk0=$(on_side "$cs" cat "/sys/class/net/$nd/statistics/tx_packets") pk0=$(cat "$pc")
        run_perf_pair "$name" "$ss" tcp 18515 || return 1
        sk1=$(on_side "$cs" cat "/sys/class/net/$nd/statistics/tx_packets") pk1=$(cat "$pc")
        PERF="$((pk1 - pk0)) packets in $((sk1 - sk0)) skbs"
        if [ $((pk1 - pk0)) -lt 6400 ] || [ $((4 * (sk1 - sk0))) -gt $((pk1 - pk0)) ]; then
            echo "    $dc sent $((pk1 - pk0)) packets (6400 at least) in $((sk1 - sk0)) skbs on $nd"
            return 1
        fi
        ;;
    ib_read_bw_moving)
        # READs while the client is moved from CPU to CPU every 10 ms, as
        # the scheduler moves an application: the responder's drain stays
        # where it runs while the requests come from one CPU and then the
        # other (ib/work.rs, RxQueue::push_sticky), and the requester's
        # follows the responses. Every READ must still complete, in order,
        # with nothing left waiting: 1000 reads of 16 KiB.
        SRV=(ib_read_bw -d "$ds" -i 1 -F -n 1000 "${bw_size[@]}" -x "$gs")
        CLI=(bash -c 'cpus=$(nproc); "$@" & p=$!; c=0
            trap "kill $p 2>/dev/null; exit 143" TERM
            while kill -0 $p 2>/dev/null; do
                taskset -pc $c $p >/dev/null 2>&1; c=$(((c + 1) % cpus)); sleep 0.01
            done
            wait $p' mover ib_read_bw -d "$dc" -i 1 -F -n 1000 "${bw_size[@]}" -x "$gc" "$sip")
        # The longest run of the suite: on the debug kernel under TCG it
        # takes 40 to 60 s, too close to CLIENT_TIMEOUT, which is there to
        # catch a hang, not a slow guest.
        local CLIENT_TIMEOUT=120
        run_perf_pair "$name" "$ss" tcp 18515 || return 1
        PERF="$(perf_value "$CDIR/$name.client.log" 4) MB/s" || return 1
        ;;
    ib_write_lat)
        SRV=(ib_write_lat -d "$ds" "${perf_args[@]}" -x "$gs" -s 8)
        CLI=(ib_write_lat -d "$dc" "${perf_args[@]}" -x "$gc" -s 8 "$sip")
        run_perf_pair "$name" "$ss" tcp 18515 || return 1
        PERF="$(perf_value "$CDIR/$name.client.log" 5) us typical" || return 1
        ;;
    *)
        echo "    unknown tool $tool"
        return 1
        ;;
    esac
}

CLIENT_TOOLS=(ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong ibv_uc_pingpong rping rping6
    ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw ib_write_lat ib_write_bw_uc ib_write_bw_gso
    ib_read_bw_moving)
# Checks of what only an oxe client does: not run from another device.
OXE_CLIENT_TOOLS=" ib_write_bw_gso "

suite_clients() { # devA devB
    DEV_A=$1 DEV_B=$2
    local pair=$1-$2 t0=$SECONDS
    CDIR=$OXE_RESULTS/logs/clients-$pair
    rm -rf "$CDIR" && mkdir -p "$CDIR"
    local verdicts=$OXE_RESULTS/logs/clients-$pair.verdicts.json
    local ran=0 ok=0 fail=0 tool cs v t1 name
    echo '{' >"$verdicts.tmp"
    if pair_setup "$DEV_A" "$DEV_B"; then
        echo "$DEV_A on veth0 (GID index $GID_A), $DEV_B on veth1 in netns peer (GID index $GID_B)"
        for tool in "${CLIENT_TOOLS[@]}"; do
            for cs in a b; do
                if [ $cs = a ]; then name=$tool:$DEV_A-\>$DEV_B; else name=$tool:$DEV_B-\>$DEV_A; fi
                [[ $OXE_CLIENT_TOOLS == *" $tool "* && ${name#*:} != oxe* ]] && continue
                t1=$SECONDS
                ran=$((ran + 1))
                # Output captured so that PERF survives (no subshell).
                client_check "$tool" $cs >"$CDIR/.msg" 2>&1
                if [ $? = 0 ]; then
                    v=ok ok=$((ok + 1))
                else
                    v=FAIL fail=$((fail + 1))
                fi
                printf '%-4s %-34s %4ds  %s\n' "$v" "$name" $((SECONDS - t1)) "${PERF:-}"
                cat "$CDIR/.msg"
                [ $v = FAIL ] && pair_tails "$name"
                printf '"%s": "%s",\n' "$name" "$v" >>"$verdicts.tmp"
                snooze 0.5
            done
        done
    else
        echo "cannot set up $DEV_A <-> $DEV_B: no check ran"
    fi
    rm -f "$CDIR/.msg"
    sed '$ s/,$//' "$verdicts.tmp" >"$verdicts" && echo '}' >>"$verdicts" && rm -f "$verdicts.tmp"
    rdma_reset
    echo "clients $pair: $ok of $ran passed in $((SECONDS - t0)) s"
    record clients "$pair" $ran $ok $fail 0 0 $((SECONDS - t0))
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/clients-$pair.txt" "$verdicts"
}
