#!/usr/bin/env bash
# One capture on several threads: `dnsluice run --threads N` against
# `--threads 1` on the chain of configs/dump.toml (layers -> DNS -> JSON
# lines to /dev/null), alternating, several rounds, each a whole process
# under /usr/bin/time (wall, user + system CPU, peak RSS); every run must
# count the same packets and DNS messages and write as many objects.
#
# Cases:
#   udp       COUNT packets of UDP queries (benches/gen-pcap.py, 3,000 clients)
#   tcp       CONNECTIONS DNS-over-TCP connections of 9 packets, the query and
#             the answer each cut in two segments (benches/gen-tcp-pcap.py)
#   crossing  the cost of crossing threads per object: input -> output.null
#             against input -> filter.split (1 thread) -> output.null, the
#             capture read through its map (CROSSING_INPUT=input.mmpcap) or
#             with buffered reads (CROSSING_INPUT=input.fpcap: its packets
#             cross by their place in the reader's blocks)
#   host      what this machine gives two busy cores: --threads 1 on the tcp
#             capture alone, against two such runs at once (no threads
#             ratio can beat two whole processes sharing nothing but the host)
#   instructions  what each of THREADS asks of the processor a packet,
#             counted by valgrind (cachegrind, every thread), against one
#             thread: the udp and tcp cases' chain, and the udp capture
#             through configs/dns-null.toml (no JSON: the parts' reading
#             weighs most there). Each count is taken on captures of two
#             sizes (INSTRUCTION_SIZES packets, INSTRUCTION_CONNECTIONS
#             connections) and a packet's cost is the difference over the
#             difference in packets, so starting up drops out. Not time:
#             one thread's count repeats on any host and load; with more,
#             a thread that spins before it waits adds a little, more when
#             the machine is busy (not among the default CASES: about a
#             minute under valgrind)
#
# In the udp and tcp cases each round also runs two `--threads 1` at once on
# the case's capture (CEILING=1, the default; CEILING=0 leaves them out), and
# the case ends with each thread count's speed-up as a share of that
# round's ceiling: on a virtual machine whose host's pace moves by 2x within
# the hour, this share moves much less than the speed-up itself.
#
# Usage: benches/threads.sh
#        CASES="udp tcp crossing" COUNT=20000000 CONNECTIONS=1000000 \
#        THREADS="1 2" ROUNDS=3 SKIP_BUILD=1 benches/threads.sh
#
# Before and after each timed run of the udp, tcp and crossing cases, benches/core_distance.rs
# measures how far apart cores 0 and 1 are (a cache line's round trip): a
# virtual machine's host may place its two cores on one core complex (~85 ns
# here) or on two (330-390 ns) and move them while it runs, and what crosses
# threads costs several times more in the second placement. The summary then
# also gives the medians by placement (near: under 150 ns before and after
# the run; far: 150 ns or more both times; a run that saw both is left out).
#
# Each case first prints the state of its capture in the page cache
# (benches/page_cache.py: how many page faults mapping it takes); CACHE=disk
# drops the capture from the cache and reads it back first, as a capture
# read from disk is (default as-is: as it is; a capture the generator has
# just written sits in small folios). On Linux 6.18 here the kernel's cost
# of mapping and unmapping the file differs by ~20x between the two.
#
# Environment: CASES (udp tcp crossing host; or instructions), CROSSING_INPUT (input.mmpcap), COUNT (20,000,000), CONNECTIONS (1,000,000), THREADS
# ("1 2"; "2u" is 2 threads, --unordered), ROUNDS (3), CEILING (1), SKIP_BUILD=1, CACHE (as-is or disk),
# INSTRUCTION_SIZES ("200000 400000"), INSTRUCTION_CONNECTIONS ("20000 40000"),
# DATA_DIR (bench-data/threads; the captures stay there, 1.6 GB for the
# udp case). Run it on an idle machine, through `cpu-lock bench` where
# sessions share one.
set -euo pipefail
export LC_ALL=C
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CASES=${CASES:-udp tcp crossing host}
COUNT=${COUNT:-20000000}
CONNECTIONS=${CONNECTIONS:-1000000}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-3}
DATA_DIR=${DATA_DIR:-$ROOT/bench-data/threads}
BIN=$ROOT/target/release/dnsluice
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    cargo build --release -p dnsluice
    cargo bench -q --bench core-distance --no-run
