#!/usr/bin/env bash
# Instructions a packet, ours against Debian's dnsjit, counted by valgrind
# (cachegrind, no cache model): a figure that does not move with the
# machine's load, the host's placement of its cores or the page cache's
# state, as the timed runs of benches/vs-dnsjit.sh do. Each side runs the
# same pair at two sizes of one generated capture; what a packet costs is
# the difference between the two counts over the difference in packets, so
# that starting up (LuaJIT's, our registry's) drops out, and is shown apart.
#
# Usage: benches/instructions.sh
#        PAIRS="dns-parse" SIZES="500000 1000000" SKIP_BUILD=1 benches/instructions.sh
#
# Pairs (as in benches/vs-dnsjit.sh):
#   mmpcap     configs/layer-null.toml  vs  dnsjit/layer-count.lua mmpcap
#   dns-parse  configs/dns-null.toml    vs  dnsjit/dns-parse.lua
#
# Environment: PAIRS ("mmpcap dns-parse"), SIZES (two packet counts,
# "1000000 2000000"; benches/gen-pcap.py with SEED, default 1), DATA_DIR
# (bench-data/instructions), SKIP_BUILD=1, DNSLUICE_BIN (target/release/dnsluice).
#
# Both sides run as vs-dnsjit.sh runs them (ours with input.mmpcap's helper
# thread: valgrind counts every thread's instructions, as the CPU columns
# there count every thread's time). Every run must handle all its packets:
# ours is checked from its --stats-json, dnsjit's scripts check their own
# count. Instructions are not time: a count says how much work each side
# asks of the processor, not how fast the processor does it (a chain of
# dependent loads or a mispredicted branch costs more than its one
# instruction); docs/benchmarks.md gives both.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PAIRS=${PAIRS:-mmpcap dns-parse}
SIZES=${SIZES:-1000000 2000000}
SEED=${SEED:-1}
DATA_DIR=${DATA_DIR:-$ROOT/bench-data/instructions}
BIN=${DNSLUICE_BIN:-$ROOT/target/release/dnsluice}

die() {
    echo "instructions: $*" >&2
    exit 1
}

read -r small large extra <<< "$SIZES"
[[ ${small:-} =~ ^[0-9]+$ && ${large:-} =~ ^[0-9]+$ && -z ${extra:-} ]] ||
    die "SIZES takes two packet counts (got '$SIZES')"
((small < large)) || die "SIZES: the first count must be the smaller ($SIZES)"
for pair in $PAIRS; do
    case $pair in
        mmpcap | dns-parse) ;;
        *) die "unknown pair '$pair' (known: mmpcap dns-parse)" ;;
    esac
done
for tool in valgrind dnsjit python3; do
    command -v "$tool" > /dev/null || die "$tool is not installed (apt-get install $tool)"
done
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    cargo build --release --bin dnsluice
fi
[[ -x $BIN ]] || die "$BIN not found (build it, or unset SKIP_BUILD)"
mkdir -p "$DATA_DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

capture() {
    echo "$DATA_DIR/capture-$1-seed$SEED.pcap"
}
for n in $small $large; do
    [[ -s $(capture "$n") ]] ||
        python3 benches/gen-pcap.py --count "$n" --seed "$SEED" --out "$(capture "$n")" >&2
done

# The instructions valgrind counted for a command (all its threads).
count() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" \
        > "$TMP/out" 2> "$TMP/valgrind" || {
        cat "$TMP/valgrind" >&2
        die "failed: $*"
    }
    sed -n 's/^==[0-9]*== I *refs: *//p' "$TMP/valgrind" | tr -d ,
}

# Our run of `config` on a capture of n packets; fails unless the stage that
# must see every packet (`stage`, its output count) saw n.
ours() {
    local config=$1 stage=$2 n=$3
    count "$BIN" run "$config" --set "0.path=$(capture "$n")" -q --stats-json "$TMP/stats.json"
    python3 - "$TMP/stats.json" "$stage" "$n" <<'PY' >&2 || die "ours on $(capture "$n"): lost packets"
import json, sys
stats, module, n = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
out = [s["out"] for s in stats["stages"] if s["module"] == module]
if out != [n]:
    sys.exit(f"{module} passed on {out}, not {n}")
PY
}

# dnsjit's run of a pair on a capture of n packets (its scripts check n).
theirs() {
    local pair=$1 n=$2
    case $pair in
        mmpcap)
            count dnsjit benches/dnsjit/layer-count.lua mmpcap "$(capture "$n")"
            [[ $(cat "$TMP/out") == "$n" ]] || die "dnsjit counted $(cat "$TMP/out") packets, not $n"
            ;;
        dns-parse) count dnsjit benches/dnsjit/dns-parse.lua "$(capture "$n")" "$n" ;;
    esac
}

echo "instructions: $(valgrind --version) (cachegrind), dnsjit $(dpkg-query -W -f='${Version}' dnsjit 2>/dev/null || echo '?'), captures of $small and $large packets (gen-pcap.py, seed $SEED)"
printf '%-10s %14s %16s %8s %14s %16s\n' pair "ours /packet" "dnsjit /packet" ratio "ours startup" "dnsjit startup"
for pair in $PAIRS; do
    case $pair in
        mmpcap) config=configs/layer-null.toml stage=filter.layer ;;
        dns-parse) config=configs/dns-null.toml stage=filter.dns ;;
    esac
    ours_small=$(ours "$config" "$stage" "$small")
    ours_large=$(ours "$config" "$stage" "$large")
    theirs_small=$(theirs "$pair" "$small")
    theirs_large=$(theirs "$pair" "$large")
    python3 - "$pair" "$small" "$large" "$ours_small" "$ours_large" "$theirs_small" "$theirs_large" <<'PY'
import sys
pair = sys.argv[1]
small, large, ours_small, ours_large, theirs_small, theirs_large = map(int, sys.argv[2:])
ours = (ours_large - ours_small) / (large - small)
theirs = (theirs_large - theirs_small) / (large - small)
print(f"{pair:<10} {ours:14.1f} {theirs:16.1f} {theirs / ours:7.2f}x "
      f"{(ours_small - ours * small) / 1e6:12.1f} M {(theirs_small - theirs * small) / 1e6:14.1f} M")
PY
done
