#!/usr/bin/env bash
# timed.sh FILE LABEL CMD...: runs CMD, then appends "LABEL<tab>SECONDS" to FILE
# (also when CMD fails), and exits with CMD's status. `make test` prints FILE at
# the end, so every CI log says where the time went.
file=$1 label=$2
shift 2
t0=$SECONDS
"$@"
rc=$?
printf '%s\t%d\n' "$label$([ $rc = 0 ] || echo ' (failed)')" $((SECONDS - t0)) >>"$file"
exit $rc
