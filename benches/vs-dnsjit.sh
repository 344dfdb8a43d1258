#!/usr/bin/env bash
# Whole-process throughput comparison: dnsluice vs Debian's dnsjit.
#
# Usage: benches/vs-dnsjit.sh
#        PAIRS="dns-parse dns-dump" SKIP_BUILD=1 benches/vs-dnsjit.sh
#
# Pairs (ours vs dnsjit):
#   mmpcap     configs/layer-null.toml (input.mmpcap)  vs  dnsjit/layer-count.lua mmpcap
#   fpcap      configs/layer-null.toml (input.fpcap)   vs  dnsjit/layer-count.lua fpcap
#              read + filter.layer, count/discard; on big.pcap, unit packets/s
#   dns-parse  configs/dns-null.toml (mmpcap, layer, dns, null)
#              vs  dnsjit/dns-parse.lua (mmpcap, layer, parse_header + parse_q);
#              on big.pcap, unit DNS messages/s (one query per packet)
#   dns-dump   configs/dump.toml with output.json to /dev/null
#              vs  examples/dumpdns.lua (libpcap input, dns:print()) to /dev/null;
#              on the smaller dump.pcap (DUMP_COUNT), unit DNS messages/s
#
# Environment:
#   PAIRS="mmpcap fpcap dns-parse dns-dump"   pairs to run (space separated)
#   COUNT=5000000   packets in the generated pcap (bench-data/big.pcap)
#   DUMP_COUNT=500000  packets in bench-data/dump.pcap (pair dns-dump)
#   RUNS=5          timed runs per side and pair
#   SEED=1          generator seed
#   WARMUP=1        untimed runs per side before timing (0 to skip)
#   SKIP_BUILD=1    do not run `cargo build --release` (binary must exist)
#   HYPERFINE=1     additionally cross-check each pair with hyperfine
#   EXPECT=N        count dnsjit must print in mmpcap/fpcap (default COUNT)
#   DATA_DIR=DIR    where big.pcap and dump.pcap live (default <repo>/bench-data)
#   DUMPDNS=P       dnsjit's dumpdns.lua (default /usr/share/doc/dnsjit/examples/dumpdns.lua)
#   DNSLUICE_BIN=P  our binary (default <repo>/target/release/dnsluice)
#   CACHE=disk      drop the captures from the page cache and read them back
#                   first, as a capture read from disk is (default as-is: as
#                   they are). Both tools pay the kernel far
#                   less to map a file held in large folios; see
#                   benches/page_cache.py, whose count of faults is printed.
#   HELPER=0        run input.mmpcap without its helper thread (one thread:
#                   `--set 0.helper=false` on every pair that maps the file)
#
# Each pair is run alternately (ABBA order: ours,dnsjit / dnsjit,ours / ...)
# so drift on a busy machine hits both sides alike.  Wall time per run is the
# whole process, startup included.  Rate = N / seconds, where N is the
# number of packets (= DNS messages; the generator writes one query per
# packet) in the pair's file.  The ratio column is the median of the
# per-round ratios ours/dnsjit of the rates (each round's two runs are
# adjacent in time); > 1 means ours is faster.  The CPU columns are the
# processes' user + system time (all threads; input.mmpcap runs a helper
# thread, see its `helper` option), and "cpu ratio" the median per-round
# ratio dnsjit CPU / ours CPU: how much less processor time ours takes.
# Under each row, "per round" gives how the rounds' ratios scatter: the
# lowest and highest, and the middle half (first to third quartile).
#
# Every pair checks, outside the timed runs or on their output, that both
# sides handled all N packets/messages, and stops with an error otherwise.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

PAIRS="${PAIRS:-mmpcap fpcap dns-parse dns-dump}"
COUNT="${COUNT:-5000000}"
DUMP_COUNT="${DUMP_COUNT:-500000}"
RUNS="${RUNS:-5}"
SEED="${SEED:-1}"
WARMUP="${WARMUP:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
HYPERFINE="${HYPERFINE:-0}"
HELPER="${HELPER:-1}"

DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
PCAP="$DATA_DIR/big.pcap"
DUMP_PCAP="$DATA_DIR/dump.pcap"
GEN="$SCRIPT_DIR/gen-pcap.py"
LUA="$SCRIPT_DIR/dnsjit/layer-count.lua"
DNS_LUA="$SCRIPT_DIR/dnsjit/dns-parse.lua"
DUMPDNS="${DUMPDNS:-/usr/share/doc/dnsjit/examples/dumpdns.lua}"
BIN="${DNSLUICE_BIN:-$REPO_ROOT/target/release/dnsluice}"
CONFIG="$REPO_ROOT/configs/layer-null.toml"
DNS_CONFIG="$REPO_ROOT/configs/dns-null.toml"
DUMP_CONFIG="$REPO_ROOT/configs/dump.toml"
RUNLOG="$DATA_DIR/vs-dnsjit-runs.tsv"

