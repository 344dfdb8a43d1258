#!/usr/bin/env bash
# Stops the processes named by pid files: TERM, 5 s to exit cleanly, then
# KILL; removes the files. Shared by tests/servers/down.sh and
# tests/world/down.sh.
#
#   stop-pids.sh WHO PIDFILE...     (WHO names the caller in messages)
set -uo pipefail

who=$1
shift
pids=() left=()
for f in "$@"; do
    [[ -f $f ]] || continue
    pid=$(<"$f")
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" && pids+=("$pid")
    fi
    rm -f "$f"
done
for _ in $(seq 50); do
    left=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    ((${#left[@]})) || break
    sleep 0.1
done
for pid in "${left[@]}"; do
    echo "$who: $pid did not stop on TERM, killing it" >&2
    kill -KILL "$pid" 2>/dev/null
done
