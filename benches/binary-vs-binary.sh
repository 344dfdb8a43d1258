#!/usr/bin/env bash
# Two builds of dnsluice side by side on the main jobs, alternating, several
# rounds: for a change that must not cost speed (a refactor: "every figure
# within 5 % of before"). Build the old one from its commit into a target
# directory of its own, e.g.
#
#   git worktree add --detach ../old COMMIT
#   (cd ../old && CARGO_TARGET_DIR=../old-target cargo build --release -p dnsluice)
#   OLD=../old-target/release/dnsluice benches/binary-vs-binary.sh
#
# Cases (each a whole process under /usr/bin/time: wall, user + system CPU,
# peak RSS; each checked for the same result on both sides):
#   dns-parse  configs/dns-null.toml on bench-data/big.pcap (COUNT packets,
#              benches/gen-pcap.py): read, layers, DNS, discard
#   dns-json   configs/dump.toml on the same capture, JSON to /dev/null
#   lookup     NAMES names of the bench's knot (benches/bench-knot.sh),
#              `lookup A` with the defaults, every record NOERROR
#   replay     the same names as a capture, `replay --server` over UDP as
#              fast as it goes, every query answered
#
# Environment: OLD (required), NEW (target/release/dnsluice), ROUNDS (5),
# CASES ("dns-parse dns-json lookup replay"), COUNT (5000000), NAMES
# (200000), KNOT_PORT (53952), DATA_DIR (bench-data). Run it on an idle
# machine, through `cpu-lock bench` where sessions share one.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OLD=${OLD:?OLD=path of the old build}
NEW=${NEW:-$ROOT/target/release/dnsluice}
ROUNDS=${ROUNDS:-5}
CASES=${CASES:-dns-parse dns-json lookup replay}
COUNT=${COUNT:-5000000}
NAMES=${NAMES:-200000}
KNOT_PORT=${KNOT_PORT:-53952}
DATA_DIR=${DATA_DIR:-$ROOT/bench-data}
for bin in "$OLD" "$NEW"; do
    [[ -x $bin ]] || { echo "binary-vs-binary: $bin is not an executable" >&2; exit 1; }
done
mkdir -p "$DATA_DIR"
TMP=$(mktemp -d)
# shellcheck source=benches/bench-knot.sh
source benches/bench-knot.sh
trap 'stop_bench_knot; rm -rf "$TMP"' EXIT

PCAP=$DATA_DIR/big.pcap
if [[ " $CASES " == *" dns-"* && ! -s $PCAP ]]; then
    python3 benches/gen-pcap.py --count "$COUNT" --out "$PCAP" >&2
fi
if [[ " $CASES " == *" lookup "* || " $CASES " == *" replay "* ]]; then
    start_bench_knot "$DATA_DIR/binary-vs-binary" "$KNOT_PORT" "$NAMES"
    seq 0 $((NAMES - 1)) | sed 's/^/n/; s/$/.lookup.test/' > "$TMP/names.txt"
    python3 benches/gen-pcap.py --count "$NAMES" --zone lookup.test --names "$NAMES" \
        --pool "$NAMES" --out "$TMP/queries.pcap" >&2
fi

# run_case SIDE BIN CASE: one timed run; prints "wall cpu rss result".
run_case() {
    local bin=$2 case=$3 out=$TMP/out result
    local timed=(/usr/bin/time -f "%e %U %S %M" -o "$TMP/time")
    case $case in
        dns-parse)
            "${timed[@]}" "$bin" run configs/dns-null.toml --set "0.path=$PCAP" -q \
                --stats-json "$out" > /dev/null
            result=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["stages"][-1]["in"])' "$out")
            ;;
        dns-json)
            "${timed[@]}" "$bin" run configs/dump.toml --set "0.path=$PCAP" -q > "$out"
            result=$(wc -l < "$out")
            ;;
        lookup)
            "${timed[@]}" "$bin" lookup A --name-servers "$KNOT" --input "$TMP/names.txt" \
                --output "$out" -q
            result=$(grep -c '"status":"NOERROR"' "$out" || true)
            ;;
        replay)
            "${timed[@]}" "$bin" replay "$TMP/queries.pcap" --server "$KNOT" -q \
                --stats-json "$out"
            result=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["answered"])' "$out")
            ;;
    esac
    read -r wall user sys rss < "$TMP/time"
    echo "$wall $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') $((rss / 1024)) $result"
}

echo "binary-vs-binary: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), rounds $ROUNDS"
echo "  old $OLD"
echo "  new $NEW"
: > "$TMP/runs"
for case in $CASES; do
    for round in $(seq "$ROUNDS"); do
        # Alternate which side goes first.
        sides=(old new)
        ((round % 2 == 0)) && sides=(new old)
        for side in "${sides[@]}"; do
            bin=$OLD
            [[ $side == new ]] && bin=$NEW
            line=$(run_case "$side" "$bin" "$case")
            echo "$case $side $line" | tee -a "$TMP/runs"
        done
    done
done
python3 - "$TMP/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    case, side, wall, cpu, rss, result = line.split()
    runs.setdefault((case, side), []).append((float(wall), float(cpu), int(rss), result))
print("\nmedians (new / old)")
for case in dict.fromkeys(c for c, _ in runs):
    old, new = runs[(case, "old")], runs[(case, "new")]
    results = {r[3] for r in old + new}
    med = lambda rows, i: statistics.median(r[i] for r in rows)
    print(f"{case:10} wall {med(old,0):7.2f} -> {med(new,0):7.2f} s ({med(new,0)/med(old,0):.3f}x)"
          f"  cpu {med(old,1):7.2f} -> {med(new,1):7.2f} s ({med(new,1)/med(old,1):.3f}x)"
          f"  rss {med(old,2)} -> {med(new,2)} MB"
          f"  result {'same: ' + results.pop() if len(results) == 1 else 'DIFFERS: ' + str(sorted(results))}")
PY
