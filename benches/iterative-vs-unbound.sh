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
# name and cache hit rate (dnsluice), connections opened, CPU seconds; then
# dnsluice's names/s as a ratio to unbound's. Run it on an idle machine.
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
cat "$OUT/names.txt" "$OUT/names.txt" >"$OUT/names-twice.txt"
awk '{ print $1, "A" }' "$OUT/names.txt" >"$OUT/dnsperf.txt"

# cpu_of PID: user+system seconds so far.
cpu_of() {
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"
}

# One dnsluice run over the names twice; the stats of each pass come from
# --stats-json of a run over the first half alone and of the whole.
dnsluice_case() {
    local transport=$1 tag=dnsluice-$1
    for pass in cold both; do
        local input=$OUT/names.txt
        [[ $pass == both ]] && input=$OUT/names-twice.txt
        /usr/bin/time -f "%e %U %S" -o "$OUT/$tag-$pass.time" \
            "$BIN" lookup A --iterative --root-hints "$WORLD_ROOT_HINTS" \
            --transport "$transport" --workers "$WORKERS" --cache-size 4000000 \
            --input "$input" --output "$OUT/$tag-$pass.jsonl" \
            --stats-json "$OUT/$tag-$pass.json" -q
    done
    python3 - "$OUT" "$tag" "$NAMES" <<'PY'
import json, sys
out, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def load(p):
    s = json.load(open(f"{out}/{tag}-{p}.json"))
    wall, user, sys_ = map(float, open(f"{out}/{tag}-{p}.time").read().split())
    return s, wall, user + sys_
cold, cw, cc = load("cold")
both, bw, bc = load("both")
it_c, it_b = cold["iterative"], both["iterative"]
def row(label, names, secs, cpu, queries, hits, misses, conns, statuses):
    rate = hits / max(hits + misses, 1)
    print(f"{tag:14} {label:5} {names:7} names {secs:7.2f} s {names / max(secs, 1e-9):9.0f} names/s "
          f"{queries / max(names, 1):5.2f} queries/name  cache hits {100 * rate:5.1f}%  "
          f"{conns:6} connections  cpu {cpu:6.2f} s  {statuses}")
row("cold", n, cold["elapsed_s"], cc, cold["queries"], it_c["cache_hits"], it_c["cache_misses"],
    cold["connections_opened"], cold["statuses"])
# The warm pass: the whole run less the cold one (same names, same order).
row("warm", n, both["elapsed_s"] - cold["elapsed_s"], bc - cc, both["queries"] - cold["queries"],
    it_b["cache_hits"] - it_c["cache_hits"], it_b["cache_misses"] - it_c["cache_misses"],
    both["connections_opened"] - cold["connections_opened"], "")
json.dump({"cold_names_per_s": n / cold["elapsed_s"],
           "warm_names_per_s": n / max(both["elapsed_s"] - cold["elapsed_s"], 1e-9)},
          open(f"{out}/{tag}.summary.json", "w"))
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
