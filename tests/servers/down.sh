#!/usr/bin/env bash
# Stops the servers tests/servers/up.sh started (by their pid files) and
# removes servers.env, so tests that need them fail loudly.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STATE=${DNSLUICE_SERVERS_DIR:-$ROOT/target/test-servers}
[[ -d $STATE ]] || exit 0
rm -f "$STATE/servers.env"
bash "$ROOT/tests/world/down.sh"  # the simulated internet

pids=()
for f in "$STATE"/*.pid; do
    [[ -f $f ]] || continue
    pid=$(<"$f")
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" && pids+=("$pid")
    fi
    rm -f "$f"
done
# Give them 5 s to exit cleanly, then insist.
for _ in $(seq 50); do
    left=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    ((${#left[@]})) || break
    sleep 0.1
done
for pid in "${left[@]}"; do
    echo "down.sh: $pid did not stop on TERM, killing it" >&2
    kill -KILL "$pid" 2>/dev/null
done
echo "test DNS servers stopped"
