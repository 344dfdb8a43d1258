#!/usr/bin/env bash
# Bulk lookups with pinned nameservers over DNS-over-TLS: dnsluice's
# sticky scheduler, dnsluice's own fifo scheduler (the design of ZDNS's,
# written by us: benches/lookup-experiment.sh) and ZDNS 2.1.1 itself, on
# the same input, alternating, each a whole process.
#
# Usage: bash tests/servers/up.sh && cpu-lock bench benches/lookup-vs-zdns.sh
#        LINES=5000 ROUNDS=5 SKIP_BUILD=1 benches/lookup-vs-zdns.sh
#
# The input: LINES lines `n<i>.lookup.test,NAMESERVER` (benches/lookup-input.py,
# SEED), the nameserver drawn from dnsdist's DoT on 127.0.0.1 and the slow
# nameserver in front of it on 127.0.0.2 (+20 ms each way): the pinned-dot
# case of benches/lookup-experiment.sh. THREADS workers (ZDNS: --threads).
# dnsluice verifies the server's certificate (--ca-file, --tls-name); ZDNS
# 2.1.1 cannot be given a TLS name to verify against, so it runs --tls
# without verifying.
#
# Every run must give one record per line, or the benchmark fails; a run
# where a name is not NOERROR (the zone has n0 .. n99999) is printed with
# its statuses and left out of the medians. Each run is timed by /usr/bin/time
# (wall, user + system CPU, peak RSS); dnsluice's connections and TLS
# handshakes come from its --stats-json (ZDNS's are not counted). Prints
# every run, then per side the medians and the ratios of the median wall
# times. ZDNS: $ZDNS, else /opt/zdns/zdns, else `zdns` on the PATH
# (../shared/tools/zdns/build.sh builds it).
#
# Environment: LINES=20000 THREADS=100 ROUNDS=3 SEED=1 SKIP_BUILD=1
#   SIDES="sticky fifo zdns"  OUT=DIR (default bench-data/lookup-zdns)
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=${LINES:-20000}
THREADS=${THREADS:-100}
ROUNDS=${ROUNDS:-3}
SEED=${SEED:-1}
SIDES=${SIDES:-"sticky fifo zdns"}
OUT=${OUT:-bench-data/lookup-zdns}
BIN=${DNSLUICE_BIN:-target/release/dnsluice}
# shellcheck source=benches/servers-env.sh
source benches/servers-env.sh
if [[ -z ${ZDNS:-} ]]; then
    if [[ -x /opt/zdns/zdns ]]; then ZDNS=/opt/zdns/zdns; else ZDNS=$(command -v zdns || true); fi
fi
[[ " $SIDES " != *" zdns "* || -n $ZDNS ]] || { echo "no ZDNS: set ZDNS=, or run ../shared/tools/zdns/build.sh" >&2; exit 1; }
mkdir -p "$OUT"
input=$OUT/pinned-dot.txt
python3 benches/lookup-input.py "$input" "$DOT,$SLOW_DOT" "$LINES" "$SEED"
RUNS=$OUT/runs.jsonl
: >"$RUNS"

# one SIDE ROUND: runs the side once and appends its figures to $RUNS.
one() {
    local side=$1 tag=$1-$2
    case $side in
        sticky | fifo)
            /usr/bin/time -f "%e %U %S %M" -o "$OUT/$tag.time" \
                "$BIN" lookup A --threads "$THREADS" --scheduler "$side" --transport tls \
                --ca-file "$CA_FILE" --tls-name "$TLS_NAME" --input "$input" \
                --output "$OUT/$tag.jsonl" --stats-json "$OUT/$tag.stats.json" -q ;;
        zdns)
            /usr/bin/time -f "%e %U %S %M" -o "$OUT/$tag.time" \
                "$ZDNS" A --tls --threads "$THREADS" -q --input-file "$input" \
                --output-file "$OUT/$tag.jsonl" 2>"$OUT/$tag.log" ;;
        *) echo "unknown side $side" >&2; exit 2 ;;
    esac
    python3 - "$side" "$2" "$OUT/$tag" "$LINES" "$RUNS" <<'PY'
