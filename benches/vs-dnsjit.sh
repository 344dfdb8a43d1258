#!/usr/bin/env bash
# Whole-process throughput comparison: dnsluice vs Debian's dnsjit.
#
# Usage: benches/vs-dnsjit.sh
#
# Environment:
#   COUNT=5000000   packets in the generated pcap (bench-data/big.pcap)
#   RUNS=5          timed runs per side and pair
#   SEED=1          generator seed
#   WARMUP=1        untimed runs per side before timing (0 to skip)
#   SKIP_BUILD=1    do not run `cargo build --release` (binary must exist)
#   HYPERFINE=1     additionally cross-check each pair with hyperfine
#   EXPECT=N        count dnsjit must print (default COUNT)
#   DATA_DIR=DIR    where big.pcap lives (default <repo>/bench-data)
#   DNSLUICE_BIN=P  our binary (default <repo>/target/release/dnsluice)
#
# Each pair is run alternately (ABBA order: ours,dnsjit / dnsjit,ours / ...)
# so drift on a busy machine hits both sides alike.  Wall time per run is the
# whole process, startup included.  packets/s = COUNT / seconds.  The ratio
# column is the median of the per-round ratios ours/dnsjit (each round's two
# runs are adjacent in time).
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

COUNT="${COUNT:-5000000}"
RUNS="${RUNS:-5}"
SEED="${SEED:-1}"
WARMUP="${WARMUP:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
HYPERFINE="${HYPERFINE:-0}"

DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
PCAP="$DATA_DIR/big.pcap"
STAMP="$DATA_DIR/big.pcap.stamp"
GEN="$SCRIPT_DIR/gen-pcap.py"
LUA="$SCRIPT_DIR/dnsjit/layer-count.lua"
BIN="${DNSLUICE_BIN:-$REPO_ROOT/target/release/dnsluice}"
CONFIG="$REPO_ROOT/configs/layer-null.toml"
RUNLOG="$DATA_DIR/vs-dnsjit-runs.tsv"

die() { echo "vs-dnsjit: error: $*" >&2; exit 1; }
log() { echo "vs-dnsjit: $*" >&2; }

[[ "$COUNT" =~ ^[1-9][0-9]*$ ]] || die "COUNT must be a positive integer, got '$COUNT'"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '$RUNS'"
[[ "$WARMUP" =~ ^[0-9]+$ ]] || die "WARMUP must be a non-negative integer, got '$WARMUP'"

# ---------------------------------------------------------------- tools

apt_install() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || die "need root or sudo to install: $*"
        sudo=(sudo)
    fi
    log "installing $* with apt-get"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"; then
        log "apt-get install failed; running apt-get update and retrying"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
    fi
}

