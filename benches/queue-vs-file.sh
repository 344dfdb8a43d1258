#!/usr/bin/env bash
# The work queue's cost: NAMES lookups through NATS JetStream (queue put →
# 1 worker → queue get) against the same lookup from a file, on the same
# machine, in the same run; then 2 workers against 1. docs/benchmarks.md
# has the figures and docs/queue.md what they mean.
#
# Usage: bash tests/servers/up.sh && cpu-lock bench benches/queue-vs-file.sh
#        NAMES=20000 RUNS=1 SKIP_BUILD=1 benches/queue-vs-file.sh
#
# Environment:
#   NAMES=100000    names n0..n{NAMES-1}.lookup.test (knot answers each)
#   RUNS=2          runs of each case (the best is reported, and each run's
#                   own ratio of 1 worker to the file run)
#   BATCH=1000      lines to a work item (queue put --batch); one more case
#                   always puts a line to an item (--batch 1)
#   SKIP_BUILD=1    do not build (target/release/dnsluice must exist)
#   OUT=DIR         inputs, records, broker state (default bench-data/queue)
#   PORT=14900+offset  the benchmark's own nats-server (file storage under OUT)
#
# Each case prints wall seconds and CPU seconds (user+sys): dnsluice's and
# knot's, and for the queue cases the workers' and nats-server's while the
# workers run; then the queue/file ratios. Every run must give exactly
# NAMES records.
set -euo pipefail
cd "$(dirname "$0")/.."

NAMES=${NAMES:-100000}
BATCH=${BATCH:-1000}
RUNS=${RUNS:-2}
OUT=${OUT:-bench-data/queue}
PORT=${PORT:-$((14900 + ${DNSLUICE_SERVERS_PORT_OFFSET:-0}))}
BIN=${DNSLUICE_BIN:-${CARGO_TARGET_DIR:-target}/release/dnsluice}
# shellcheck source=benches/servers-env.sh
source benches/servers-env.sh
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
python3 -c "
import sys
with open(sys.argv[1], 'w') as f:
    for i in range(int(sys.argv[2])):
        f.write(f'n{i}.lookup.test\n')" "$OUT/names.txt" "$NAMES"

rm -rf "$OUT/nats"
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    echo "127.0.0.1:$PORT is taken: give the benchmark's broker another PORT" >&2
    exit 1
fi
nats-server -js -a 127.0.0.1 -p "$PORT" -sd "$OUT/nats" >"$OUT/nats.log" 2>&1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done
kill -0 "$BROKER" 2>/dev/null || { echo "nats-server did not start: $OUT/nats.log" >&2; exit 1; }
NATS=nats://127.0.0.1:$PORT
KNOT_PID=$(<"${DNSLUICE_SERVERS_DIR:-target/test-servers}/knot.pid")
LOOKUP=(lookup A --name-servers "$KNOT" -q)

# cpu PID: user+sys seconds of a running process so far.
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
now() { date +%s.%N; }
records() { wc -l <"$1" | tr -d ' '; }
check() {
    local n
    n=$(records "$1")
    [[ $n == "$NAMES" ]] || { echo "$1: $n records, not $NAMES" >&2; exit 1; }
}

# file_run: the lookup from a file, to a file; prints wall, CPU and knot's CPU seconds.
file_run() {
    local start end knot0
    knot0=$(cpu "$KNOT_PID")
    start=$(now)
    /usr/bin/time -f "%U %S" -o "$OUT/file.time" \
        "$BIN" "${LOOKUP[@]}" --input "$OUT/names.txt" --output "$OUT/file.jsonl"
    end=$(now)
    check "$OUT/file.jsonl"
    awk -v s="$start" -v e="$end" -v k0="$knot0" -v k1="$(cpu "$KNOT_PID")" \
        '{printf "%.3f %.2f %.2f\n", e - s, $1 + $2, k1 - k0}' "$OUT/file.time"
}

