#!/usr/bin/env bash
# Iterative resolution on the simulated internet (tests/world), beside
# unbound resolving the same names from the same root hints, and ZDNS.
#
# Usage: bash tests/world/up.sh && cpu-lock bench benches/iterative-vs-unbound.sh
#        NAMES=20000 ROUNDS=5 SKIP_BUILD=1 benches/iterative-vs-unbound.sh
#
# Sides, each a fresh process with a cold cache, timed the same way: the
# whole process's wall time, CPU (user + system) and peak RSS, from
# /usr/bin/time:
#   dnsluice-udp   dnsluice lookup A --iterative over UDP
#   dnsluice-tcp   the same over TCP (kept connections to the authorities)
#   unbound        a fresh unbound (2 threads, the world's settings and root
#                  hints, iterator only, no qname minimisation) on 127.0.0.1,
#                  asked by dnsperf with WORKERS queries outstanding: dnsperf
#                  is the process timed; unbound's CPU (from /proc) and peak
#                  RSS (VmHWM) are given beside it
#   zdns           ZDNS 2.1.1 --iterative (ZDNS=, else /opt/zdns/zdns, else
#                  `zdns` on the PATH; ../shared/tools/zdns/build.sh builds
#                  it), the world's roots as --name-servers, WORKERS threads
# Rounds alternate the order (round r starts r sides further on). Every run
# must answer every name NOERROR (dnsperf: every query completed, none
# lost, every response NOERROR), or the benchmark fails.
#
# Environment:
#   NAMES=100000   how many of the world's bench names (bench-names.txt)
#   WORKERS=100    dnsluice workers; dnsperf -q; zdns --threads
#   ROUNDS=3       rounds (each runs every side once)
#   SIDES="dnsluice-udp dnsluice-tcp unbound zdns"
#   SKIP_BUILD=1   do not build (target/release/dnsluice must exist)
#   WORLD=world    the world to ask: world-wan is the same behind an emulated
#                  wide-area network (10-40 ms to each authority, 0.5 % loss
#                  each way; up.sh starts it); with it, SIDES="dnsluice-udp zdns"
#                  (unbound's random source ports would each cost the
#                  emulator a socket)
#   WORKERS=default  each side's own defaults (no --workers, no --threads)
#   ALLOW_FAILED=1   count names not NOERROR instead of stopping (a lossy
#                  network: say how many each side lost)
#   OUT=DIR        inputs, records and timings (default bench-data/iterative)
#   UNBOUND_PORT   port of the benchmark's own unbound (default 53953 plus
#                  DNSLUICE_SERVERS_PORT_OFFSET)
#
# Prints one line per run, then per side the medians (names/s, wall, CPU,
# peak RSS) and dnsluice's median names/s as a ratio to unbound's and
# ZDNS's. Run it on an idle machine, through `cpu-lock bench` where
# sessions share one; the load average is printed before and after.
set -euo pipefail
cd "$(dirname "$0")/.."

NAMES=${NAMES:-100000}
WORKERS=${WORKERS:-100}
ROUNDS=${ROUNDS:-3}
SIDES=${SIDES:-"dnsluice-udp dnsluice-tcp unbound zdns"}
OUT=${OUT:-bench-data/iterative}
BIN=${DNSLUICE_BIN:-${CARGO_TARGET_DIR:-target}/release/dnsluice}
WORLD_ENV=${DNSLUICE_SERVERS_DIR:-target/test-servers}/${WORLD:-world}/world.env
# The workers flag of each side, unless each keeps its default.
ours_workers=(--workers "$WORKERS") zdns_threads=(--threads "$WORKERS") dnsperf_q=(-q "$WORKERS")
if [[ $WORKERS == default ]]; then ours_workers=() zdns_threads=() dnsperf_q=(-q 100); fi
UNBOUND_PORT=${UNBOUND_PORT:-$((53953 + ${DNSLUICE_SERVERS_PORT_OFFSET:-0}))}
if [[ -z ${ZDNS:-} ]]; then
    if [[ -x /opt/zdns/zdns ]]; then ZDNS=/opt/zdns/zdns; else ZDNS=$(command -v zdns || true); fi
fi
if [[ " $SIDES " == *" zdns "* && -z $ZDNS ]]; then
    echo "no ZDNS (set ZDNS= or run ../shared/tools/zdns/build.sh), or leave zdns out of SIDES" >&2
    exit 1
fi

[[ -f $WORLD_ENV ]] || { echo "no $WORLD_ENV: run bash tests/world/up.sh first" >&2; exit 1; }
# shellcheck disable=SC1090
source "$WORLD_ENV"
if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet --bin dnsluice
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
head -n "$NAMES" "$WORLD_BENCH_NAMES" >"$OUT/names.txt"
awk '{ print $1, "A" }' "$OUT/names.txt" >"$OUT/dnsperf.txt"
ROOTS=$(awk '$3 == "A" { printf "%s%s", sep, $4; sep = "," }' "$WORLD_ROOT_HINTS")
RUNS=$OUT/runs.jsonl
: >"$RUNS"

# timed FILE CMD...: runs CMD under /usr/bin/time (wall s, user s, system s, peak RSS KiB into FILE).
timed() {
    local file=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$file" "$@"
}

