#!/usr/bin/env bash
# Compressed captures and dnstap input, whole processes (docs/benchmarks.md).
#
# Usage: benches/compressed.sh              (run it under `cpu-lock bench` on a shared machine)
#        COUNT=2000000 RUNS=3 SKIP_BUILD=1 benches/compressed.sh
#
# For each codec (zstd, lz4) on the same generated capture, compressed by
# the codec's own command-line tool at its default level, three sides:
#   ours     dnsluice run configs/dns-null.toml on the compressed file:
#            read (input.mmpcap, or input.fpcap) -> filter.layer ->
#            filter.dns -> output.null (a count)
#   dnsjit   what a user of Debian's dnsjit (built without zstd/lz4) does:
#            `CODEC -dc F > plain.pcap`, then benches/dnsjit/dns-parse.lua on
#            plain.pcap (the same read -> layer -> DNS header and question
#            parse -> count); its wall is both steps
#   floor    `CODEC -dc F > /dev/null`: the reference decompressor alone
# Ratios per round (medians printed): dnsjit/ours (goal >= 1.5) and
# ours/floor (goal <= 1.15). Then dnstap input: the capture written as a
# Frame Streams file by output.dnstap (outside the timing), read by
# input.dnstap -> output.null: messages/s.
#
# Every timed side's count is checked: ours by a --stats-json check run
# (filter.dns out = COUNT), dnsjit by its printed count, dnstap by the
# output.null count. CPU = user + system of the process and its threads.
#
# Environment: COUNT (packets, default 5000000), SEED (1), RUNS (5),
#   SKIP_BUILD=1, DATA_DIR (<repo>/bench-data), DNSLUICE_BIN
#   (<repo>/target/release/dnsluice, or $CARGO_TARGET_DIR/release/dnsluice),
#   INPUTS ("input.mmpcap input.fpcap"), CODECS ("zstd lz4").
set -euo pipefail
export LC_ALL=C

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
COUNT="${COUNT:-5000000}"
SEED="${SEED:-1}"
RUNS="${RUNS:-5}"
INPUTS="${INPUTS:-input.mmpcap input.fpcap}"
CODECS="${CODECS:-zstd lz4}"
DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
BIN="${DNSLUICE_BIN:-${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/dnsluice}"
GEN="$REPO_ROOT/benches/gen-pcap.py"
DNS_LUA="$REPO_ROOT/benches/dnsjit/dns-parse.lua"
CONFIG="$REPO_ROOT/configs/dns-null.toml"

die() { echo "compressed: error: $*" >&2; exit 1; }
log() { echo "compressed: $*" >&2; }

[[ "$COUNT" =~ ^[1-9][0-9]*$ ]] || die "COUNT must be a positive integer"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for tool in dnsjit zstd lz4 python3; do
    command -v "$tool" >/dev/null || die "$tool is missing (.ci/run installs it)"
done
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release
fi
[[ -x "$BIN" ]] || die "$BIN not found"

mkdir -p "$DATA_DIR"
TMP="$(mktemp -d "$DATA_DIR/compressed.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# The capture (up to a million distinct packets, ids and times varying on
# top: the compressors see real variety, not a short cycle), then one file
# per codec.
PCAP="$DATA_DIR/compressed-$COUNT.pcap"
POOL=$((COUNT < 1000000 ? COUNT : 1000000))
want="count=$COUNT seed=$SEED pool=$POOL gen=$(sha256sum "$GEN" | cut -c1-16)"
if [[ ! -f "$PCAP" || "$(cat "$PCAP.stamp" 2>/dev/null)" != "$want" ]]; then
    log "generating $PCAP ($want)"
    python3 "$GEN" --count "$COUNT" --seed "$SEED" --pool "$POOL" --out "$PCAP.tmp" >&2
    mv -f "$PCAP.tmp" "$PCAP"
    rm -f "$PCAP".zst "$PCAP".lz4
    echo "$want" >"$PCAP.stamp"
fi
for codec in $CODECS; do
    [[ -f "$PCAP.$codec" ]] || "$codec" -q -c "$PCAP" >"$PCAP.$codec.tmp"
    [[ -f "$PCAP.$codec.tmp" ]] && mv -f "$PCAP.$codec.tmp" "$PCAP.$codec"
    cat "$PCAP.$codec" >/dev/null # in the page cache before the first run
done

# timed VAR CMD: runs CMD (a shell string) with its stdout in $TMP/out;
# sets VAR_s (wall seconds) and VAR_c (user + system seconds).
timed() {
    local var=$1 cmd=$2
    local TIMEFORMAT='%R %U %S' rc=0 wall user sys
    { time bash -c "$cmd" >"$TMP/out" 2>"$TMP/err" || rc=$?; } 2>"$TMP/time"
    ((rc == 0)) || { tail -n 20 "$TMP/err" >&2; die "failed: $cmd"; }
    read -r wall user sys <"$TMP/time"
    printf -v "${var}_s" '%s' "$wall"
    printf -v "${var}_c" '%s' "$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')"
}
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# stage_count STATS.json MODULE in|out: that stage's count.
stage_count() {
    python3 -c 'import json, sys
print([s[sys.argv[3]] for s in json.load(open(sys.argv[1]))["stages"] if s["module"] == sys.argv[2]][0])' "$@"
}