die() { echo "vs-dnsjit: error: $*" >&2; exit 1; }
log() { echo "vs-dnsjit: $*" >&2; }

[[ "$COUNT" =~ ^[1-9][0-9]*$ ]] || die "COUNT must be a positive integer, got '$COUNT'"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '$RUNS'"
[[ "$WARMUP" =~ ^[0-9]+$ ]] || die "WARMUP must be a non-negative integer, got '$WARMUP'"
[[ "$DUMP_COUNT" =~ ^[1-9][0-9]*$ ]] || die "DUMP_COUNT must be a positive integer, got '$DUMP_COUNT'"

# want_pair NAME: is NAME in $PAIRS?
want_pair() { [[ " $PAIRS " == *" $1 "* ]]; }
for p in $PAIRS; do
    case "$p" in
        mmpcap | fpcap | dns-parse | dns-dump) ;;
        *) die "unknown pair '$p' in PAIRS (known: mmpcap fpcap dns-parse dns-dump)" ;;
    esac
done
[[ -n "${PAIRS// /}" ]] || die "PAIRS is empty"

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
if want_pair mmpcap || want_pair fpcap; then
    [[ -f "$CONFIG" ]] || die "$CONFIG not found"
    [[ -f "$LUA" ]] || die "$LUA not found"
fi
if want_pair dns-parse; then
    [[ -f "$DNS_CONFIG" ]] || die "$DNS_CONFIG not found"
    [[ -f "$DNS_LUA" ]] || die "$DNS_LUA not found"
fi
if want_pair dns-dump; then
    [[ -f "$DUMP_CONFIG" ]] || die "$DUMP_CONFIG not found"
    if [[ ! -f "$DUMPDNS" && -f "$DUMPDNS.gz" ]]; then
        # some packagings compress the examples
        mkdir -p "$DATA_DIR"
        gunzip -c "$DUMPDNS.gz" >"$DATA_DIR/dumpdns.lua"
        DUMPDNS="$DATA_DIR/dumpdns.lua"
    fi
    [[ -f "$DUMPDNS" ]] || die "$DUMPDNS not found (set DUMPDNS=path/to/dumpdns.lua)"
fi

# ---------------------------------------------------------------- data

mkdir -p "$DATA_DIR"

# gen_pcap FILE N: (re)generate FILE with N packets unless its stamp says it
# is already that.
gen_pcap() {
    local file=$1 n=$2 stamp="$1.stamp" want
    want="count=$n seed=$SEED gen=$(sha256sum "$GEN" | cut -c1-16)"
    if [[ -f "$file" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        log "reusing $file ($want)"
    else
        log "generating $file ($want)"
        rm -f "$stamp"
        python3 "$GEN" --count "$n" --seed "$SEED" --out "$file.tmp" >&2
        mv -f "$file.tmp" "$file"
        printf '%s\n' "$want" >"$stamp"
    fi
    # Warm the page cache so the first timed run is not a cold read, and say
    # what state its pages are in (CACHE=disk: as read from disk).
    python3 "$SCRIPT_DIR/page_cache.py" bench "$file" >&2
}

if want_pair mmpcap || want_pair fpcap || want_pair dns-parse; then
    gen_pcap "$PCAP" "$COUNT"
fi
if want_pair dns-dump; then
    gen_pcap "$DUMP_PCAP" "$DUMP_COUNT"
fi

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

# children_cpu VAR: sets VAR to the user + system seconds of this shell's
# finished children (bash's `times`, second line: "XmY.YYYs XmZ.ZZZs"; run
# in this shell, not a subshell, whose children would be its own).
children_cpu() {
    times >"$TMP/times"
    printf -v "$1" '%s' "$(awk 'NR == 2 {
        n = 0
        for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] }
        printf "%.6f", n }' "$TMP/times")"
}

# run_timed SIDE CMD: run CMD (a shell command string) once, with its output
# in $TMP/SIDE.out and $TMP/SIDE.err; sets LAST_SECS (wall) and LAST_CPU
# (user + system of the process and its threads). Fails loudly.
LAST_SECS=
LAST_CPU=
run_timed() {
    local side=$1 cmd=$2 t0 t1 c0 c1 rc=0
    children_cpu c0
    t0=$(now)
    eval "$cmd" >"$TMP/$side.out" 2>"$TMP/$side.err" || rc=$?
    t1=$(now)
    children_cpu c1
    if ((rc != 0)); then
        echo "vs-dnsjit: $side failed (exit $rc): $cmd" >&2
        sed 's/^/  | /' "$TMP/$side.err" | tail -n 20 >&2
        exit 1
    fi
    LAST_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
    LAST_CPU=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.6f", b - a }')
}