# record SIDE ROUND TIMEFILE RECORDS [EXTRA_CPU EXTRA_RSS]: checks the
# records (one per name, every one NOERROR) and appends the run to $RUNS.
record() {
    ALLOW_FAILED=${ALLOW_FAILED:-} python3 - "$@" "$NAMES" "$RUNS" <<'PY'
import collections, json, os, sys
side, rnd, timefile, records = sys.argv[1:5]
extra_cpu, extra_rss = (float(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 8 else (0.0, 0)
names, runs = int(sys.argv[-2]), sys.argv[-1]
wall, user, system, rss = open(timefile).read().split()
statuses = collections.Counter()
if side == "unbound":
    import re
    text = open(records).read()
    num = lambda p: int(re.search(p, text).group(1))
    done, lost = num(r"Queries completed:\s+(\d+)"), num(r"Queries lost:\s+(\d+)")
    for code, n in re.findall(r"(\w+) (\d+) \(", re.search(r"Response codes:\s+(.*)", text).group(1)):
        statuses[code] += int(n)
    assert done == names and lost == 0, f"unbound: {done} of {names} completed, {lost} lost"
else:
    for line in open(records):
        r = json.loads(line)
        statuses[r["results"]["A"]["status"] if side == "zdns" else r["status"]] += 1
assert sum(statuses.values()) == names, f"{side}: {sum(statuses.values())} records for {names} names"
failed = names - statuses["NOERROR"]
assert failed == 0 or os.environ.get("ALLOW_FAILED"), f"{side}: {dict(statuses)}"
run = {"side": side, "round": int(rnd), "wall_s": float(wall), "cpu_s": float(user) + float(system) + extra_cpu,
       "client_cpu_s": float(user) + float(system), "rss_mib": (int(rss) + extra_rss) / 1024,
       "client_rss_mib": int(rss) / 1024, "names_per_s": names / float(wall), "failed": failed}
print(f"{side:13} round {rnd}: {names} names, {failed} not NOERROR {dict(statuses) if failed else ''}, {run['wall_s']:6.2f} s wall, {run['names_per_s']:8.0f} names/s, "
      f"CPU {run['cpu_s']:6.2f} s, peak RSS {run['rss_mib']:6.1f} MiB")
open(runs, "a").write(json.dumps(run) + "\n")
PY
}

dnsluice_run() {
    local transport=${1#dnsluice-} tag=$1-$2
    timed "$OUT/$tag.time" "$BIN" lookup A --iterative --root-hints "$WORLD_ROOT_HINTS" \
        --transport "$transport" "${ours_workers[@]}" --cache-size 4000000 \
        --input "$OUT/names.txt" --output "$OUT/$tag.jsonl" -q
    record "$1" "$2" "$OUT/$tag.time" "$OUT/$tag.jsonl"
}

zdns_run() {
    local tag=zdns-$2
    timed "$OUT/$tag.time" "$ZDNS" A --iterative --name-servers "$ROOTS" "${zdns_threads[@]}" -q \
        --input-file "$OUT/names.txt" --output-file "$OUT/$tag.jsonl" 2>"$OUT/$tag.log"
    record zdns "$2" "$OUT/$tag.time" "$OUT/$tag.jsonl"
}

# unbound's user + system seconds so far, and its peak RSS (KiB).
unbound_cpu() {
    python3 -c 'import os, sys
f = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
print("%.2f" % ((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")))' "$1"
}
unbound_rss() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

unbound_run() {
    local dir=$OUT/unbound tag=unbound-$2
    rm -rf "$dir" && mkdir -p "$dir"
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
    for _ in $(seq 50); do
        kdig +timeout=1 +retry=0 @127.0.0.1 -p "$UNBOUND_PORT" . NS >/dev/null 2>&1 && break
        sleep 0.1
    done
    local before
    before=$(unbound_cpu "$pid")
    timed "$OUT/$tag.time" dnsperf -s 127.0.0.1 -p "$UNBOUND_PORT" -d "$OUT/dnsperf.txt" -n 1 \
        "${dnsperf_q[@]}" -t 20 >"$OUT/$tag.dnsperf" 2>&1
    local cpu rss
    cpu=$(python3 -c "print($(unbound_cpu "$pid") - $before)")
    rss=$(unbound_rss "$pid")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "$cpu $rss" >"$OUT/$tag.server"
    record unbound "$2" "$OUT/$tag.time" "$OUT/$tag.dnsperf" "$cpu" "$rss"
}

read -r -a sides <<<"$SIDES"
echo "iterative A lookups of $NAMES world names, $WORKERS workers, $ROUNDS rounds ($(nproc) cores); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < ROUNDS; r++)); do
    for ((i = 0; i < ${#sides[@]}; i++)); do
        side=${sides[$(((i + r) % ${#sides[@]}))]}
        case $side in
            dnsluice-udp | dnsluice-tcp) dnsluice_run "$side" "$r" ;;
            unbound) unbound_run "$side" "$r" ;;
            zdns) zdns_run "$side" "$r" ;;
            *) echo "unknown side $side" >&2; exit 2 ;;
        esac
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RUNS" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
sides = list(dict.fromkeys(r["side"] for r in runs))
med = {s: {k: statistics.median(r[k] for r in runs if r["side"] == s)
           for k in ("names_per_s", "wall_s", "cpu_s", "client_cpu_s", "rss_mib", "client_rss_mib")} for s in sides}
print("medians:")
for s in sides:
    m = med[s]
    extra = (f" (dnsperf {m['client_cpu_s']:.2f} s, {m['client_rss_mib']:.1f} MiB; unbound the rest)"
             if s == "unbound" else "")
    failed = [r["failed"] for r in runs if r["side"] == s]
    print(f"  {s:13} {m['names_per_s']:8.0f} names/s  {m['wall_s']:6.2f} s wall  CPU {m['cpu_s']:6.2f} s"
          f"  peak RSS {m['rss_mib']:6.1f} MiB  names not NOERROR per run {failed}{extra}")
for ours in ("dnsluice-udp", "dnsluice-tcp"):
    for peer in ("unbound", "zdns"):
        if ours in med and peer in med:
            print(f"{ours} / {peer}: {med[ours]['names_per_s'] / med[peer]['names_per_s']:.2f}x the names/s (medians)")
PY
