#!/usr/bin/env bash
# What making a report costs: a run and a replay, each without and with
# `--report FILE.html --stats-jsonl FILE --stats-interval INTERVAL` (the
# interval statistics and the HTML report), alternating runs, same binary,
# same input. Also what `filter.top` costs in a run (a stage added to the
# pipeline, not part of a report). With WITH=metrics, the "with" side is
# `--metrics-listen 127.0.0.1:PORT` scraped every SCRAPE (100ms) by a
# Python HTTP client for the whole run (what a Prometheus server does).
#
# Usage: benches/report-overhead.sh       (replay pairs need tests/servers/up.sh)
#        SKIP_BUILD=1 RUNS=7 PAIRS="run" benches/report-overhead.sh
#        WITH=metrics PAIRS="run replay" benches/report-overhead.sh
#
# Pairs:
#   run     dnsluice run configs/dns-null.toml (input.mmpcap → filter.layer →
#           filter.dns → output.null) over a generated capture of COUNT queries
#   top     the same pipeline with and without filter.top (its own cost)
#   replay  dnsluice replay of REPLAY_COUNT queries to knot over UDP, as fast
#           as possible (INFLIGHT outstanding)
# For each: median wall time of each side, median CPU time (user + system),
# and the medians of the per-round ratios with/without (1.02 = 2 % more),
# then the same as a Markdown table (docs/benchmarks.md). Every replay must
# have all its queries answered, every "with" run its report and interval
# file (WITH=metrics: at least one scrape; the column counts them), or the
# script stops.
#
# Environment: PAIRS="run top replay" COUNT=20000000 REPLAY_COUNT=200000
#   RUNS=5 INTERVAL=100ms (10 snapshots a second: the default is 1s)
#   INFLIGHT=100 SKIP_BUILD=1 DNSLUICE_BIN=... DATA_DIR=<repo>/bench-data
#   WITH=report|metrics SCRAPE=0.1 (seconds between scrapes)
#   DNSLUICE_SERVERS_DIR (where servers.env is)
set -euo pipefail
export LC_ALL=C
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

PAIRS="${PAIRS:-run top replay}"
COUNT="${COUNT:-20000000}"
REPLAY_COUNT="${REPLAY_COUNT:-200000}"
RUNS="${RUNS:-5}"
INTERVAL="${INTERVAL:-100ms}"
INFLIGHT="${INFLIGHT:-100}"
WITH="${WITH:-report}"
SCRAPE="${SCRAPE:-0.1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
TARGET="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
BIN="${DNSLUICE_BIN:-$TARGET/release/dnsluice}"

if [[ $SKIP_BUILD != 1 ]]; then
    cargo build --release --bin dnsluice
fi
mkdir -p "$DATA_DIR"
PCAP="$DATA_DIR/big-$COUNT.pcap"
# Only the captures the pairs use (the run's is 1.97 GB at the default COUNT).
if [[ " $PAIRS " == *" run "* || " $PAIRS " == *" top "* ]]; then
    [[ -s $PCAP ]] || python3 benches/gen-pcap.py --count "$COUNT" --out "$PCAP" >&2
fi
RPCAP="$DATA_DIR/replay-$REPLAY_COUNT.pcap"
if [[ " $PAIRS " == *" replay "* ]]; then
    [[ -s $RPCAP ]] || python3 benches/gen-pcap.py --count "$REPLAY_COUNT" --zone lookup.test --edns 0 --out "$RPCAP" >&2
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# timed NAME CMD...: runs CMD, appends its wall and CPU seconds to NAME.wall / NAME.cpu.
timed() {
    local name=$1
    shift
    rm -f "$TMP/r.html" "$TMP/r.jsonl" "$TMP/s.json" "$TMP/scrapes"
    local scraper=
    if [[ $name == with && $WITH == metrics ]]; then
        scrape_loop &
        scraper=$!
    fi
    # Wall time and the child's CPU time (user + system, from wait4) to the
    # microsecond: /usr/bin/time rounds both to 10 ms.
    python3 -c 'import os, subprocess, sys, time
t = time.perf_counter()
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - t
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(f"failed: {sys.argv[2:]}")
open(sys.argv[1], "w").write(f"{wall:.6f} {usage.ru_utime + usage.ru_stime:.6f}\n")' "$TMP/t" "$@"
    [[ -n $scraper ]] && kill "$scraper" && wait "$scraper" 2>/dev/null || true
    awk '{print $1}' "$TMP/t" >> "$TMP/$name.wall"
    awk '{print $2}' "$TMP/t" >> "$TMP/$name.cpu"
    check "$name"
}

# scrape_loop: GETs the metrics endpoint every SCRAPE seconds until killed,
# writing the count of answered scrapes to $TMP/scrapes.
METRICS_ADDR=127.0.0.1:$((19000 + RANDOM % 1000))
scrape_loop() {
    exec python3 -c 'import sys, time, urllib.request
url, out, period = sys.argv[1], sys.argv[2], float(sys.argv[3])
n = 0
while True:
    t = time.monotonic()
    try:
        urllib.request.urlopen(url, timeout=1).read()
        n += 1
        open(out, "w").write(str(n))
    except OSError:
        pass
    time.sleep(max(0.0, period - (time.monotonic() - t)))' "http://$METRICS_ADDR/metrics" "$TMP/scrapes" "$SCRAPE"
}

