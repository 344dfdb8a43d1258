#!/usr/bin/env bash
# Starts the simulated internet of tests/world (see README.md there): the
# root, TLD, leaf and edge-case authoritative servers, each on port 53 of its
# own loopback address in $DNSLUICE_WORLD_NET.0.0/16, and unbound resolving
# from the world's root, as the truth. Writes $STATE/world.env (KEY=VALUE
# lines) for tests and benches.
#
# State (generated zones and configs, logs, pid files) lives in
# $DNSLUICE_SERVERS_DIR/world, default <workspace>/target/test-servers/world.
# Safe to rerun: instances that are still running are left alone; when the
# generator or its parameters change, the world is stopped and made anew.
# tests/world/down.sh stops it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tests/world
BASE=${DNSLUICE_SERVERS_DIR:-$ROOT/target/test-servers}
OFFSET=${DNSLUICE_SERVERS_PORT_OFFSET:-0}
# DNSLUICE_WORLD_WAN=1: the same world behind an emulated wide-area network
# (gen.py --wan), beside the plain one: its own state (world-wan), its own
# 127.N for the addresses the zones name and 127.B for the servers.
WAN=${DNSLUICE_WORLD_WAN:-0}
NAME=world
((WAN)) && NAME=world-wan
mkdir -p "$BASE/$NAME"
STATE=$(cd "$BASE/$NAME" && pwd)
# Port 53 is fixed (glue carries addresses only), so each checkout's world
# gets its own 127.N.0.0/16, chosen by its port offset unless given.
if ((WAN)); then
    NET=${DNSLUICE_WAN_WORLD_NET:-127.$((153 + (OFFSET / 100) % 50))}
    BIND_NET=127.$((${NET#127.} + 50))
else
    NET=${DNSLUICE_WORLD_NET:-127.$((53 + (OFFSET / 100) % 200))}
fi
ZONES=${DNSLUICE_WORLD_ZONES:-5000}
BENCH_NAMES=${DNSLUICE_WORLD_BENCH_NAMES:-100000}
DELAY_MS=${DNSLUICE_WORLD_DELAY_MS:-300}
SEED=${DNSLUICE_WORLD_SEED:-1}

for tool in knotd nsd unbound dnsdist kdig python3; do
    command -v "$tool" >/dev/null || {
        echo "tests/world/up.sh: $tool is missing (apt-get install knot nsd unbound dnsdist knot-dnsutils python3)" >&2
        exit 1
    }
done

# The slow server is behind the repo's network emulator (tests/servers/up.sh builds it too).
(cd "$ROOT" && nice -n 10 cargo build -q -p dnsluice-netem)
NETEM=${CARGO_TARGET_DIR:-$ROOT/target}/debug/dnsluice-netem

started=$(date +%s.%N)
# --- the world's files: made anew when the generator or its arguments change --
params="--out $STATE --net $NET --zones $ZONES --seed $SEED --bench-names $BENCH_NAMES --delay-ms $DELAY_MS --netem $NETEM --authserver $HERE/authserver.py"
((WAN)) && params+=" --wan $BIND_NET"
stale=0
[[ -s $STATE/layout.json && -f $STATE/params && $(<"$STATE/params") == "$params" ]] || stale=1
for f in "$HERE"/gen.py "$HERE"/model.py "$HERE"/configs.py "$HERE"/authserver.py; do
    [[ $f -nt $STATE/layout.json ]] && stale=1
done
if ((stale)); then
    DNSLUICE_WORLD_WAN=$WAN bash "$HERE/down.sh" >/dev/null
    find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
    # shellcheck disable=SC2086 # a list of arguments
    python3 "$HERE/gen.py" $params
    echo "$params" >"$STATE/params"
fi
mkdir -p "$STATE/pids" "$STATE/logs"

# alive NAME: the process in pids/NAME.pid is running.
alive() {
    local pid
    [[ -f $STATE/pids/$1.pid ]] && pid=$(<"$STATE/pids/$1.pid") && [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

# --- start every instance -------------------------------------------------------
# [::1]:53 is one address for every world on the machine; the v6only zone is
# the same in all of them, so another world's server on it will do.
shared_v6=""
if ! alive v6 && ! python3 "$HERE/ctl.py" free "[::1]:53" 2>/dev/null &&
    kdig +norec +timeout=1 +retry=0 @::1 v6only.net. SOA 2>/dev/null | grep -qi 'flags: qr aa'; then
    shared_v6="(shared with another world)"
fi
todo=() ports=()
while IFS=$'\t' read -r name _ addrs _; do
    alive "$name" && continue
    [[ $name == v6 && -n $shared_v6 ]] && continue
    todo+=("$name")
    ports+=(${addrs//,/ })
done <"$STATE/instances.tsv"
((${#ports[@]})) && python3 "$HERE/ctl.py" free "${ports[@]}"
while IFS=$'\t' read -r name _ _ cmd; do
    [[ " ${todo[*]} " == *" $name "* ]] || continue
    # spawns: knotd nsd dnsdist unbound python3 (instances.tsv's command lines)
    # shellcheck disable=SC2086 # the command line gen.py wrote
    nohup $cmd >"$STATE/logs/$name.log" 2>&1 </dev/null &
    echo $! >"$STATE/pids/$name.pid"
done <"$STATE/instances.tsv"

# --- wait until every instance answers --------------------------------------------
if ! python3 "$HERE/ctl.py" wait "$STATE/layout.json" "${DNSLUICE_WORLD_WAIT:-60}"; then
    tail -n 5 "$STATE"/logs/*.log >&2 || true
    exit 1
fi
took=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")

# --- world.env ----------------------------------------------------------------------
roots=$(awk '$3 == "A" { printf "%s%s:53", sep, $4; sep = "," }' "$STATE/named.root")
cat >"$STATE/world.env.tmp" <<ENV
# Written by tests/world/up.sh; read by testkit::world().
WORLD_DIR=$STATE
WORLD_NET=$NET
WORLD_ROOT_HINTS=$STATE/named.root
WORLD_ROOTS=$roots
WORLD_EXPECTED=$STATE/expected.jsonl
WORLD_NAMES=$STATE/names.txt
WORLD_BENCH_NAMES=$STATE/bench-names.txt
WORLD_LAYOUT=$STATE/layout.json
WORLD_UNBOUND=$NET.99.1:53
WORLD_ZONES=$ZONES
WORLD_SLOW_DELAY_MS=$DELAY_MS
WORLD_WAN=$WAN
ENV
mv "$STATE/world.env.tmp" "$STATE/world.env"
n=$(wc -l <"$STATE/instances.tsv")
label=world
((WAN)) && label="world-wan"
echo "  $(printf '%-12s' "$label") $NET.0.0/16 + [::1]:53 $shared_v6: $n instances, $ZONES leaf zones, up in ${took}s (state in $STATE)"
