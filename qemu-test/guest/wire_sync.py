#!/usr/bin/env python3
"""Step-by-step handshakes between the two guests of `vm.sh wire`, over the
virtual wire itself (TCP): each guest tells the other when a step is done,
and waits for the other's word before its own next step.

    wire_sync.py tell HOST PORT LINE TIMEOUT   connect (retrying) and send LINE
    wire_sync.py wait PORT WORD TIMEOUT        accept until a line begins with WORD

A line is a word, and after a space whatever the step reports (the host's
verdicts, say), which `wait` prints. Either exits 1 after TIMEOUT seconds;
`wait` also at once on any other word: `abort` (the peer failed and stops,
so nobody waits for it in vain), or a later step's (the two are out of
step).
"""
import socket
import sys
import time


def tell(host, port, word, timeout):
    end = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=5) as s:
                s.sendall(word.encode() + b"\n")
                return 0
        except OSError as e:
            if time.monotonic() > end:
                print(f"wire_sync: cannot tell {host}:{port} '{word}': {e}", file=sys.stderr)
                return 1
            time.sleep(0.5)


def wait(port, word, timeout):
    end = time.monotonic() + timeout
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen(4)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                print(f"wire_sync: no '{word}' on port {port} within {timeout} s", file=sys.stderr)
                return 1
            srv.settimeout(left)
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                try:
                    got = conn.makefile().readline().strip()
                except OSError:
                    continue
            head, _, rest = got.partition(" ")
            if head == word:
                print(rest)
                return 0
            if head == "abort":
                print(f"wire_sync: the peer aborted while we waited for '{word}'", file=sys.stderr)
            else:
                print(f"wire_sync: got '{head}' while we waited for '{word}'", file=sys.stderr)
            return 1


def main(argv):
    if len(argv) == 6 and argv[1] == "tell":
        return tell(argv[2], int(argv[3]), argv[4], float(argv[5]))
    if len(argv) == 5 and argv[1] == "wait":
        return wait(int(argv[2]), argv[3], float(argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
