#!/usr/bin/env bash
# Iterative resolution on the simulated internet (tests/world), beside
# unbound resolving the same names from the same root hints, in one run.
#
# Usage: bash tests/world/up.sh && benches/iterative-vs-unbound.sh
#        NAMES=20000 SKIP_BUILD=1 benches/iterative-vs-unbound.sh
#
# Cases, each a fresh process (a cold cache) given the names twice: the first
# pass is the cold figure, the second (everything cached) the warm one:
#   dnsluice-udp   dnsluice lookup A --iterative over UDP
#   dnsluice-tcp   the same over TCP (kept connections to the authorities)
#   unbound        a fresh unbound (2 threads, the world's settings and root
#                  hints, iterator only, no qname minimisation) on 127.0.0.1,
#                  asked by dnsperf with 100 queries outstanding (our 100 workers)
#   zdns           ZDNS 2.1.1 --iterative (ZDNS=, default /opt/zdns/zdns when it exists;
#                  ../shared/tools/zdns/build.sh builds it), the world's roots as --name-servers
#
# Environment:
#   NAMES=100000   how many of the world's bench names (bench-names.txt)
#   WORKERS=100    dnsluice workers; dnsperf -q and zdns --threads
#   SKIP_BUILD=1   do not build (target/release/dnsluice must exist)
#   OUT=DIR        inputs, records and stats (default bench-data/iterative)
#   UNBOUND_PORT   port of the benchmark's own unbound (default 53953)
#
# Prints for each case and pass: names, wall seconds, names/s, queries per
# name and the names answered without a query (dnsluice), CPU seconds; for
# each dnsluice run its queries, connections, cache hit rate and queries by
# zone level; then dnsluice's names/s as a ratio to unbound's. Run it on an
# idle machine, through `cpu-lock bench` where sessions share one.
set -euo pipefail
cd "$(dirname "$0")/.."

NAMES=${NAMES:-100000}
WORKERS=${WORKERS:-100}
OUT=${OUT:-bench-data/iterative}
BIN=${DNSLUICE_BIN:-${CARGO_TARGET_DIR:-target}/release/dnsluice}
WORLD_ENV=${DNSLUICE_SERVERS_DIR:-target/test-servers}/world/world.env
UNBOUND_PORT=${UNBOUND_PORT:-53953}
if [[ -z ${ZDNS+x} && -x /opt/zdns/zdns ]]; then ZDNS=/opt/zdns/zdns; fi

[[ -f $WORLD_ENV ]] || { echo "no $WORLD_ENV: run bash tests/world/up.sh first" >&2; exit 1; }
# shellcheck disable=SC1090
source "$WORLD_ENV"
if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet --bin dnsluice
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
head -n "$NAMES" "$WORLD_BENCH_NAMES" >"$OUT/names.txt"
cat "$OUT/names.txt" <(tr '[:lower:]' '[:upper:]' <"$OUT/names.txt") >"$OUT/names-twice.txt"
awk '{ print $1, "A" }' "$OUT/names.txt" >"$OUT/dnsperf.txt"

