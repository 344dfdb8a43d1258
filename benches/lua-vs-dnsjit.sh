#!/usr/bin/env bash
# Lua loops, whole processes: dnsluice's Lua bindings (both Lua builds)
# against Debian's dnsjit, on the same pcap, in the same run.
#
# Usage: benches/lua-vs-dnsjit.sh
#        COUNT=1000000 RUNS=5 SKIP_BUILD=1 ONE_THREAD=1 benches/lua-vs-dnsjit.sh
#
# The loop: for every DNS query, count queries per QTYPE and sum the lengths
# of the lower-cased QNAMEs (string.lower). Three scripts do it:
#   natural  benches/lua/natural.lua: `for obj in dns:iter()`, then obj.dns,
#            m.qr, m.qdcount, m.qname, m.qtype (the style a dnsjit user writes);
#   iter     benches/lua/qname-qtype.lua: the fields named once,
#            `dns:iter("qr", "qdcount", "qname", "qtype")`;
#   dnsjit   benches/dnsjit/qname-qtype.lua: input.mmpcap -> filter.layer,
#            dns:parse_header(), dns:parse_q(), label.tostring().
# Ours run with LuaJIT (the default build) and Lua 5.4
# (`--no-default-features --features lua54`, built in its own target dir).
# Every round runs dnsjit and each of ours once, in an order that reverses
# from round to round; ratio = dnsjit's time / ours in that round (above 1:
# we are faster), the median over the rounds, in wall time and in CPU time
# (user + system). input.mmpcap has a helper thread (it drops pages behind
# the walk): ONE_THREAD=1 turns it off, so that ours run on one thread as
# dnsjit does. Both sides must report the same counts (dnsjit names QTYPEs
# 64 and 65 UNKNOWN(n), we SVCB and HTTPS: the counts are compared).
#
# Then filter.lua's cost: configs/dns-null.toml with and without a filter.lua
# stage whose function returns true (benches/lua/dns-filter-lua-null.toml),
# on one thread: (median CPU with - median CPU without) / messages.
#
# Environment: COUNT (packets, default 1000000), RUNS (default 5), SEED (1),
# SKIP_BUILD=1 (use existing binaries), LUAJIT_BIN, LUA54_BIN (binaries to
# use; default target/release/dnsluice and target/lua54/release/dnsluice),
# BUILDS ("luajit lua54"), DATA_DIR, ONE_THREAD.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

COUNT="${COUNT:-1000000}"
RUNS="${RUNS:-5}"
SEED="${SEED:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
BUILDS="${BUILDS:-luajit lua54}"
ONE_THREAD="${ONE_THREAD:-0}"
DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
TARGET="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
PCAP="$DATA_DIR/lua-$COUNT.pcap"
LUAJIT_BIN="${LUAJIT_BIN:-$TARGET/release/dnsluice}"
LUA54_BIN="${LUA54_BIN:-$TARGET/lua54/release/dnsluice}"
DNSJIT_LUA="$SCRIPT_DIR/dnsjit/qname-qtype.lua"
declare -A STYLE=([natural]="$SCRIPT_DIR/lua/natural.lua" [iter]="$SCRIPT_DIR/lua/qname-qtype.lua")
declare -A BIN=([lua54]="$LUA54_BIN" [luajit]="$LUAJIT_BIN")
EXTRA=()
[[ "$ONE_THREAD" == 1 ]] && EXTRA=(--one-thread)

die() { echo "lua-vs-dnsjit: error: $*" >&2; exit 1; }
log() { echo "lua-vs-dnsjit: $*" >&2; }

command -v dnsjit >/dev/null || die "dnsjit not found (apt-get install dnsjit)"
if [[ "$SKIP_BUILD" != 1 ]]; then
    for build in $BUILDS; do
        case "$build" in
        luajit) log "cargo build --release"; cargo build --release -p dnsluice ;;
        lua54)
            log "cargo build --release --no-default-features --features lua54 (in $TARGET/lua54)"
            CARGO_TARGET_DIR="$TARGET/lua54" cargo build --release -p dnsluice --no-default-features --features lua54 ;;
        *) die "unknown build $build (luajit, lua54)" ;;
        esac
    done
fi
for build in $BUILDS; do [[ -x "${BIN[$build]}" ]] || die "${BIN[$build]} not found"; done

mkdir -p "$DATA_DIR"
if [[ ! -f "$PCAP" ]]; then
    log "generating $PCAP"
    python3 "$SCRIPT_DIR/gen-pcap.py" --count "$COUNT" --seed "$SEED" --out "$PCAP.tmp" >&2
    mv -f "$PCAP.tmp" "$PCAP"