log "$(nproc) cpus; dnsjit $(dpkg-query -W -f='${Version}' dnsjit 2>/dev/null); $(zstd --version | head -1); $(lz4 --version 2>&1 | head -1)"
log "files: $(ls -l "$PCAP" | awk '{print $5}') bytes plain, $(for c in $CODECS; do printf '%s %s bytes; ' "$c" "$(stat -c %s "$PCAP.$c")"; done)"
log "load before: $(uptime)"
printf '\n%-6s %-13s %8s %8s %8s %8s %8s %8s %7s %7s %10s\n' codec input "ours s" "djit s" "floor s" "ours cpu" "djit cpu" "flr cpu" djit/us us/floor "ours msg/s"
for codec in $CODECS; do
    F="$PCAP.$codec"
    for input in $INPUTS; do
        sed "s/^module = \"input.mmpcap\"/module = \"$input\"/" "$CONFIG" >"$TMP/ours.toml"
        ours="$(printf '%q run %q --set 0.path=%q -q' "$BIN" "$TMP/ours.toml" "$F")"
        eval "$ours --stats-json $TMP/stats.json"
        got=$(stage_count "$TMP/stats.json" filter.dns out)
        [[ "$got" == "$COUNT" ]] || die "ours ($input, $codec): filter.dns out = $got, expected $COUNT"
        dnsjit_cmd="$codec -q -dc $(printf %q "$F") > $TMP/plain.pcap && dnsjit $(printf %q "$DNS_LUA") $TMP/plain.pcap $COUNT"
        floor_cmd="$codec -q -dc $(printf %q "$F") > /dev/null"
        ratios_d=() ratios_f=() os=() ds=() fs=() oc=() dc=() fc=()
        for ((i = 0; i < RUNS; i++)); do
            # Rotating order, so drift on a busy machine hits every side alike.
            for side in $( ((i % 3 == 0)) && echo "o d f" || { ((i % 3 == 1)) && echo "d f o"; } || echo "f o d"); do
                case $side in
                    o) timed o "$ours" ;;
                    d) timed d "$dnsjit_cmd"; [[ "$(tail -n 1 "$TMP/out" | tr -d '[:space:]')" == "$COUNT" ]] || die "dnsjit count: $(tail -n 1 "$TMP/out")" ;;
                    f) timed f "$floor_cmd" ;;
                esac
            done
            rm -f "$TMP/plain.pcap"
            os+=("$o_s") ds+=("$d_s") fs+=("$f_s") oc+=("$o_c") dc+=("$d_c") fc+=("$f_c")
            ratios_d+=("$(awk -v a="$d_s" -v b="$o_s" 'BEGIN { printf "%.4f", a / b }')")
            ratios_f+=("$(awk -v a="$o_s" -v b="$f_s" 'BEGIN { printf "%.4f", a / b }')")
        done
        mo=$(printf '%s\n' "${os[@]}" | median)
        printf '%-6s %-13s %8s %8s %8s %8s %8s %8s %7s %7s %10.0f\n' "$codec" "$input" "$mo" \
            "$(printf '%s\n' "${ds[@]}" | median)" "$(printf '%s\n' "${fs[@]}" | median)" \
            "$(printf '%s\n' "${oc[@]}" | median)" "$(printf '%s\n' "${dc[@]}" | median)" \
            "$(printf '%s\n' "${fc[@]}" | median)" "$(printf '%s\n' "${ratios_d[@]}" | median)" \
            "$(printf '%s\n' "${ratios_f[@]}" | median)" "$(awk -v n="$COUNT" -v s="$mo" 'BEGIN { print n / s }')"
    done
done

# dnstap input: the capture as Frame Streams (written once, untimed).
TAP="$DATA_DIR/compressed-$COUNT.dnstap"
if [[ ! -f "$TAP" || "$TAP" -ot "$PCAP" ]]; then
    printf '[[stage]]\nmodule = "input.mmpcap"\npath = "%s"\n[[stage]]\nmodule = "filter.layer"\n[[stage]]\nmodule = "filter.dns"\n[[stage]]\nmodule = "output.dnstap"\npath = "%s"\n' "$PCAP" "$TAP.tmp" >"$TMP/to-tap.toml"
    "$BIN" run "$TMP/to-tap.toml" -q
    mv -f "$TAP.tmp" "$TAP"
fi
cat "$TAP" >/dev/null
printf '[[stage]]\nmodule = "input.dnstap"\npath = "%s"\n[[stage]]\nmodule = "output.null"\n' "$TAP" >"$TMP/tap.toml"
"$BIN" run "$TMP/tap.toml" -q --stats-json "$TMP/stats.json"
got=$(stage_count "$TMP/stats.json" output.null in)
[[ "$got" == "$COUNT" ]] || die "input.dnstap: output.null in = $got, expected $COUNT"
ts=()
tc=()
for ((i = 0; i < RUNS; i++)); do
    timed t "$(printf '%q run %q -q' "$BIN" "$TMP/tap.toml")"
    ts+=("$t_s") tc+=("$t_c")
done
mt=$(printf '%s\n' "${ts[@]}" | median)
printf '\ndnstap file %s bytes, %s messages: input.dnstap -> output.null %s s (cpu %s s), %.0f messages/s\n' \
    "$(stat -c %s "$TAP")" "$COUNT" "$mt" "$(printf '%s\n' "${tc[@]}" | median)" "$(awk -v n="$COUNT" -v s="$mt" 'BEGIN { print n / s }')"
log "load after: $(uptime)"
