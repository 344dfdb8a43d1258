#!/usr/bin/env bash
# Lua loops, whole processes: dnsluice's Lua bindings vs Debian's dnsjit.
#
# Usage: benches/lua-vs-dnsjit.sh
#        COUNT=2000000 RUNS=5 SKIP_BUILD=1 benches/lua-vs-dnsjit.sh
#
# 1. qname-qtype: for every DNS query of the same pcap, read the QNAME as a
#    Lua string and the QTYPE, count queries per QTYPE, sum the QNAME lengths.
#    Ours: benches/lua/qname-qtype.lua (input.mmpcap -> filter.layer ->
#    filter.dns pulled by a Lua `for obj in dns:iter()` loop, obj.dns.qname,
#    obj.dns.qtype). dnsjit: benches/dnsjit/qname-qtype.lua (input.mmpcap ->
#    filter.layer, dns:parse_header(), dns:parse_q(), label.tostring()).
#    Unit: DNS queries/s (wall); ratio = ours/dnsjit in wall time, cpu ratio
#    the same in CPU time (user + system), both medians of per-round ratios
#    (runs alternate so drift hits both sides alike).
# 2. filter.lua cost: configs/dns-null.toml with and without a filter.lua
#    stage whose function returns true (benches/lua/dns-filter-lua-null.toml);
#    (median CPU time with - median CPU time without) / messages, in ns per object.
#
# Environment: COUNT (packets, default 2000000), RUNS (default 5), SEED (1),
# SKIP_BUILD=1 (use the existing target/release/dnsluice), DATA_DIR.
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

COUNT="${COUNT:-2000000}"
RUNS="${RUNS:-5}"
SEED="${SEED:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
PCAP="$DATA_DIR/lua-$COUNT.pcap"
BIN="${DNSLUICE_BIN:-$REPO_ROOT/target/release/dnsluice}"
OURS_LUA="$SCRIPT_DIR/lua/qname-qtype.lua"
DNSJIT_LUA="$SCRIPT_DIR/dnsjit/qname-qtype.lua"

die() { echo "lua-vs-dnsjit: error: $*" >&2; exit 1; }
log() { echo "lua-vs-dnsjit: $*" >&2; }

command -v dnsjit >/dev/null || die "dnsjit not found (apt-get install dnsjit)"
if [[ "$SKIP_BUILD" != 1 ]]; then
    log "cargo build --release"
    cargo build --release
fi
[[ -x "$BIN" ]] || die "$BIN not found"

mkdir -p "$DATA_DIR"
if [[ ! -f "$PCAP" ]]; then
    log "generating $PCAP"
    python3 "$SCRIPT_DIR/gen-pcap.py" --count "$COUNT" --seed "$SEED" --out "$PCAP.tmp" >&2
    mv -f "$PCAP.tmp" "$PCAP"
fi
cat "$PCAP" >/dev/null

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# secs CMD...: run CMD, stdout to $TMP/out; print its wall seconds and CPU
# seconds (user + system: on a machine shared with other work, CPU time
# moves less than wall time).
secs() {
    local TIMEFORMAT='%3R %3U %3S' t
    t=$( { time "$@" >"$TMP/out" 2>"$TMP/err"; } 2>&1 ) || { cat "$TMP/err" >&2; die "failed: $*"; }
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' <<<"$t"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Both sides must count the same queries.
"$BIN" script "$OURS_LUA" "$PCAP" >"$TMP/ours.txt"
dnsjit "$DNSJIT_LUA" "$PCAP" >"$TMP/dnsjit.txt"
ours_q=$(head -n 1 "$TMP/ours.txt" | cut -d' ' -f1)
dnsjit_q=$(head -n 1 "$TMP/dnsjit.txt" | cut -d' ' -f1)
[[ "$ours_q" == "$dnsjit_q" ]] || die "query counts differ: ours $ours_q, dnsjit $dnsjit_q"
log "both count $ours_q queries"

ours=() theirs=() ratios=() cpu_ratios=()
for ((i = 0; i < RUNS; i++)); do
    if ((i % 2 == 0)); then
        o=$(secs "$BIN" script "$OURS_LUA" "$PCAP"); d=$(secs dnsjit "$DNSJIT_LUA" "$PCAP")
    else
        d=$(secs dnsjit "$DNSJIT_LUA" "$PCAP"); o=$(secs "$BIN" script "$OURS_LUA" "$PCAP")
    fi
    ours+=("${o% *}"); theirs+=("${d% *}")
    ratios+=("$(awk -v o="${o% *}" -v d="${d% *}" 'BEGIN { printf "%.4f", d / o }')")
    cpu_ratios+=("$(awk -v o="${o#* }" -v d="${d#* }" 'BEGIN { printf "%.4f", d / o }')")
done
mo=$(printf '%s\n' "${ours[@]}" | median)
md=$(printf '%s\n' "${theirs[@]}" | median)
mr=$(printf '%s\n' "${ratios[@]}" | median)
mc=$(printf '%s\n' "${cpu_ratios[@]}" | median)
printf '\n%-12s %9s %12s %12s %8s %8s\n' pair queries "ours q/s" "dnsjit q/s" ratio "cpu ratio"
awk -v n="$ours_q" -v mo="$mo" -v md="$md" -v mr="$mr" -v mc="$mc" 'BEGIN {
    printf "%-12s %9d %12.0f %12.0f %7.2fx %7.2fx\n", "qname-qtype", n, n / mo, n / md, mr, mc }'

# filter.lua cost per object.
without=() with=()
for ((i = 0; i < RUNS; i++)); do
    # One thread (no mmpcap helper): the helper's CPU grows with the run's
    # length, and would be counted as the Lua stage's.
    t=$(secs "$BIN" run configs/dns-null.toml -q --set 0.path="$PCAP" --set 0.helper=false); without+=("${t#* }")
    t=$(secs "$BIN" run benches/lua/dns-filter-lua-null.toml -q --set 0.path="$PCAP" --set 0.helper=false); with+=("${t#* }")
done
mw=$(printf '%s\n' "${with[@]}" | median)
mn=$(printf '%s\n' "${without[@]}" | median)
awk -v n="$ours_q" -v a="$mw" -v b="$mn" 'BEGIN {
    printf "\nfilter.lua returning true: %.1f ns per object (CPU %.3f s with, %.3f s without, %d objects)\n",
        (a - b) / n * 1e9, a, b, n }'
