#!/usr/bin/env bash
# output.parquet against output.json on one generated capture, whole
# processes (docs/benchmarks.md).
#
# Usage: benches/parquet-vs-json.sh            (under `cpu-lock bench` on a shared machine)
#        COUNT=10000000 RUNS=3 SKIP_BUILD=1 benches/parquet-vs-json.sh
#
# Both sides run INPUT (input.fpcap) -> filter.layer -> filter.dns -> OUTPUT:
#   json     output.json to /dev/null (every message as a JSON line), on
#            the default threads (`auto`: the machine's cores for this chain)
#   json1    the same on one thread (`--threads 1`)
#   parquet  output.parquet to a file (zstd, row groups of 131072 rows)
# alternating, RUNS rounds, each under /usr/bin/time (wall, user + system
# CPU, peak RSS). Messages/s = COUNT / wall (both sides' counts are checked
# with --stats-json). Then the bound on memory: output.parquet's peak RSS
# on the first quarter of the capture and on all of it (input.fpcap reads
# with a buffer: the RSS is the writer's; input.mmpcap's map would add the
# pages of the file it is walking).
#
# Environment: COUNT (messages, default 20000000: about 1.8 GB of capture;
#   check the free disk first), SEED (1), RUNS (3), SKIP_BUILD=1, DATA_DIR
#   (<repo>/bench-data), KEEP=1 keeps the capture, INPUT (input.fpcap),
#   SIDES ("json json1 parquet").
set -euo pipefail
export LC_ALL=C

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
COUNT="${COUNT:-20000000}"
SEED="${SEED:-1}"
RUNS="${RUNS:-3}"
INPUT="${INPUT:-input.fpcap}"
DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
BIN="${DNSLUICE_BIN:-${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/dnsluice}"
GEN="$REPO_ROOT/benches/gen-pcap.py"

die() { echo "parquet-vs-json: error: $*" >&2; exit 1; }
log() { echo "parquet-vs-json: $*" >&2; }

[[ "$COUNT" =~ ^[1-9][0-9]*$ ]] || die "COUNT must be a positive integer"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (apt-get install time)"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release
fi
[[ -x "$BIN" ]] || die "$BIN not found"

mkdir -p "$DATA_DIR"
TMP="$(mktemp -d "$DATA_DIR/parquet.XXXXXX")"
PCAP="$DATA_DIR/parquet-$COUNT.pcap"
QUARTER="$DATA_DIR/parquet-$((COUNT / 4)).pcap"
cleanup() {
    rm -rf "$TMP"
    [[ "${KEEP:-0}" == 1 ]] || rm -f "$PCAP" "$QUARTER"
}
trap cleanup EXIT

need=$((COUNT * 95 * 5 / 4 / 1000000))
free=$(df -Pm "$DATA_DIR" | awk 'NR==2 {print $4}')
((free > need + 2000)) || die "$need MB of captures need more than the $free MB free"
POOL=$((COUNT < 1000000 ? COUNT : 1000000))
[[ -f "$PCAP" ]] || python3 "$GEN" --count "$COUNT" --seed "$SEED" --pool "$POOL" --out "$PCAP" >&2
[[ -f "$QUARTER" ]] || python3 "$GEN" --count "$((COUNT / 4))" --seed "$SEED" --pool "$POOL" --out "$QUARTER" >&2
log "captures: $(du -m "$PCAP" | cut -f1) MB, $(du -m "$QUARTER" | cut -f1) MB"

pipeline() { # OUTPUT_TABLE CAPTURE -> a pipeline file
    local file="$TMP/$1.toml"
    printf '[[stage]]\nmodule = "%s"\npath = "%s"\n[[stage]]\nmodule = "filter.layer"\n[[stage]]\nmodule = "filter.dns"\n[[stage]]\n%s\n' "$INPUT" "$2" "$3" >"$file"
    echo "$file"
}
JSON=$(pipeline json "$PCAP" 'module = "output.json"
path = "/dev/null"')
PARQUET=$(pipeline parquet "$PCAP" "module = \"output.parquet\"
path = \"$TMP/out.parquet\"")
PARQUET_QUARTER=$(pipeline parquet-quarter "$QUARTER" "module = \"output.parquet\"
path = \"$TMP/quarter.parquet\"")

run() { # NAME PIPELINE COUNT -> "wall cpu rss_mb" on stdout
    local stats="$TMP/$1.stats.json"
    local extra=()
    [[ $1 == json1 ]] && extra=(--threads 1)
    /usr/bin/time -f '%e %U %S %M' -o "$TMP/$1.time" "$BIN" run -q "$2" "${extra[@]}" --stats-json "$stats"
    python3 - "$stats" "$3" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
out = stats["stages"][-1]["out"]
assert out == int(sys.argv[2]), f"{stats['stages'][-1]['module']} wrote {out}, not {sys.argv[2]}"
PY
    awk '{printf "%s %.2f %.0f\n", $1, $2 + $3, $4 / 1024}' "$TMP/$1.time"
}

cat "$PCAP" >/dev/null
printf 'load: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %5s %9s %8s %12s %8s\n' side round wall_s cpu_s msgs_per_s rss_mb
for round in $(seq 1 "$RUNS"); do
    for side in ${SIDES:-json json1 parquet}; do
        file=$JSON
        [[ $side == parquet ]] && file=$PARQUET
        read -r wall cpu rss < <(run "$side" "$file" "$COUNT")
        printf '%-8s %5d %9s %8s %12.0f %8s\n' "$side" "$round" "$wall" "$cpu" "$(awk -v n="$COUNT" -v w="$wall" 'BEGIN {print n / w}')" "$rss"
    done
done
printf 'parquet file: %s MB for %s messages\n' "$(du -m "$TMP/out.parquet" | cut -f1)" "$COUNT"
read -r wall cpu rss < <(run quarter "$PARQUET_QUARTER" "$((COUNT / 4))")
printf 'peak RSS of output.parquet: %s MB on %s messages (a quarter), see the rounds above for %s\n' "$rss" "$((COUNT / 4))" "$COUNT"
printf 'load: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