fi
# The core-distance probe, as cargo last built it (none: runs say "-").
DISTANCE=$(ls -t "$ROOT"/target/release/deps/core_distance-* 2>/dev/null | grep -v '\.d$' | head -1 || true)
[[ -n $DISTANCE ]] || echo "threads: no core-distance probe built (cargo bench --bench core-distance --no-run): where the cores were is not measured (\"-\")" >&2

# A cache line's round trip between cores 0 and 1 now, in ns ("-": no probe).
distance() {
    local ns=
    [[ -n $DISTANCE ]] && ns=$("$DISTANCE" 2> /dev/null | awk '{print $3}')
    echo "${ns:--}"
}

# Where the cores were for a run whose probes said $1 ("before:after"): near
# (under 150 ns both times), far (150 ns or more both times), or "-" (the
# placement changed during the run, or no probe).
placement() {
    awk -v apart="$1" 'BEGIN {
        if (split(apart, p, ":") != 2 || p[1] == "-" || p[2] == "-") { print "-"; exit }
        if (p[1] < 150 && p[2] < 150) print "near"; else if (p[1] >= 150 && p[2] >= 150) print "far"; else print "-"
    }'
}
mkdir -p "$DATA_DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

udp_capture=$DATA_DIR/udp-$COUNT.pcap
tcp_capture=$DATA_DIR/tcp-$CONNECTIONS.pcap

# One timed run: label, then the command (its output to /dev/null); appends
# "label wall cpu rss packets messages apart where": the packets the input
# read and the objects the last stage wrote, from the run's statistics; the
# probes before and after it and the placement they give (PROBE=1).
# TIMED_TAG names its files apart from a run beside it.
timed() {
    local label=$1
    shift
    local times=$TMP/time${TIMED_TAG:-} stats=$TMP/stats${TIMED_TAG:-}.json
    # With PROBE=1, how far apart the cores were before and after the run
    # (the placement can change during one).
    local apart=-
    [[ ${PROBE:-0} == 1 ]] && apart=$(distance)
    /usr/bin/time -f "%e %U %S %M" -o "$times" "$@" --stats-json "$stats" -q > /dev/null
    [[ ${PROBE:-0} == 1 ]] && apart="$apart:$(distance)"
    read -r wall user sys rss < "$times"
    local counted line
    counted=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); st=s["stages"]; print(st[0]["out"], st[-1]["in"])' "$stats")
    # Each thread's CPU as the run reported it (its "threads" list).
    python3 -c 'import json,sys; [print(sys.argv[2], t["name"], t["cpu_s"]) for t in json.load(open(sys.argv[1])).get("threads", [])]' \
        "$stats" "$label" >> "$TMP/threads"
    line="$label $wall $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') $((rss / 1024)) $counted $apart"
    echo "$line $(placement "$apart")" >> "$TMP/runs"
    [[ -n ${ROUND:-} ]] && echo "$ROUND $label $wall" >> "$TMP/rounds"
    printf '%-10s wall %7.2f s  cpu %7.2f s  rss %5s MB  packets %s  out %s  cores %s ns apart (before:after)\n' $line
}

# Alternating rounds of `dnsluice run configs/dump.toml` on capture $1 with
# each of THREADS; with CEILING=1 (the default), each round also runs two
# `--threads 1` at once ("pair"): what this host gives two busy cores in that
# round, against which the round's speed-ups are put (see `ceiling`).
compare_threads() {
    local capture=$1
    local one=("$BIN" run configs/dump.toml --set "0.path=$capture" --threads 1)
    for round in $(seq "$ROUNDS"); do
        order=($THREADS)
        ((round % 2 == 0)) && order=($(printf '%s\n' "${order[@]}" | tac))
        for threads in "${order[@]}"; do
            flags=(--threads "${threads%u}")
            [[ $threads == *u ]] && flags+=(--unordered)
            ROUND=$round PROBE=1 timed "$threads" "$BIN" run configs/dump.toml --set "0.path=$capture" "${flags[@]}"
        done
        if [[ ${CEILING:-1} == 1 ]]; then
            ROUND=$round TIMED_TAG=a timed pair "${one[@]}" &
            ROUND=$round TIMED_TAG=b timed pair "${one[@]}"
            wait
        fi
    done
}