missing=()
command -v dnsjit >/dev/null || missing+=(dnsjit)
command -v hyperfine >/dev/null || missing+=(hyperfine)
command -v python3 >/dev/null || missing+=(python3)
if ((${#missing[@]})); then
    apt_install "${missing[@]}"
fi

# ---------------------------------------------------------------- build

if [[ "$SKIP_BUILD" == 1 ]]; then
    log "SKIP_BUILD=1: not building"
else
    log "cargo build --release"
    cargo build --release
fi
[[ -x "$BIN" ]] || die "$BIN not found (build it, or unset SKIP_BUILD)"
[[ -f "$CONFIG" ]] || die "$CONFIG not found"
[[ -f "$LUA" ]] || die "$LUA not found"

# ---------------------------------------------------------------- data

mkdir -p "$DATA_DIR"
want_stamp="count=$COUNT seed=$SEED gen=$(sha256sum "$GEN" | cut -c1-16)"
if [[ -f "$PCAP" && -f "$STAMP" && "$(cat "$STAMP")" == "$want_stamp" ]]; then
    log "reusing $PCAP ($want_stamp)"
else
    log "generating $PCAP ($want_stamp)"
    rm -f "$STAMP"
    python3 "$GEN" --count "$COUNT" --seed "$SEED" --out "$PCAP.tmp" >&2
    mv -f "$PCAP.tmp" "$PCAP"
    printf '%s\n' "$want_stamp" >"$STAMP"
fi
# Warm the page cache so the first timed run is not a cold read.
cat "$PCAP" >/dev/null

# ---------------------------------------------------------------- timing

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

now() {
    # bash >= 5 has a fork-free microsecond clock
    if [[ -n "${EPOCHREALTIME:-}" ]]; then
        printf '%s\n' "$EPOCHREALTIME"
    else
        date +%s.%N
    fi
}

# run_timed SIDE CMD: run CMD (a shell command string) once, with its output
# in $TMP/SIDE.out and $TMP/SIDE.err; sets LAST_SECS. Fails loudly.
LAST_SECS=
run_timed() {
    local side=$1 cmd=$2 t0 t1 rc=0
    t0=$(now)
    eval "$cmd" >"$TMP/$side.out" 2>"$TMP/$side.err" || rc=$?
    t1=$(now)
    if ((rc != 0)); then
        echo "vs-dnsjit: $side failed (exit $rc): $cmd" >&2
        sed 's/^/  | /' "$TMP/$side.err" | tail -n 20 >&2
        exit 1
    fi
    LAST_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
}

# check_count SIDE N: the last stdout line of SIDE's run must equal N.
check_count() {
    local side=$1 want=$2 got
    got=$(tail -n 1 "$TMP/$side.out" | tr -d '[:space:]')
    if [[ "$got" != "$want" ]]; then
        echo "vs-dnsjit: $side printed count '$got', expected $want" >&2
        echo "vs-dnsjit: stdout tail:" >&2
        tail -n 5 "$TMP/$side.out" | sed 's/^/  | /' >&2
        exit 1
    fi
}

median() { # numbers on stdin, one per line
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan"; exit }
        if (NR % 2) printf "%.6f\n", v[(NR + 1) / 2];
        else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

table_header() {
    printf '\n%-12s %14s %14s %12s %12s %8s\n' pair "ours pkt/s" "dnsjit pkt/s" "ours s" "dnsjit s" ratio
    printf '%-12s %14s %14s %12s %12s %8s\n' ------------ -------------- -------------- ------------ ------------ --------
}

# bench_pair NAME OURS_CMD DNSJIT_CMD
#   Runs both commands alternately RUNS times each (after WARMUP untimed
#   runs), checks that dnsjit's last output line equals EXPECT (default
#   COUNT), prints one table row: median packets/s for each side, median
#   seconds, and the median per-round ratio ours/dnsjit.
bench_pair() {
    local name=$1 ours=$2 dnsjit=$3 i
    local expect="${EXPECT:-$COUNT}"
    local -a ours_s=() dnsjit_s=() ratios=()

    for ((i = 0; i < WARMUP; i++)); do
        run_timed ours "$ours"
        run_timed dnsjit "$dnsjit"
        check_count dnsjit "$expect"
    done

    for ((i = 0; i < RUNS; i++)); do
        local so sd
        if ((i % 2 == 0)); then
            run_timed ours "$ours"; so=$LAST_SECS
            run_timed dnsjit "$dnsjit"; sd=$LAST_SECS
        else
            run_timed dnsjit "$dnsjit"; sd=$LAST_SECS
            run_timed ours "$ours"; so=$LAST_SECS
        fi
        check_count dnsjit "$expect"
        ours_s+=("$so")
        dnsjit_s+=("$sd")
        # ratio of packets/s = dnsjit seconds / ours seconds
        ratios+=("$(awk -v o="$so" -v d="$sd" 'BEGIN { printf "%.6f", d / o }')")
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$name" "$COUNT" "$i" "$so" "$sd" >>"$RUNLOG"
    done

    local mo md mr
    mo=$(printf '%s\n' "${ours_s[@]}" | median)
    md=$(printf '%s\n' "${dnsjit_s[@]}" | median)
    mr=$(printf '%s\n' "${ratios[@]}" | median)
    awk -v n="$name" -v c="$COUNT" -v mo="$mo" -v md="$md" -v mr="$mr" 'BEGIN {
        printf "%-12s %14.0f %14.0f %12.4f %12.4f %8.2f\n", n, c / mo, c / md, mo, md, mr }'

    if [[ "$HYPERFINE" == 1 ]]; then
        hyperfine -N -w 1 -r "$RUNS" -n "$name ours" "$ours" -n "$name dnsjit" "$dnsjit" >&2
    fi
}

# ---------------------------------------------------------------- pairs

q() { printf '%q' "$1"; }

log "dnsjit $(dpkg-query -W -f='${Version}' dnsjit 2>/dev/null || echo '?'), $(nproc) cpus, COUNT=$COUNT RUNS=$RUNS WARMUP=$WARMUP"
table_header

for input in mmpcap fpcap; do
    bench_pair "$input" \
        "$(q "$BIN") run $(q "$CONFIG") --set 0.module=input.$input --set 0.path=$(q "$PCAP")" \
        "dnsjit $(q "$LUA") $input $(q "$PCAP")"
done

echo
log "raw runs appended to $RUNLOG (time, pair, count, round, ours s, dnsjit s)"