import collections, json, sys
side, rnd, base, lines, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
wall, user, system, rss = open(base + ".time").read().split()
statuses = collections.Counter()
for line in open(base + ".jsonl"):
    r = json.loads(line)
    statuses[r["results"]["A"].get("status", "ERROR") if side == "zdns" else r["status"]] += 1
assert sum(statuses.values()) == lines, f"{side}: {sum(statuses.values())} records for {lines} lines"
run = {"side": side, "round": rnd, "wall_s": float(wall), "cpu_s": float(user) + float(system),
       "rss_mib": int(rss) / 1024, "connections": None, "handshakes": None,
       "clean": statuses["NOERROR"] == lines, "statuses": dict(statuses)}
if side != "zdns":
    s = json.load(open(base + ".stats.json"))
    run["connections"], run["handshakes"] = s["connections_opened"], s["tls_handshakes"]
said = f"{lines} NOERROR" if run["clean"] else f"{dict(statuses)} (left out)"
print(f"{side:7} round {rnd}: {said}, {run['wall_s']:6.2f} s wall, CPU {run['cpu_s']:6.2f} s, "
      f"peak RSS {run['rss_mib']:6.1f} MiB, connections {run['connections']}, TLS handshakes {run['handshakes']}")
open(runs, "a").write(json.dumps(run) + "\n")
PY
}

read -r -a sides <<<"$SIDES"
echo "pinned DoT lookups: $LINES lines over $DOT and $SLOW_DOT (slow), $THREADS workers, $ROUNDS rounds ($(nproc) cores); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < ROUNDS; r++)); do
    for ((i = 0; i < ${#sides[@]}; i++)); do
        one "${sides[$(((i + r) % ${#sides[@]}))]}" "$r"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RUNS" <<'PY'
import json, statistics, sys
everything = [json.loads(l) for l in open(sys.argv[1])]
runs = [r for r in everything if r["clean"]]
sides = list(dict.fromkeys(r["side"] for r in runs))
med = {s: {k: statistics.median(r[k] for r in runs if r["side"] == s and r[k] is not None)
           if any(r[k] is not None for r in runs if r["side"] == s) else None
           for k in ("wall_s", "cpu_s", "rss_mib", "connections", "handshakes")} for s in sides}
print("medians of the runs where every name is NOERROR:")
for s in dict.fromkeys(r["side"] for r in everything):
    left = sum(1 for r in everything if r["side"] == s and not r["clean"])
    if s not in med:
        print(f"  {s:7} no run without a failed name ({left} left out)")
        continue
    m = med[s]
    print(f"  {s:7} {m['wall_s']:6.2f} s wall  CPU {m['cpu_s']:6.2f} s  peak RSS {m['rss_mib']:6.1f} MiB"
          f"  connections {m['connections']}  TLS handshakes {m['handshakes']}  ({left} runs left out)")
for peer in ("fifo", "zdns"):
    if "sticky" in med and peer in med:
        print(f"sticky / {peer}: {med['sticky']['wall_s'] / med[peer]['wall_s']:.2f}x the wall time (medians)")
# A side with failed names in every run still gets its figures, said as such.
for s in dict.fromkeys(r["side"] for r in everything):
    if s in med or "sticky" not in med:
        continue
    mine = [r for r in everything if r["side"] == s]
    wall = statistics.median(r["wall_s"] for r in mine)
    failed = sorted(sum(n for k, n in r["statuses"].items() if k != "NOERROR") for r in mine)
    print(f"  {s}: every run failed names ({failed[0]}..{failed[-1]} of each run's lines); median wall "
          f"{wall:.2f} s, CPU {statistics.median(r['cpu_s'] for r in mine):.2f} s: sticky took "
          f"{med['sticky']['wall_s'] / wall:.2f}x that time")
PY