# Each label's speed-up over one thread as a share of what the host gave two
# busy cores in the same round (two one-thread runs at once: 1/wall of each
# added up, over 1/wall of the round's one-thread run), medians of the
# rounds' figures: a host whose pace moves between rounds moves both.
ceiling() {
    [[ -s $TMP/rounds ]] || return 0
    python3 - "$TMP/rounds" "$1" <<'PY'
import statistics, sys
rounds = {}
for line in open(sys.argv[1]):
    round_, label, wall = line.split()
    rounds.setdefault(round_, {}).setdefault(label, []).append(float(wall))
full = [r for r in rounds.values() if "1" in r and len(r.get("pair", [])) == 2]
if not full:
    sys.exit(0)
gain = lambda r: sum(r["1"][0] / w for w in r["pair"] if w)
ceilings = [gain(r) for r in full]
print(f"{sys.argv[2]}: two one-thread runs at once do {statistics.median(ceilings):.2f}x one's work "
      f"(rounds {min(ceilings):.2f}-{max(ceilings):.2f}): the host's ceiling for two threads")
labels = [l for l in full[0] if l not in ("1", "pair")]
for label in labels:
    speed = [r["1"][0] / r[label][0] for r in full if label in r]
    share = [r["1"][0] / r[label][0] / gain(r) for r in full if label in r]
    print(f"{sys.argv[2]}: {label:<3} threads {statistics.median(speed):.2f}x one thread, "
          f"{100 * statistics.median(share):.0f} % of the round's ceiling "
          f"(rounds {100 * min(share):.0f}-{100 * max(share):.0f} %)")
PY
}

# Medians per label, speed-up against the first label, then each thread's
# CPU (medians, from the runs' own accounts); fails when counts differ.
summary() {
    python3 - "$TMP/runs" "$1" "$TMP/threads" <<'PY'
import statistics, sys
runs = {}
order = []
placed = {}
# A speed-up, or "-" for a run shorter than /usr/bin/time's 10 ms.
speed_up = lambda base, wall: f"{base / wall:.2f}x" if wall else "-"

for line in open(sys.argv[1]):
    label, wall, cpu, rss, packets, out, apart, where = line.split()
    if label not in runs:
        order.append(label)
    runs.setdefault(label, []).append((float(wall), float(cpu), int(rss), (packets, out)))
    # Near or far both before and after the run; a run between is left out.
    if where != "-":
        farther = max(float(a) for a in apart.split(":"))
        placed.setdefault(where, {}).setdefault(label, []).append((float(wall), float(cpu), farther))
counts = {r[3] for rows in runs.values() for r in rows}
print(f"\n{sys.argv[2]}: medians" + ("" if len(counts) == 1 else f"  COUNTS DIFFER: {sorted(counts)}"))
packets = int(next(iter(counts))[0])
base = statistics.median(r[0] for r in runs[order[0]])
for label in order:
    rows = runs[label]
    wall = statistics.median(r[0] for r in rows)
    cpu = statistics.median(r[1] for r in rows)
    rss = statistics.median(r[2] for r in rows)
    # Two runs at once (CEILING, the host case): each one's own time.
    gain = "(each of two at once)" if label == "pair" else f"speed-up {speed_up(base, wall)}"
    print(f"{label:<10} wall {wall:7.2f} s  cpu {cpu:7.2f} s ({1e9 * cpu / packets:6.1f} ns/packet)  rss {rss} MB  {gain}")
threads = {}
for line in open(sys.argv[3]):
    label, name, cpu = line.split()
    threads.setdefault(label, {}).setdefault(name, []).append(float(cpu))
# By placement, where every label ran in it (the pairs are not probed).
probed = [label for label in order if label != "pair"]
for where, by_label in sorted(placed.items()):
    if set(by_label) != set(probed):
        continue
    base_wall = statistics.median(w for w, _, _ in by_label[probed[0]])
    for label in probed:
        rows = by_label[label]
        wall = statistics.median(w for w, _, _ in rows)
        cpu = statistics.median(c for _, c, _ in rows)
        apart = statistics.median(a for _, _, a in rows)
        print(f"{where:<4} {label:<5} wall {wall:7.2f} s  cpu {cpu:7.2f} s  ({len(rows)} runs, cores {apart:.0f} ns apart)  speed-up {speed_up(base_wall, wall)}")
for label in order:
    by_name = sorted(((statistics.median(v), n) for n, v in threads.get(label, {}).items()), reverse=True)
    print(f"{label:<10} cpu by thread: " + ", ".join(f"{n} {c:.2f} s" for c, n in by_name))
sys.exit(0 if len(counts) == 1 else 1)
PY
}