fi
cat "$PCAP" >/dev/null

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# secs CMD...: run CMD, stdout to $TMP/out; print its wall and CPU seconds.
secs() {
    local TIMEFORMAT='%3R %3U %3S' t
    t=$( { time "$@" >"$TMP/out" 2>"$TMP/err"; } 2>&1 ) || { cat "$TMP/err" >&2; die "failed: $*"; }
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' <<<"$t"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# counts FILE: the first line (queries, bytes) and the sorted per-QTYPE counts.
counts() { { head -n 1 "$1"; tail -n +2 "$1" | awk '{ print $NF }' | sort -n | tr '\n' ' '; echo; } }

dnsjit "$DNSJIT_LUA" "$PCAP" >"$TMP/dnsjit.txt"
want=$(counts "$TMP/dnsjit.txt")
queries=$(head -n 1 "$TMP/dnsjit.txt" | cut -d' ' -f1)
pairs=()
for build in $BUILDS; do
    for style in natural iter; do
        "${BIN[$build]}" script "${STYLE[$style]}" "$PCAP" "${EXTRA[@]}" >"$TMP/ours.txt"
        [[ "$(counts "$TMP/ours.txt")" == "$want" ]] ||
            die "$build $style counts differ from dnsjit's: $(counts "$TMP/ours.txt") vs $want"
        pairs+=("$build:$style")
    done
done
log "every loop counts $queries queries, as dnsjit does"

declare -A WALL CPU OURS THEIRS
for ((i = 0; i < RUNS; i++)); do
    order=(dnsjit "${pairs[@]}")
    if ((i % 2)); then mapfile -t order < <(printf '%s\n' "${order[@]}" | tac); fi
    declare -A took=()
    for what in "${order[@]}"; do
        if [[ "$what" == dnsjit ]]; then
            took[$what]=$(secs dnsjit "$DNSJIT_LUA" "$PCAP")
        else
            took[$what]=$(secs "${BIN[${what%%:*}]}" script "${STYLE[${what#*:}]}" "$PCAP" "${EXTRA[@]}")
        fi
    done
    d=${took[dnsjit]}
    for pair in "${pairs[@]}"; do
        o=${took[$pair]}
        OURS[$pair]+="${o% *} "; THEIRS[$pair]+="${d% *} "
        WALL[$pair]+="$(awk -v o="${o% *}" -v d="${d% *}" 'BEGIN { printf "%.4f", d / o }') "
        CPU[$pair]+="$(awk -v o="${o#* }" -v d="${d#* }" 'BEGIN { printf "%.4f", d / o }') "
    done
done

printf '\n%-8s %-8s %9s %12s %12s %8s %8s\n' build style queries "ours q/s" "dnsjit q/s" ratio "cpu ratio"
for pair in "${pairs[@]}"; do
    mo=$(tr ' ' '\n' <<<"${OURS[$pair]}" | grep . | median)
    md=$(tr ' ' '\n' <<<"${THEIRS[$pair]}" | grep . | median)
    mr=$(tr ' ' '\n' <<<"${WALL[$pair]}" | grep . | median)
    mc=$(tr ' ' '\n' <<<"${CPU[$pair]}" | grep . | median)
    awk -v b="${pair%%:*}" -v s="${pair#*:}" -v n="$queries" -v mo="$mo" -v md="$md" -v mr="$mr" -v mc="$mc" 'BEGIN {
        printf "%-8s %-8s %9d %12.0f %12.0f %7.2fx %7.2fx\n", b, s, n, n / mo, n / md, mr, mc }'
done
[[ "$ONE_THREAD" == 1 ]] && echo "(ours on one thread: input.mmpcap helper = false)" || echo "(ours with input.mmpcap's helper thread: compare the cpu ratio)"

# filter.lua cost per object, on one thread (the helper's CPU grows with the
# run's length and would be counted as the Lua stage's).
echo
for build in $BUILDS; do
    without=() with=()
    for ((i = 0; i < RUNS; i++)); do
        t=$(secs "${BIN[$build]}" run configs/dns-null.toml -q --set 0.path="$PCAP" --set 0.helper=false); without+=("${t#* }")
        t=$(secs "${BIN[$build]}" run benches/lua/dns-filter-lua-null.toml -q --set 0.path="$PCAP" --set 0.helper=false); with+=("${t#* }")
    done
    mw=$(printf '%s\n' "${with[@]}" | median)
    mn=$(printf '%s\n' "${without[@]}" | median)
    awk -v b="$build" -v n="$queries" -v a="$mw" -v c="$mn" 'BEGIN {
        printf "%-8s filter.lua returning true: %.1f ns per object (CPU %.3f s with, %.3f s without, %d objects)\n",
            b, (a - c) / n * 1e9, a, c, n }'
done
