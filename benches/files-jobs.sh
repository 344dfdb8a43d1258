#!/usr/bin/env bash
# A capture set one file at a time against several at once: `dnsluice run
# configs/qtype-stats.toml --files *.pcap.zst --jobs N` for each N in JOBS,
# alternating, several rounds, each a whole process under /usr/bin/time
# (wall, user + system CPU, peak RSS); every run's summary must count the
# same packets and DNS messages.
#
# Usage: benches/files-jobs.sh
#        FILES=8 COUNT=2000000 JOBS="1 2" ROUNDS=3 SKIP_BUILD=1 benches/files-jobs.sh
#
# Environment: FILES (8 captures), COUNT (2,000,000 packets each, zstd
# compressed: benches/gen-pcap.py with seeds 1..FILES), JOBS ("1 2"),
# ROUNDS (3), SKIP_BUILD=1, DATA_DIR (bench-data/files-jobs). Run it on an
# idle machine, through `cpu-lock bench` where sessions share one.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FILES=${FILES:-8}
COUNT=${COUNT:-2000000}
JOBS=${JOBS:-1 2}
ROUNDS=${ROUNDS:-3}
DATA_DIR=${DATA_DIR:-$ROOT/bench-data/files-jobs}
BIN=$ROOT/target/release/dnsluice
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    cargo build --release -p dnsluice
fi
mkdir -p "$DATA_DIR"
captures=()
for seed in $(seq "$FILES"); do
    file=$DATA_DIR/capture-$COUNT-$seed.pcap.zst
    if [[ ! -s $file ]]; then
        python3 benches/gen-pcap.py --count "$COUNT" --seed "$seed" --out "$DATA_DIR/plain.pcap" >&2
        zstd -q -f --rm "$DATA_DIR/plain.pcap" -o "$file"
    fi
    captures+=("$file")
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "files-jobs: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $FILES files of $COUNT packets (zstd), rounds $ROUNDS"
: > "$TMP/runs"
for round in $(seq "$ROUNDS"); do
    order=($JOBS)
    # Alternate which goes first.
    ((round % 2 == 0)) && order=($(printf '%s\n' "${order[@]}" | tac))
    for jobs in "${order[@]}"; do
        /usr/bin/time -f "%e %U %S %M" -o "$TMP/time" \
            "$BIN" run configs/qtype-stats.toml --files "${captures[@]}" --jobs "$jobs" -q \
            --stats-json "$TMP/stats.json"
        read -r wall user sys rss < "$TMP/time"
        counted=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["stages"][0]["out"], s["stages"][2]["out"])' "$TMP/stats.json")
        line="$jobs $wall $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') $((rss / 1024)) $counted"
        echo "$line" >> "$TMP/runs"
        printf 'jobs %-3s wall %6.2f s  cpu %6.2f s  rss %5s MB  packets %s  messages %s\n' $line
    done
done
python3 - "$TMP/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    jobs, wall, cpu, rss, packets, messages = line.split()
    runs.setdefault(int(jobs), []).append((float(wall), float(cpu), int(rss), packets, messages))
counts = {(r[3], r[4]) for rows in runs.values() for r in rows}
print("\nmedians" + ("" if len(counts) == 1 else f"  COUNTS DIFFER: {sorted(counts)}"))
base = statistics.median(r[0] for r in runs[min(runs)])
for jobs, rows in sorted(runs.items()):
    wall = statistics.median(r[0] for r in rows)
    cpu = statistics.median(r[1] for r in rows)
    rss = statistics.median(r[2] for r in rows)
    print(f"jobs {jobs:<3} wall {wall:6.2f} s  cpu {cpu:6.2f} s  rss {rss} MB  speed-up {base / wall:.2f}x")
PY