# check NAME: the run did its work — every query answered (a replay), and
# the "with" side wrote its report and interval file.
check() {
    if [[ -f $TMP/s.json ]]; then
        python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
if "sent" in s:
    assert s["answered"] == s["sent"] == int(sys.argv[2]), ("not all answered", s["sent"], s["answered"], s["timeouts"], s["errors"])' \
            "$TMP/s.json" "$REPLAY_COUNT"
    fi
    if [[ $1 == with && $WITH == metrics ]]; then
        [[ -s $TMP/scrapes ]] || { echo "never scraped" >&2; exit 1; }
        cat "$TMP/scrapes" >> "$TMP/intervals"
        echo >> "$TMP/intervals"
    elif [[ $1 == with && $CHECK_REPORT == 1 ]]; then
        [[ -s $TMP/r.html && -s $TMP/r.jsonl ]] || { echo "no report written" >&2; exit 1; }
        local intervals
        intervals=$(grep -c '"type":"interval"' "$TMP/r.jsonl")
        echo "$intervals" >> "$TMP/intervals"
    fi
}

# with_flags: what the "with" side adds (WITH=report or WITH=metrics).
with_flags() {
    if [[ $WITH == metrics ]]; then
        echo --metrics-listen "$METRICS_ADDR"
    else
        echo --report "$TMP/r.html" --stats-jsonl "$TMP/r.jsonl" --stats-interval "$INTERVAL"
    fi
}

# pair NAME PLAIN_CMD... -- WITH_CMD...: alternating runs; prints the figures.
pair() {
    local name=$1
    shift
    local plain=() with=()
    while [[ $1 != -- ]]; do plain+=("$1"); shift; done
    shift
    with=("$@")
    rm -f "$TMP"/plain.* "$TMP"/with.* "$TMP/ratio" "$TMP/intervals"
    for ((i = 0; i < RUNS; i++)); do
        if ((i % 2 == 0)); then
            timed plain "${plain[@]}"; timed with "${with[@]}"
        else
            timed with "${with[@]}"; timed plain "${plain[@]}"
        fi
        paste <(tail -1 "$TMP/with.wall") <(tail -1 "$TMP/plain.wall") | awk '{print $1 / $2}' >> "$TMP/ratio"
    done
    paste "$TMP/with.cpu" "$TMP/plain.cpu" | awk '{print $1 / $2}' > "$TMP/cpuratio"
    local intervals=-
    [[ -s $TMP/intervals ]] && intervals=$(median < "$TMP/intervals")
    printf '%-7s wall %7.4f s -> %7.4f s  cpu %7.4f s -> %7.4f s  ratio wall %.4f cpu %.4f  intervals %s (wall ratios: %s)\n' "$name" \
        "$(median < "$TMP/plain.wall")" "$(median < "$TMP/with.wall")" \
        "$(median < "$TMP/plain.cpu")" "$(median < "$TMP/with.cpu")" \
        "$(median < "$TMP/ratio")" "$(median < "$TMP/cpuratio")" "$intervals" "$(tr '\n' ' ' < "$TMP/ratio")"
    printf '| %s | %.3f s | %.3f s | %+.2f %% | %.3f s | %.3f s | %+.2f %% | %s |\n' "$name" \
        "$(median < "$TMP/plain.wall")" "$(median < "$TMP/with.wall")" "$(median < "$TMP/ratio" | awk '{print ($1 - 1) * 100}')" \
        "$(median < "$TMP/plain.cpu")" "$(median < "$TMP/with.cpu")" "$(median < "$TMP/cpuratio" | awk '{print ($1 - 1) * 100}')" \
        "$intervals" >> "$TMP/table"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); RUNS=$RUNS WITH=$WITH INTERVAL=$INTERVAL SCRAPE=$SCRAPE"
[[ $WITH == metrics ]] && column=scrapes || column=intervals
echo "| pair | wall without | wall with | wall | CPU without | CPU with | CPU | $column |" > "$TMP/table"
echo '|---|---:|---:|---:|---:|---:|---:|---:|' >> "$TMP/table"
for p in $PAIRS; do
    CHECK_REPORT=1
    case $p in
    run)
        # shellcheck disable=SC2046
        pair "run" "$BIN" run configs/dns-null.toml --set "0.path=$PCAP" -q -- \
            "$BIN" run configs/dns-null.toml --set "0.path=$PCAP" -q $(with_flags)
        ;;
    top)
        CHECK_REPORT=0
        printf '[[stage]]\nmodule = "input.mmpcap"\npath = "%s"\n[[stage]]\nmodule = "filter.layer"\n[[stage]]\nmodule = "filter.dns"\n[[stage]]\nmodule = "filter.top"\n[[stage]]\nmodule = "output.null"\n' "$PCAP" > "$TMP/top.toml"
        pair "top" "$BIN" run configs/dns-null.toml --set "0.path=$PCAP" -q -- \
            "$BIN" run "$TMP/top.toml" -q
        ;;
    replay)
        ENV_FILE="${DNSLUICE_SERVERS_DIR:-$REPO_ROOT/target/test-servers}/servers.env"
        [[ -f $ENV_FILE ]] || { echo "no $ENV_FILE: run tests/servers/up.sh first" >&2; exit 1; }
        # shellcheck disable=SC1090
        source "$ENV_FILE"
        # shellcheck disable=SC2046
        pair "replay" "$BIN" replay "$RPCAP" --server "$KNOT" --inflight "$INFLIGHT" -q --stats-json "$TMP/s.json" -- \
            "$BIN" replay "$RPCAP" --server "$KNOT" --inflight "$INFLIGHT" -q --stats-json "$TMP/s.json" $(with_flags)
        ;;
    *) echo "unknown pair $p" >&2; exit 1 ;;
    esac
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$TMP/table"
