#!/usr/bin/env bash
# Bulk UDP lookups beside massdns, both with their defaults, on the same
# names against the same knot, alternating, several rounds; every answer of
# both checked against the zone generator's rule (n<I> -> 10.a.b.c).
#
# Usage: benches/lookup-vs-massdns.sh
#        CASES="wan" ROUNDS=5 SKIP_BUILD=1 benches/lookup-vs-massdns.sh
#
# Cases:
#   loopback   NAMES_LOOPBACK (1,000,000) names straight to knot: CPU per name
#   wan        NAMES_WAN (200,000) names through tools/netem, 25 ms each way
#              and 1 % loss each way: wall time, names lost, peak RSS
#   limited    NAMES_LIMITED (20,000) names through netem with a 2,000
#              queries/s limit per client (drop over it): wall against
#              the ideal names / 2,000
#
# Each run is a whole process timed by /usr/bin/time (wall, user + system
# CPU, peak RSS); the emulator's own CPU is measured over each run (it is
# on the same two cores). A name is lost when it has no record, or no
# record with its address (massdns writes nothing for a name it gives up).
# The bench's knot serves a zone of NAMES_LOOPBACK names on its own port,
# beside the test servers' (benches/bench-knot.sh: 4 MiB receive buffers,
# KNOT_RCVBUF=0 for the kernel's default).
#
# Environment:
#   MASSDNS      massdns's program (default: on the PATH, else /opt/massdns/massdns;
#                ../shared/tools/massdns/build.sh builds it)
#   ROUNDS=3     rounds per case, the two tools alternating
#   SKIP_BUILD=1 do not build (target/release/dnsluice and dnsluice-netem must exist)
#   OUT=DIR      zone, names and records (default bench-data/massdns)
#   KNOT_PORT    the bench knot's port (default 53950)
#   KNOT_RCVBUF  its UDP receive buffer in bytes (default 4194304; 0: the kernel's)
# Run it on an idle machine, through `cpu-lock bench` where sessions share one.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CASES="${CASES:-loopback wan limited}"
ROUNDS="${ROUNDS:-3}"
NAMES_LOOPBACK="${NAMES_LOOPBACK:-1000000}"
NAMES_WAN="${NAMES_WAN:-200000}"
NAMES_LIMITED="${NAMES_LIMITED:-20000}"
OUT="${OUT:-$ROOT/bench-data/massdns}"
KNOT_PORT="${KNOT_PORT:-53950}"
BIN="$ROOT/target/release/dnsluice"
NETEM="$ROOT/target/release/dnsluice-netem"
MASSDNS="${MASSDNS:-$(command -v massdns || echo /opt/massdns/massdns)}"
[[ -x $MASSDNS ]] || { echo "no massdns: set MASSDNS, or run ../shared/tools/massdns/build.sh" >&2; exit 1; }
for tool in knotd python3; do command -v "$tool" >/dev/null || { echo "$tool is missing" >&2; exit 1; }; done

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    cargo build --release --bin dnsluice -p dnsluice -p dnsluice-netem
fi
for bin in "$BIN" "$NETEM"; do
    [[ -x $bin ]] || { echo "$bin is missing: run without SKIP_BUILD=1, or cargo build --release -p dnsluice -p dnsluice-netem" >&2; exit 1; }
done
mkdir -p "$OUT"

# --- the bench's own knot, with a zone of NAMES_LOOPBACK names ---------------
# shellcheck source=benches/bench-knot.sh
source benches/bench-knot.sh
NETEM_PID=
cleanup() {
    [[ -n $NETEM_PID ]] && kill "$NETEM_PID" 2>/dev/null || true
    stop_bench_knot
    wait 2>/dev/null || true
}
trap cleanup EXIT
start_bench_knot "$OUT" "$KNOT_PORT" "$NAMES_LOOPBACK"

names() { # names COUNT: the file of n0 .. n{COUNT-1}
    local file="$OUT/names-$1.txt"
    [[ -s $file ]] || seq 0 $(($1 - 1)) | sed 's/^/n/; s/$/.lookup.test/' > "$file"
    echo "$file"
}

# check TOOL FILE COUNT: "records lost" (lost: names without their right answer).
check() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
tool, path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
def address(i):
    return f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
right, records = set(), 0
with open(path) as f:
    for line in f:
        records += 1
        r = json.loads(line)
        name = r["name"].rstrip(".")
        if tool == "massdns":
            answers = [a["data"] for a in r.get("data", {}).get("answers", []) if a["type"] == "A"]
        else:
            answers = [a["answer"] for a in r.get("data", {}).get("answers", []) if a["type"] == "A"]
        i = int(name.split(".")[0][1:])
        if r["status"] == "NOERROR" and answers == [address(i)]:
            right.add(i)
print(records, count - len(right & set(range(count))))
PY
}

# cpu_of PID: its user + system CPU seconds so far.
CLK_TCK=$(python3 -c "import os; print(os.sysconf('SC_CLK_TCK'))")
cpu_of() { awk -v hz="$CLK_TCK" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }

