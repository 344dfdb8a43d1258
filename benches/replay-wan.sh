#!/usr/bin/env bash
# A paced replay to a server across an emulated network: tools/netem, 25 ms
# each way, in front of a knot of the bench's own (benches/bench-knot.sh:
# 4 MiB receive buffers, KNOT_RCVBUF=0 for the kernel's default); dnsluice
# replay and dnsperf asked for the same pace on the same queries,
# alternating, several rounds.
#
# Usage: benches/replay-wan.sh
#        RATE=20000 COUNT=100000 ROUNDS=3 SKIP_BUILD=1 benches/replay-wan.sh
#
# Sides (each a whole process under /usr/bin/time: wall, CPU, peak RSS):
#   dnsluice          dnsluice replay --rate RATE, its defaults (the window
#                     grows to what the pace needs)
#   dnsperf           dnsperf -Q RATE, its defaults (-q 100 outstanding)
#   dnsperf-q         dnsperf -Q RATE -q (enough outstanding for the pace:
#                     RATE x the round trip, twice)
# The pace a side kept: its queries over (its wall time less one round trip).
# Every side's queries answered and lost are printed; a side that lost
# queries is marked.
# Environment: RATE (20000), COUNT (100000), ROUNDS (3), DELAY (25ms),
# SKIP_BUILD=1, DATA_DIR (bench-data), KNOT_PORT (53951), KNOT_RCVBUF.
# Run on an idle machine, through
# `cpu-lock bench` where sessions share one.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RATE=${RATE:-20000}
COUNT=${COUNT:-100000}
ROUNDS=${ROUNDS:-3}
DELAY=${DELAY:-25ms}
DATA_DIR=${DATA_DIR:-$ROOT/bench-data}
BIN=$ROOT/target/release/dnsluice
NETEM=$ROOT/target/release/dnsluice-netem
KNOT_PORT=${KNOT_PORT:-53951}
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    cargo build --release -p dnsluice -p dnsluice-netem
fi
for bin in "$BIN" "$NETEM"; do
    [[ -x $bin ]] || { echo "$bin is missing: run without SKIP_BUILD=1, or cargo build --release -p dnsluice -p dnsluice-netem" >&2; exit 1; }
done
mkdir -p "$DATA_DIR"
PCAP=$DATA_DIR/replay-$COUNT.pcap
NAMES=$DATA_DIR/replay-$COUNT.dnsperf
[[ -s $PCAP ]] || python3 benches/gen-pcap.py --count "$COUNT" --zone lookup.test --edns 0 --out "$PCAP" >&2
if [[ ! -s $NAMES ]]; then
    printf '[[stage]]\nmodule = "input.mmpcap"\npath = "%s"\n[[stage]]\nmodule = "filter.layer"\n[[stage]]\nmodule = "filter.dns"\n[[stage]]\nmodule = "output.json"\n' "$PCAP" > "$DATA_DIR/names.toml"
    "$BIN" run "$DATA_DIR/names.toml" -q | python3 -c 'import json,sys
for l in sys.stdin:
    q = json.loads(l)["dns"]["question"][0]
    print(q["name"], q["type"])' > "$NAMES"
fi
TMP=$(mktemp -d)
NETEM_PID=
# shellcheck source=benches/bench-knot.sh
source benches/bench-knot.sh
trap '[[ -n $NETEM_PID ]] && kill $NETEM_PID 2>/dev/null; stop_bench_knot; rm -rf "$TMP"' EXIT
start_bench_knot "$DATA_DIR/replay-knot" "$KNOT_PORT" 100000
LISTEN=127.0.0.8:$((50000 + RANDOM % 10000))
"$NETEM" --udp-only --delay "$DELAY" "$LISTEN=$KNOT" 2> "$TMP/netem.log" &
NETEM_PID=$!
sleep 0.5
HOST=${LISTEN%:*} PORT=${LISTEN##*:}
RTT_S=$(python3 -c "print(2 * float('${DELAY%ms}') / 1000)")   # DELAY in ms
DEEP=$(python3 -c "print(int(2 * $RATE * $RTT_S))")           # RATE x RTT, twice

# line SIDE: the last run's "wall cpu rss answered lost" as a result line.
line() {
    read -r wall user sys rss < "$TMP/time"
    awk -v s="$1" -v n="$COUNT" -v w="$wall" -v rtt="$RTT_S" -v c="$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" \
        -v m="$rss" -v a="$2" -v l="$3" -v rate="$RATE" 'BEGIN {
        pace = a / (w - rtt);
        printf "%-10s wall %6.2f s  pace %7.0f q/s (%5.1f %% of %d)  answered %6d  lost %6d  cpu %5.2f s  rss %4d MB%s\n",
               s, w, pace, 100 * pace / rate, rate, a, l, c, m / 1024, (l > 0 ? "  (lossy)" : "") }'
}

echo "replay-wan: $COUNT queries at $RATE/s through $DELAY each way; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
    sides="dnsluice dnsperf dnsperf-q"
    (( round % 2 == 0 )) && sides="dnsperf-q dnsperf dnsluice"
    for side in $sides; do
        case $side in
            dnsluice)
                /usr/bin/time -f "%e %U %S %M" -o "$TMP/time" "$BIN" replay "$PCAP" --server "$LISTEN" \
                    --rate "$RATE" -q --stats-json "$TMP/ours.json"
                read -r answered lost < <(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(s['answered'], s['sent'] - s['answered'])" "$TMP/ours.json")
                line dnsluice "$answered" "$lost" ;;
            dnsperf | dnsperf-q)
                q=(); [[ $side == dnsperf-q ]] && q=(-q "$DEEP")
                /usr/bin/time -f "%e %U %S %M" -o "$TMP/time" dnsperf -s "$HOST" -p "$PORT" -d "$NAMES" -n 1 \
                    -Q "$RATE" "${q[@]}" -t 5 > "$TMP/peer.txt" 2>&1 || true
                answered=$(awk '/Queries completed:/ {print $3}' "$TMP/peer.txt")
                lost=$(awk '/Queries lost:/ {print $3}' "$TMP/peer.txt")
                line "$side" "${answered:-0}" "${lost:-$COUNT}" ;;
        esac
    done
done