# cpu_of PID: user+system seconds so far.
cpu_of() {
    python3 -c 'import os, sys
f = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
print("%.2f" % ((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")))' "$1"
}

# One dnsluice process given the names, then the same names in capitals: the
# cache is case-blind and the records keep the spelling, so the lower-case
# records are the cold pass and the capital ones the warm pass. A pass's
# wall time runs from the first query (the earliest record's timestamp less
# its duration) or the end of the cold pass to its last record; its queries
# are the sum of its records' attempts. CPU time is the whole process's.
dnsluice_case() {
    local transport=$1 tag=dnsluice-$1
    /usr/bin/time -f "%e %U %S" -o "$OUT/$tag.time" \
        "$BIN" lookup A --iterative --root-hints "$WORLD_ROOT_HINTS" \
        --transport "$transport" --workers "$WORKERS" --cache-size 4000000 \
        --input "$OUT/names-twice.txt" --output "$OUT/$tag.jsonl" \
        --stats-json "$OUT/$tag.json" -q
    python3 - "$OUT" "$tag" <<'PY'
import datetime, json, sys
out, tag = sys.argv[1:3]
def ts(text):
    day, frac = text.rstrip("Z").split(".")
    t = datetime.datetime.fromisoformat(day).replace(tzinfo=datetime.timezone.utc).timestamp()
    return t + float("0." + frac)
passes = {"cold": [], "warm": []}
for line in open(f"{out}/{tag}.jsonl"):
    r = json.loads(line)
    passes["warm" if r["name"].isupper() else "cold"].append(r)
stats = json.load(open(f"{out}/{tag}.json"))
wall, user, system = map(float, open(f"{out}/{tag}.time").read().split())
start = min(ts(r["timestamp"]) - r["duration_ms"] / 1000 for r in passes["cold"])
cold_end = max(ts(r["timestamp"]) for r in passes["cold"])
summary = {}
# The engine reads ahead (a few hundred names), so the first capital names
# start before the last cold ones end: the warm pass counts those that
# started after the cold pass's end (all but a few hundred).
passes["warm"] = [r for r in passes["warm"] if ts(r["timestamp"]) - r["duration_ms"] / 1000 >= cold_end]
for label, begin in (("cold", start), ("warm", cold_end)):
    records = passes[label]
    n = len(records)
    end = max(ts(r["timestamp"]) for r in records)
    secs = max(end - begin, 1e-6)
    attempts = sum(r["attempts"] for r in records)
    without = sum(r["attempts"] == 0 for r in records)
    statuses = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    print(f"{tag:14} {label:5} {n:7} names {secs:7.2f} s {n / secs:9.0f} names/s "
          f"{attempts / n:5.2f} queries/name  {100 * without / n:5.1f}% without a query  {statuses}")
    summary[label + "_names_per_s"] = n / secs
it = stats["iterative"]
hit_rate = it["cache_hits"] / max(it["cache_hits"] + it["cache_misses"], 1)
print(f"{tag:14} both passes: {wall:.2f} s wall, {user + system:.2f} s CPU; {stats['queries']} queries, "
      f"{stats['connections_opened']} connections opened, {stats['connections_reused']} queries on kept ones; "
      f"cache hit rate {100 * hit_rate:.1f}% ({it['cache_entries']} entries); queries by level: root "
      f"{it['queries_root']}, TLD {it['queries_level1']}, 2nd {it['queries_level2']}, deeper "
      f"{it['queries_level3'] + it['queries_level4'] + it['queries_deeper']}")
json.dump(summary, open(f"{out}/{tag}.summary.json", "w"))
PY
}

unbound_case() {
    local dir=$OUT/unbound
    mkdir -p "$dir"
    cat >"$dir/unbound.conf" <<CONF
server:
    interface: 127.0.0.1@$UNBOUND_PORT
    do-ip6: yes
    num-threads: 2
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "$dir"
    pidfile: "$dir/unbound.pid"
    use-syslog: no
    logfile: "$dir/unbound.log"
    verbosity: 0
    access-control: 127.0.0.0/8 allow
    root-hints: "$WORLD_ROOT_HINTS"
    do-not-query-localhost: no
    module-config: "iterator"
    qname-minimisation: no
    harden-glue: yes
    minimal-responses: yes
    msg-cache-size: 256m
    rrset-cache-size: 512m
    outgoing-range: 4096
    num-queries-per-thread: 2048
    discard-timeout: 0
remote-control:
    control-enable: no
CONF
    unbound -c "$dir/unbound.conf" &
    local pid=$!
    trap 'kill $pid 2>/dev/null || true' RETURN
    for _ in $(seq 50); do
        kdig +timeout=1 +retry=0 @127.0.0.1 -p "$UNBOUND_PORT" . NS >/dev/null 2>&1 && break
        sleep 0.1
    done
    # dnsperf asks every name once per pass; the first pass is cold (the
    # check above cached the root's NS only).
    for pass in cold warm; do
        local before after
        before=$(cpu_of "$pid")
        dnsperf -s 127.0.0.1 -p "$UNBOUND_PORT" -d "$OUT/dnsperf.txt" -n 1 \
            -q "$WORKERS" -t 20 >"$OUT/unbound-$pass.dnsperf" 2>&1
        after=$(cpu_of "$pid")
        python3 - "$OUT/unbound-$pass.dnsperf" "$pass" "$before" "$after" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def num(pattern):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else float("nan")
done = num(r"Queries completed:\s+(\d+)")
secs = num(r"Run time \(s\):\s+([\d.]+)")
qps = num(r"Queries per second:\s+([\d.]+)")
lost = num(r"Queries lost:\s+(\d+)")
cpu = float(sys.argv[4]) - float(sys.argv[3])
codes = " ".join(re.findall(r"Response codes:\s+(.*)", text))
print(f"{'unbound':14} {sys.argv[2]:5} {int(done):7} names {secs:7.2f} s {qps:9.0f} names/s "
      f"{'':>22}  {'':>17}  {'':>18}  cpu {cpu:6.2f} s  lost {int(lost)}  {codes}")
open(sys.argv[1] + ".qps", "w").write(str(qps))
PY
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

zdns_case() {
    [[ -n ${ZDNS:-} ]] || return 0
    local roots
    roots=$(awk '$3 == "A" { printf "%s%s", sep, $4; sep = "," }' "$WORLD_ROOT_HINTS")
    /usr/bin/time -f "%e %U %S" -o "$OUT/zdns.time" \
        "$ZDNS" A --iterative --name-servers "$roots" --threads "$WORKERS" -q \
        --input-file "$OUT/names.txt" --output-file "$OUT/zdns.jsonl" 2>"$OUT/zdns.log" || true
    python3 - "$OUT" "$NAMES" <<'PY'
import collections, json, sys
out, n = sys.argv[1], int(sys.argv[2])
wall, user, sys_ = map(float, open(f"{out}/zdns.time").read().split())
statuses = collections.Counter()
for line in open(f"{out}/zdns.jsonl"):
    statuses[json.loads(line)["results"]["A"]["status"]] += 1
print(f"{'zdns':14} {'cold':5} {n:7} names {wall:7.2f} s {n / wall:9.0f} names/s "
      f"{'':>22}  {'':>17}  {'':>18}  cpu {user + sys_:6.2f} s  {dict(statuses)}")
PY
}

echo "iterative A lookups of $NAMES world names, $WORKERS workers ($(nproc) cores)"
dnsluice_case udp
dnsluice_case tcp
unbound_case
zdns_case
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for tag in ("dnsluice-udp", "dnsluice-tcp"):
    s = json.load(open(f"{out}/{tag}.summary.json"))
    for p in ("cold", "warm"):
        ub = float(open(f"{out}/unbound-{p}.dnsperf.qps").read())
        print(f"{tag} {p}: {s[p + '_names_per_s'] / ub:.2f}x unbound's names/s")
PY