# run TOOL CASE SERVER COUNT: one timed run; prints a result line.
run() {
    local tool=$1 case=$2 server=$3 count=$4 file out netem_before=0 netem_after=0
    file=$(names "$count")
    out="$OUT/$tool-$case.out"
    rm -f "$out"
    [[ -n $NETEM_PID ]] && netem_before=$(cpu_of "$NETEM_PID")
    if [[ $tool == massdns ]]; then
        echo "$server" > "$OUT/resolvers.txt"
        /usr/bin/time -f "%e %U %S %M" -o "$OUT/time" \
            "$MASSDNS" --root -r "$OUT/resolvers.txt" -t A -o J -w "$out" "$file" 2> "$OUT/massdns.err" > /dev/null
    else
        /usr/bin/time -f "%e %U %S %M" -o "$OUT/time" \
            "$BIN" lookup A --name-servers "$server" --input "$file" --output "$out" -q
    fi
    [[ -n $NETEM_PID ]] && netem_after=$(cpu_of "$NETEM_PID")
    read -r wall user sys rss < "$OUT/time"
    read -r records lost < <(check "$tool" "$out" "$count")
    awk -v t="$tool" -v c="$case" -v n="$count" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss" \
        -v r="$records" -v l="$lost" -v e="$(awk -v a="$netem_before" -v b="$netem_after" 'BEGIN{print b-a}')" \
        'BEGIN { printf "%-8s %-9s names %8d  wall %7.2f s  cpu %6.2f s  %5.2f us/name  rss %4d MB  records %8d  lost %6d  netem cpu %5.2f s\n",
                 t, c, n, w, u + s, (u + s) * 1e6 / n, m / 1024, r, l, e }'
}

# netem SETTINGS...: a fresh emulator in front of the bench knot on 127.0.0.7.
start_netem() {
    [[ -n $NETEM_PID ]] && kill "$NETEM_PID" 2>/dev/null && wait "$NETEM_PID" 2>/dev/null || true
    "$NETEM" --udp-only --stats "$OUT/netem.json" "$@" "127.0.0.7:$KNOT_PORT=$KNOT" 2> "$OUT/netem.log" &
    NETEM_PID=$!
    for _ in $(seq 50); do [[ -s $OUT/netem.json ]] && break; sleep 0.1; done
    kill -0 "$NETEM_PID" 2>/dev/null || { echo "the emulator did not start: $(cat "$OUT/netem.log")" >&2; exit 1; }
}
stop_netem() {
    local cpu
    cpu=$(cpu_of "$NETEM_PID")
    kill "$NETEM_PID"; wait "$NETEM_PID" 2>/dev/null || true; NETEM_PID=
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['links'][0]; cpu=float(sys.argv[2])
n = l['up_forwarded'] + l['down_forwarded']
print('  netem: lost up %d, down %d, limited %d, kernel drops %d; %d datagrams forwarded, %.2f us of CPU each' % (
    l['up_lost'], l['down_lost'], l['limited_dropped'], d['kernel_drops'], n, cpu * 1e6 / max(n, 1)))" "$OUT/netem.json" "$cpu"
}

echo "lookup-vs-massdns: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), rounds $ROUNDS, massdns $MASSDNS"
results="$OUT/results.txt"
: > "$results"
for case in $CASES; do
    for round in $(seq "$ROUNDS"); do
        # Alternate which tool goes first.
        order="dnsluice massdns"
        (( round % 2 == 0 )) && order="massdns dnsluice"
        for tool in $order; do
            case $case in
                loopback) line=$(run "$tool" loopback "$KNOT" "$NAMES_LOOPBACK") ;;
                wan)
                    start_netem --delay 25ms --loss 1% --seed "$round"
                    line=$(run "$tool" wan "127.0.0.7:$KNOT_PORT" "$NAMES_WAN")
                    stop_netem ;;
                limited)
                    start_netem --delay 1ms --rate 2000 --over drop
                    line=$(run "$tool" limited "127.0.0.7:$KNOT_PORT" "$NAMES_LIMITED")
                    stop_netem ;;
                *) echo "unknown case $case" >&2; exit 1 ;;
            esac
            echo "$line"
            echo "$line" >> "$results"
        done
    done
done

# Medians per tool and case, and the ratios.
python3 - "$results" "$NAMES_LIMITED" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    key = (f[0], f[1])
    vals = dict(wall=float(f[5]), cpu=float(f[8]), us=float(f[10]), rss=int(f[13]), lost=int(f[18]))
    rows.setdefault(key, []).append(vals)
print("\nmedians (every round's names lost listed)")
for (tool, case), runs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "us", "rss")}
    print(f"{tool:8} {case:9} wall {med['wall']:7.2f} s  cpu {med['cpu']:6.2f} s  {med['us']:5.2f} us/name  rss {med['rss']:.0f} MB  lost {[r['lost'] for r in runs]}")
for case in sorted({c for _, c in rows}):
    ours, theirs = rows.get(("dnsluice", case)), rows.get(("massdns", case))
    if not ours or not theirs:
        continue
    w = statistics.median(r["wall"] for r in ours) / statistics.median(r["wall"] for r in theirs)
    c = statistics.median(r["us"] for r in ours) / statistics.median(r["us"] for r in theirs)
    print(f"{case}: dnsluice / massdns: wall {w:.2f}x, CPU per name {c:.2f}x")
    if case == "limited":
        ideal = int(sys.argv[2]) / 2000
        print(f"limited: ideal {ideal:.1f} s; dnsluice {statistics.median(r['wall'] for r in ours) / ideal:.2f}x of it")
PY