# check_count SIDE N: the last stdout line of SIDE's run must equal N.
# N = "-" skips the check (the command sends its output elsewhere and is
# verified separately).
check_count() {
    local side=$1 want=$2 got
    [[ "$want" == - ]] && return 0
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

# spread: numbers on stdin, one per line -> "lowest-highest (middle half
# q1-q3)": how far the rounds' ratios scatter on this machine, beside the
# median the table gives (on a busy virtual machine a median alone can
# land on either side of a goal).
spread() {
    sort -g | awk '{ v[NR] = $1 }
        function at(q,   k, f) { k = 1 + (NR - 1) * q; f = int(k); return v[f] + (k - f) * (v[f + 1 < NR ? f + 1 : NR] - v[f]) }
        END {
            if (NR == 0) { print "none"; exit }
            printf "%.2f-%.2f (middle half %.2f-%.2f)\n", v[1], v[NR], at(0.25), at(0.75) }'
}

table_header() {
    printf '\n%-10s %9s %13s %13s %10s %10s %7s %9s %9s %9s\n' pair N "ours /s" "dnsjit /s" "ours s" "dnsjit s" ratio "ours cpu" "djit cpu" "cpu ratio"
    printf '%-10s %9s %13s %13s %10s %10s %7s %9s %9s %9s\n' ---------- --------- ------------- ------------- ---------- ---------- ------- --------- --------- ---------
}

# verify_ours_dns NAME OURS_CMD N: run OURS_CMD once (untimed) with
# --stats-json and require filter.dns to have passed on exactly N messages.
verify_ours_dns() {
    local name=$1 cmd=$2 want=$3 got
    eval "$cmd --stats-json $(printf '%q' "$TMP/stats.json")" >/dev/null 2>"$TMP/verify.err" ||
        { sed 's/^/  | /' "$TMP/verify.err" | tail -n 20 >&2; die "$name: ours failed in the check run: $cmd"; }
    got=$(python3 -c '
import json, sys
stages = [s for s in json.load(open(sys.argv[1]))["stages"] if s["module"] == "filter.dns"]
print(stages[0]["out"] if len(stages) == 1 else "no-single-filter.dns")' "$TMP/stats.json")
    [[ "$got" == "$want" ]] || die "$name: ours: filter.dns out = $got, expected $want"
    log "$name: ours checked: filter.dns out = $got"
}

# bench_pair NAME OURS_CMD DNSJIT_CMD [N [EXPECT]]
#   Runs both commands alternately RUNS times each (after WARMUP untimed
#   runs), checks that dnsjit's last output line equals EXPECT (default:
#   env EXPECT, else N; "-" = no check), prints one table row: median rate
#   (N / seconds, N default COUNT) for each side, median seconds, and the
#   median per-round ratio ours/dnsjit.
bench_pair() {
    local name=$1 ours=$2 dnsjit=$3 i
    local n="${4:-$COUNT}"
    local expect="${5:-${EXPECT:-$n}}"
    local -a ours_s=() dnsjit_s=() ratios=() ours_c=() dnsjit_c=() cpu_ratios=()

    for ((i = 0; i < WARMUP; i++)); do
        run_timed ours "$ours"
        run_timed dnsjit "$dnsjit"
        check_count dnsjit "$expect"
    done

    for ((i = 0; i < RUNS; i++)); do
        local so sd co cd
        if ((i % 2 == 0)); then
            run_timed ours "$ours"; so=$LAST_SECS; co=$LAST_CPU
            run_timed dnsjit "$dnsjit"; sd=$LAST_SECS; cd=$LAST_CPU
        else
            run_timed dnsjit "$dnsjit"; sd=$LAST_SECS; cd=$LAST_CPU
            run_timed ours "$ours"; so=$LAST_SECS; co=$LAST_CPU
        fi
        check_count dnsjit "$expect"
        ours_s+=("$so")
        dnsjit_s+=("$sd")
        # ratio of packets/s = dnsjit seconds / ours seconds
        ratios+=("$(awk -v o="$so" -v d="$sd" 'BEGIN { printf "%.6f", d / o }')")
        ours_c+=("$co")
        dnsjit_c+=("$cd")
        cpu_ratios+=("$(awk -v o="$co" -v d="$cd" 'BEGIN { printf "%.6f", (o > 0 ? d / o : 0) }')")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$name" "$n" "$i" "$so" "$sd" "$co" "$cd" >>"$RUNLOG"
    done

    local mo md mr mco mcd mcr
    mo=$(printf '%s\n' "${ours_s[@]}" | median)
    md=$(printf '%s\n' "${dnsjit_s[@]}" | median)
    mr=$(printf '%s\n' "${ratios[@]}" | median)
    mco=$(printf '%s\n' "${ours_c[@]}" | median)
    mcd=$(printf '%s\n' "${dnsjit_c[@]}" | median)
    mcr=$(printf '%s\n' "${cpu_ratios[@]}" | median)
    awk -v n="$name" -v c="$n" -v mo="$mo" -v md="$md" -v mr="$mr" \
        -v mco="$mco" -v mcd="$mcd" -v mcr="$mcr" 'BEGIN {
        printf "%-10s %9d %13.0f %13.0f %10.4f %10.4f %7.2f %9.3f %9.3f %9.2f\n",
            n, c, c / mo, c / md, mo, md, mr, mco, mcd, mcr }'

    printf '%-10s per round: ratio %s, cpu ratio %s\n' "" \
        "$(printf '%s\n' "${ratios[@]}" | spread)" "$(printf '%s\n' "${cpu_ratios[@]}" | spread)"

    if [[ "$HYPERFINE" == 1 ]]; then
        hyperfine -N -w 1 -r "$RUNS" -n "$name ours" "$ours" -n "$name dnsjit" "$dnsjit" >&2
    fi
}

# ---------------------------------------------------------------- pairs

q() { printf '%q' "$1"; }

# What our side adds on pairs whose input is input.mmpcap.
MMPCAP_ARGS=""
[[ "$HELPER" == 0 ]] && MMPCAP_ARGS=" --set 0.helper=false"

log "dnsjit $(dpkg-query -W -f='${Version}' dnsjit 2>/dev/null || echo '?'), $(nproc) cpus, PAIRS=\"$PAIRS\" COUNT=$COUNT DUMP_COUNT=$DUMP_COUNT RUNS=$RUNS WARMUP=$WARMUP HELPER=$HELPER"
log "load: $(uptime)"

# Untimed correctness checks first, so the table is printed in one piece.
if want_pair dns-parse; then
    DNS_PARSE_OURS="$(q "$BIN") run $(q "$DNS_CONFIG") -q --set 0.path=$(q "$PCAP")$MMPCAP_ARGS"
    verify_ours_dns dns-parse "$DNS_PARSE_OURS" "$COUNT"
    # dnsjit side: dns-parse.lua itself exits 1 unless it counts COUNT
    # messages with no parse failures, and check_count checks what it printed.
fi
if want_pair dns-dump; then
    DNS_DUMP_OURS="$(q "$BIN") run $(q "$DUMP_CONFIG") -q --set 0.path=$(q "$DUMP_PCAP") --set 3.path=/dev/null$MMPCAP_ARGS"
    verify_ours_dns dns-dump "$DNS_DUMP_OURS" "$DUMP_COUNT"
    # dumpdns.lua prints, per message, "udp|tcp SRC:PORT -> DST:PORT" and
    # then dns:print(), whose first line is "id:\t<id>" (only printed when
    # the header parsed).  Both counts must be DUMP_COUNT.
    counts=$(dnsjit "$DUMPDNS" "$DUMP_PCAP" 2>"$TMP/verify.err" |
        awk '/^(udp|tcp) [^ ]+ -> [^ ]+$/ { s++ } /^id:\t/ { i++ } END { print s + 0, i + 0 }') ||
        { sed 's/^/  | /' "$TMP/verify.err" | tail -n 20 >&2; die "dns-dump: dnsjit check run failed"; }
    read -r starts ids <<<"$counts"
    [[ "$starts" == "$DUMP_COUNT" && "$ids" == "$DUMP_COUNT" ]] ||
        die "dns-dump: dnsjit dumpdns.lua printed $starts message lines and $ids id: lines, expected $DUMP_COUNT"
    log "dns-dump: dnsjit checked: $starts messages dumped"
fi

table_header

for input in mmpcap fpcap; do
    want_pair "$input" || continue
    extra=""
    [[ "$input" == mmpcap ]] && extra="$MMPCAP_ARGS"
    bench_pair "$input" \
        "$(q "$BIN") run $(q "$CONFIG") --set 0.module=input.$input --set 0.path=$(q "$PCAP")$extra" \
        "dnsjit $(q "$LUA") $input $(q "$PCAP")"
done

if want_pair dns-parse; then
    bench_pair dns-parse \
        "$DNS_PARSE_OURS" \
        "dnsjit $(q "$DNS_LUA") $(q "$PCAP") $COUNT" \
        "$COUNT" "$COUNT"
fi

if want_pair dns-dump; then
    bench_pair dns-dump \
        "$DNS_DUMP_OURS" \
        "dnsjit $(q "$DUMPDNS") $(q "$DUMP_PCAP") >/dev/null" \
        "$DUMP_COUNT" -
fi

echo
log "raw runs appended to $RUNLOG (time, pair, count, round, ours s, dnsjit s, ours cpu s, dnsjit cpu s)"