# Instructions of `dnsluice run $1 --threads $2` (and --unordered for "2u")
# on capture $3, all threads, counted by valgrind; appends "label threads
# capture instructions packets out" to $TMP/instructions: the packets the
# input read and the objects the chain's last stage received (every thread
# count must match the first's).
count_instructions() {
    local config=$1 threads=$2 capture=$3 label=$4
    local flags=(--threads "${threads%u}")
    [[ $threads == *u ]] && flags+=(--unordered)
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        "$BIN" run "$config" --set "0.path=$capture" "${flags[@]}" -q \
        --stats-json "$TMP/stats.json" > /dev/null 2> "$TMP/valgrind" || {
        cat "$TMP/valgrind" >&2
        echo "threads: failed under valgrind: $config --threads $threads on $capture" >&2
        exit 1
    }
    local refs counted
    refs=$(sed -n 's/^==[0-9]*== I *refs: *//p' "$TMP/valgrind" | tr -d ,)
    counted=$(python3 -c 'import json,sys; st=json.load(open(sys.argv[1]))["stages"]; print(st[0]["out"], st[-1]["in"])' "$TMP/stats.json")
    echo "$label $threads $capture $refs $counted" >> "$TMP/instructions"
}

# The instructions case: each label's captures at both sizes, every thread
# count; then a packet's cost and its share above one thread's.
instructions_case() {
    local udp_sizes=(${INSTRUCTION_SIZES:-200000 400000})
    local tcp_sizes=(${INSTRUCTION_CONNECTIONS:-20000 40000})
    ((${#udp_sizes[@]} == 2 && ${#tcp_sizes[@]} == 2)) &&
        ((udp_sizes[0] < udp_sizes[1] && tcp_sizes[0] < tcp_sizes[1])) || {
        echo "threads: INSTRUCTION_SIZES and INSTRUCTION_CONNECTIONS take two counts each, the smaller first" >&2
        exit 2
    }
    : > "$TMP/instructions"
    local n capture
    for n in "${udp_sizes[@]}"; do
        capture=$DATA_DIR/udp-$n.pcap
        [[ -s $capture ]] || python3 benches/gen-pcap.py --count "$n" --out "$capture" >&2
        for threads in $THREADS; do
            count_instructions configs/dump.toml "$threads" "$capture" udp
            count_instructions configs/dns-null.toml "$threads" "$capture" udp-dns-null
        done
    done
    for n in "${tcp_sizes[@]}"; do
        capture=$DATA_DIR/tcp-$n.pcap
        [[ -s $capture ]] || python3 benches/gen-tcp-pcap.py --connections "$n" --out "$capture" >&2
        for threads in $THREADS; do
            count_instructions configs/dump.toml "$threads" "$capture" tcp
        done
    done
    echo "instructions: $(valgrind --version) (cachegrind, every thread), UDP captures of ${udp_sizes[*]} packets, TCP of ${tcp_sizes[*]} connections"
    python3 - "$TMP/instructions" "${THREADS%% *}" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    label, threads, capture, refs, packets, out = line.split()
    rows.setdefault(label, {}).setdefault(threads, []).append((int(packets), int(refs), int(out)))
failed = False
print(f"{'chain':<14} {'threads':>7} {'a packet':>10} {'against ' + sys.argv[2]:>10} {'to start':>10}")
for label, by_threads in rows.items():
    first = None
    for threads, runs in by_threads.items():
        (small_n, small, small_out), (large_n, large, large_out) = sorted(runs)
        per = (large - small) / (large_n - small_n)
        start = (small - per * small_n) / 1e6
        counted = (small_n, large_n, small_out, large_out)
        if first is None:
            first, first_counted = per, counted
            against = "1.000x"
        else:
            against = f"{100 * (per / first - 1):+.1f} %"
            if counted != first_counted:
                print(f"{label}: {threads} threads read and wrote {counted} (packets, packets, objects, objects), not {first_counted}")
                failed = True
        print(f"{label:<14} {threads:>7} {per:10.1f} {against:>10} {start:8.1f} M")
sys.exit(1 if failed else 0)
PY
}

echo "threads: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), rounds $ROUNDS"
for case in $CASES; do
    : > "$TMP/runs"
    : > "$TMP/threads"
    : > "$TMP/rounds"
    case $case in
    udp)
        [[ -s $udp_capture ]] || python3 benches/gen-pcap.py --count "$COUNT" --out "$udp_capture" >&2
        python3 benches/page_cache.py bench "$udp_capture"
        echo "udp: $COUNT packets, layers -> DNS -> JSON lines to /dev/null"
        compare_threads "$udp_capture"
        summary "udp"
        ceiling "udp"
        ;;
    tcp)
        [[ -s $tcp_capture ]] || python3 benches/gen-tcp-pcap.py --connections "$CONNECTIONS" --out "$tcp_capture"
        python3 benches/page_cache.py bench "$tcp_capture"
        echo "tcp: $CONNECTIONS connections (9 packets, 2 messages each), layers -> DNS -> JSON lines to /dev/null"
        compare_threads "$tcp_capture"
        summary "tcp"
        ceiling "tcp"
        ;;
    crossing)
        [[ -s $udp_capture ]] || python3 benches/gen-pcap.py --count "$COUNT" --out "$udp_capture" >&2
        python3 benches/page_cache.py bench "$udp_capture"
        input=${CROSSING_INPUT:-input.mmpcap}
        printf '[[stage]]\nmodule = "%s"\npath = "%s"\n[[stage]]\nmodule = "output.null"\n' \
            "$input" "$udp_capture" > "$TMP/plain.toml"
        printf '[[stage]]\nmodule = "%s"\npath = "%s"\n[[stage]]\nmodule = "filter.split"\nthreads = 1\nreport = false\n[[stage]]\nmodule = "output.null"\n' \
            "$input" "$udp_capture" > "$TMP/split.toml"
        echo "crossing: $COUNT packets, $input -> output.null, then through filter.split (1 thread)"
        for round in $(seq "$ROUNDS"); do
            PROBE=1 timed plain "$BIN" run "$TMP/plain.toml" --threads 1
            PROBE=1 timed split "$BIN" run "$TMP/split.toml"
        done
        summary "crossing"
        python3 - "$TMP/runs" "$TMP/threads" <<'PY'