# queue_run WORKERS TAG BATCH: put (BATCH lines to an item), WORKERS
# workers, get; prints put/work/total
# seconds and the CPU seconds of the workers, the broker and knot.
queue_run() {
    local workers=$1 tag=$2 batch=$3 t0 t1 t2 broker_cpu0 broker_cpu1 knot0 knot1 worker_cpu=0
    local pids=()
    t0=$(now)
    "$BIN" queue put "$NATS/w$tag" "$OUT/names.txt" --batch "$batch" 2>/dev/null
    t1=$(now)
    broker_cpu0=$(cpu "$BROKER")
    knot0=$(cpu "$KNOT_PID")
    for i in $(seq "$workers"); do
        /usr/bin/time -f "%U %S" -o "$OUT/worker$i.time" \
            "$BIN" "${LOOKUP[@]}" --input "$NATS/w$tag" --output "$NATS/r$tag" --idle-exit 1 &
        pids+=($!)
    done
    "$BIN" queue get "$NATS/r$tag" --expect "$NAMES" --output "$OUT/queue.jsonl" 2>/dev/null
    t2=$(now)
    broker_cpu1=$(cpu "$BROKER")
    knot1=$(cpu "$KNOT_PID")
    wait "${pids[@]}"
    check "$OUT/queue.jsonl"
    for i in $(seq "$workers"); do
        worker_cpu=$(awk -v a="$worker_cpu" '{print a + $1 + $2}' "$OUT/worker$i.time")
    done
    awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v w="$worker_cpu" -v b0="$broker_cpu0" -v b1="$broker_cpu1" \
        -v k="$(awk -v a="$knot0" -v b="$knot1" 'BEGIN {print b - a}')" \
        'BEGIN {printf "%.3f %.3f %.3f %.2f %.2f %.2f\n", t1 - t0, t2 - t1, t2 - t0, w, b1 - b0, k}'
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $NAMES names; knot $KNOT"
best_file="" best_q1="" best_q2="" best_q1b1=""
faster() { awk -v a="$1" -v b="$2" 'BEGIN {print (b == "" || a + 0 < b + 0)}'; }
for run in $(seq "$RUNS"); do
    read -r f fcpu fknot < <(file_run)
    q1=$(queue_run 1 "a$run" "$BATCH")
    q2=$(queue_run 2 "b$run" "$BATCH")
    q1b1=$(queue_run 1 "c$run" 1)
    echo "run $run: file ${f}s (cpu ${fcpu}s, knot ${fknot}s) | put/work/total/worker-cpu/broker-cpu/knot-cpu: 1 worker $q1 | 2 workers $q2 | 1 worker, --batch 1: $q1b1"
    echo "run $run: this run's ratio, 1 worker to the file run: $(awk -v q="$(cut -d' ' -f3 <<<"$q1")" -v f="$f" 'BEGIN {printf "%.2f", q / f}')"
    # Best by wall time: the file run's, and the queue runs' total.
    [[ $(faster "$f" "${best_file%% *}") == 1 ]] && best_file="$f $fcpu $fknot"
    [[ $(faster "$(cut -d' ' -f3 <<<"$q1")" "$(cut -d' ' -f3 <<<"$best_q1")") == 1 ]] && best_q1=$q1
    [[ $(faster "$(cut -d' ' -f3 <<<"$q2")" "$(cut -d' ' -f3 <<<"$best_q2")") == 1 ]] && best_q2=$q2
    [[ $(faster "$(cut -d' ' -f3 <<<"$q1b1")" "$(cut -d' ' -f3 <<<"$best_q1b1")") == 1 ]] && best_q1b1=$q1b1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r f fcpu fknot <<<"$best_file"
read -r put1 work1 total1 wcpu1 bcpu1 kcpu1 <<<"$best_q1"
read -r put2 work2 total2 wcpu2 bcpu2 kcpu2 <<<"$best_q2"
read -r put3 work3 total3 wcpu3 bcpu3 kcpu3 <<<"$best_q1b1"
awk -v n="$NAMES" -v f="$f" -v fc="$fcpu" -v fk="$fknot" -v p="$put1" -v w="$work1" -v t="$total1" -v wc="$wcpu1" -v bc="$bcpu1" -v kc="$kcpu1" \
    -v p2="$put2" -v w2="$work2" -v t2="$total2" -v wc2="$wcpu2" -v bc2="$bcpu2" -v kc2="$kcpu2" \
    -v p3="$put3" -v w3="$work3" -v t3="$total3" -v wc3="$wcpu3" -v bc3="$bcpu3" -v kc3="$kcpu3" -v b="$BATCH" 'BEGIN {
    printf "best of runs (%d names):\n", n
    printf "  file run:   %.3f s wall (%.0f names/s), %.2f s CPU, knot %.2f s\n", f, n / f, fc, fk
    printf "  1 worker:   put %.3f s + workers→get %.3f s = %.3f s wall: %.2fx the file run (workers→get alone %.2fx); CPU worker %.2f s, broker %.2f s, knot %.2f s\n", p, w, t, t / f, w / f, wc, bc, kc
    printf "  2 workers:  put %.3f s + workers→get %.3f s = %.3f s wall: %.2fx the speed of 1 worker (workers→get); CPU workers %.2f s, broker %.2f s, knot %.2f s\n", p2, w2, t2, w / w2, wc2, bc2, kc2
    printf "  1 worker, --batch 1 (a line to an item, not %d): put %.3f s + worker→get %.3f s = %.3f s wall: %.2fx the file run; CPU worker %.2f s, broker %.2f s, knot %.2f s\n", b, p3, w3, t3, t3 / f, wc3, bc3, kc3
}'
