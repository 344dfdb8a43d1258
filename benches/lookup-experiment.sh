#!/usr/bin/env bash
# The sticky-connection experiment (ZDNS PR #439, reproduced on loopback):
# sticky vs fifo vs random schedulers, same machine, same run, same input.
#
# Usage: bash tests/servers/up.sh && benches/lookup-experiment.sh
#        LINES=5000 SKIP_BUILD=1 CASES="pinned-tcp" benches/lookup-experiment.sh
#
# Cases:
#   pinned-tcp   LINES lines `name,nameserver`, nameservers drawn at random from
#                3 fast (knot on 127.0.0.1/.3/.4) + 1 slow (the network emulator on
#                127.0.0.2, +20 ms each way), over TCP
#   pinned-dot   the same over DNS-over-TLS with 2 nameservers (dnsdist on
#                127.0.0.1, and the network emulator in front of it on 127.0.0.2)
#   unpinned-udp, unpinned-tcp, unpinned-dot, unpinned-doh
#                LINES plain names; the demultiplexer picks the nameserver
#                (4 for UDP/TCP, 2 for DoT/DoH, one slow in each set)
#
# Environment:
#   LINES=20000     input lines
#   THREADS=100     workers
#   SCHEDULERS="sticky fifo random"
#   CASES="pinned-tcp pinned-dot unpinned-udp unpinned-tcp unpinned-dot unpinned-doh"
#   SEED=1          seed of the nameserver draw
#   SKIP_BUILD=1    do not build (target/release/dnsluice must exist)
#   OUT=DIR         where inputs, records and stats go (default bench-data/lookup)
#   EXTRA="..."     more `dnsluice lookup` flags for every run (e.g. "--inflight-per-worker 4")
#
# For each case the schedulers run one after the other on the same input;
# each prints wall time (elapsed_s), connections opened, TLS handshakes,
# steals, and the statuses; then sticky's wall time and connections as a
# fraction of fifo's. Every run must give exactly one record per line.
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=${LINES:-20000}
THREADS=${THREADS:-100}
SCHEDULERS=${SCHEDULERS:-"sticky fifo random"}
CASES=${CASES:-"pinned-tcp pinned-dot unpinned-udp unpinned-tcp unpinned-dot unpinned-doh"}
SEED=${SEED:-1}
OUT=${OUT:-bench-data/lookup}
BIN=${DNSLUICE_BIN:-target/release/dnsluice}
# shellcheck source=benches/servers-env.sh
source benches/servers-env.sh
mkdir -p "$OUT"

IFS=, read -r -a fast_dns <<< "$FAST_DNS"
IFS=, read -r -a fast_dot <<< "$FAST_DOT"
IFS=, read -r -a fast_doh <<< "$FAST_DOH"
dns_set="${fast_dns[0]},${fast_dns[1]},${fast_dns[2]},$SLOW"
dot_set="${fast_dot[0]},$SLOW_DOT"
doh_set="${fast_doh[0]},$SLOW_DOH"

# make_input FILE NAMESERVERS(comma-separated or empty): LINES lines.
make_input() {
    python3 benches/lookup-input.py "$1" "$2" "$LINES" "$SEED"
}

# run CASE SCHEDULER INPUT ARGS...: one run; prints its table row.
run() {
    local case=$1 scheduler=$2 input=$3
    shift 3
    local stats="$OUT/$case-$scheduler.stats.json" records="$OUT/$case-$scheduler.jsonl"
    "$BIN" lookup A --threads "$THREADS" --scheduler "$scheduler" --input "$input" \
        --output "$records" --stats-json "$stats" -q "$@" ${EXTRA:-}
    python3 - "$stats" "$records" "$LINES" "$case" "$scheduler" <<'PY'
import json, sys
stats_path, records, lines, case, scheduler = sys.argv[1:6]
s = json.load(open(stats_path))
n = sum(1 for _ in open(records))
assert n == int(lines), "%s %s: %d records for %s lines" % (case, scheduler, n, lines)
statuses = " ".join("%s=%d" % kv for kv in sorted(s["statuses"].items()))
print("| %-13s | %-7s | %8.2f | %8d | %6d | %6d | %s |" % (case, scheduler, s["elapsed_s"],
      s["connections_opened"], s["tls_handshakes"], s["steals"], statuses))
PY
}

ratio() {
    python3 - "$OUT/$1-sticky.stats.json" "$OUT/$1-fifo.stats.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("  sticky/fifo: wall time %.2fx, connections %.1f%%" % (
    a["elapsed_s"] / b["elapsed_s"], 100.0 * a["connections_opened"] / max(1, b["connections_opened"])))
PY
}

echo "| case          | sched   | wall s   | conns    | TLS hs | steals | statuses |"
echo "|---|---|---:|---:|---:|---:|---|"
tls=(--ca-file "$CA_FILE" --tls-name "$TLS_NAME")
for case in $CASES; do
    input="$OUT/$case.txt"
    case $case in
        pinned-tcp)   make_input "$input" "$dns_set"; args=(--transport tcp) ;;
        pinned-dot)   make_input "$input" "$dot_set"; args=(--transport tls "${tls[@]}") ;;
        unpinned-udp) make_input "$input" ""; args=(--transport udp --name-servers "$dns_set") ;;
        unpinned-tcp) make_input "$input" ""; args=(--transport tcp --name-servers "$dns_set") ;;
        unpinned-dot) make_input "$input" ""; args=(--transport tls --name-servers "$dot_set" "${tls[@]}") ;;
        unpinned-doh) make_input "$input" ""; args=(--transport https --name-servers "$doh_set" "${tls[@]}") ;;
        *) echo "unknown case $case" >&2; exit 2 ;;
    esac
    for scheduler in $SCHEDULERS; do
        run "$case" "$scheduler" "$input" "${args[@]}"
    done
    if [[ $SCHEDULERS == *sticky* && $SCHEDULERS == *fifo* ]]; then
        ratio "$case" >&2
    fi
done