import statistics, sys
cpu = {}
placed = {}
for line in open(sys.argv[1]):
    label, wall, c, rss, packets, out, apart, where = line.split()
    cpu.setdefault(label, []).append(float(c))
    n = int(packets)
    if where != "-":
        placed.setdefault(where, {}).setdefault(label, []).append(float(c))
extra = statistics.median(cpu["split"]) - statistics.median(cpu["plain"])
print(f"crossing: {1e9 * extra / n:.1f} ns of CPU per object (both sides: copy, queues, wake-ups)")
for where, by in sorted(placed.items()):
    if {"plain", "split"} <= set(by):
        extra = statistics.median(by["split"]) - statistics.median(by["plain"])
        print(f"crossing, cores {where}: {1e9 * extra / n:.1f} ns ({len(by['plain'])} and {len(by['split'])} runs)")
# By thread, from the runs' own accounts (`threads` in --stats-json): the
# map's helper does the same work in both runs, so the crossing without it
# is what the input's thread and the worker add.
by = {}
for line in open(sys.argv[2]):
    label, name, c = line.split()
    by.setdefault((label, name), []).append(float(c))
names = sorted({name for _, name in by})
med = lambda label, name: statistics.median(by.get((label, name), [0.0]))
parts = [f"{name} {1e9 * (med('split', name) - med('plain', name)) / n:+.1f}" for name in names]
helper = {name for name in names if name.endswith("helper")}
rest = sum(med("split", name) - med("plain", name) for name in names if name not in helper)
print(f"crossing by thread (ns per object): {', '.join(parts)}; without the map's helper {1e9 * rest / n:.1f} ns")
PY
        ;;
    host)
        [[ -s $tcp_capture ]] || python3 benches/gen-tcp-pcap.py --connections "$CONNECTIONS" --out "$tcp_capture"
        python3 benches/page_cache.py bench "$tcp_capture"
        echo "host: --threads 1 on the tcp capture alone, then two such runs at once"
        one=("$BIN" run configs/dump.toml --set "0.path=$tcp_capture" --threads 1)
        for round in $(seq "$ROUNDS"); do
            timed alone "${one[@]}"
            TIMED_TAG=a timed pair "${one[@]}" &
            TIMED_TAG=b timed pair "${one[@]}"
            wait
        done
        summary "host"
        python3 - "$TMP/runs" <<'PY'
import statistics, sys
wall = {}
for line in open(sys.argv[1]):
    label, w = line.split()[:2]
    wall.setdefault(label, []).append(float(w))
gain = 2 * statistics.median(wall["alone"]) / statistics.median(wall["pair"])
print(f"host: two runs at once do {gain:.2f}x the work of one in the same time")
PY
        ;;
    instructions)
        instructions_case
        ;;
    *)
        echo "unknown case $case" >&2
        exit 2
        ;;
    esac
done
