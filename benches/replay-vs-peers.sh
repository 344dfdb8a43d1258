#!/usr/bin/env bash
# Replay throughput: dnsluice vs dnsjit (fire and forget) and dnsperf
# (request/response), same machine, same run, same query set, same server.
#
# Usage: benches/replay-vs-peers.sh            (test servers must be up: tests/servers/up.sh)
#        PAIRS="udp-ff udp" COUNT=200000 SKIP_BUILD=1 benches/replay-vs-peers.sh
#
# Pairs (ours vs peer), unit queries/s:
#   udp-ff  dnsluice replay --no-responses (output.udpcli, sendmmsg)
#           vs  dnsjit benches/dnsjit/udpcli.lua (output.udpcli), both into
#           the same UDP sink (a bound socket nobody reads: the sender is measured);
#           rate = queries sent / whole-process wall time
#   udp     dnsluice replay (output.dnscli, udp)  vs  dnsperf -m udp
#   tcp     dnsluice replay --transport tcp       vs  dnsperf -m tcp
#           (both to knot; rate = answers / the whole process's wall time,
#           /usr/bin/time, for both)
#   dot     dnsluice replay --transport tls       vs  dnsperf -m dot
#           (both to dnsdist's DoT; we verify the certificate, dnsperf does not)
# Request/response pairs use INFLIGHT queries outstanding (dnsperf -q) and
# CLIENTS clients (dnsperf -c); handshakes and connections are printed for both.
#
# Environment:
#   PAIRS="udp-ff udp tcp dot"  COUNT=100000 (queries)  RUNS=3  INFLIGHT=100
#   CLIENTS=1  SKIP_BUILD=1  DNSLUICE_BIN=...  DATA_DIR=<repo>/bench-data
#   DNSLUICE_SERVERS_DIR (where servers.env is; default <repo>/target/test-servers)
#
# For request/response pairs the CPU time (user + system) per query and the
# peak RSS of each client (/usr/bin/time) are printed too. A round where
# either side lost a query (ours: sent but not answered; dnsperf: "Queries
# lost", whose rate then includes its timeout wait) is printed with both
# sides' losses and left out.
# Runs alternate (ours, peer, peer, ours, ...); the ratio is the median of
# the per-round ratios ours/peer (> 1: ours is faster).
set -euo pipefail
export LC_ALL=C
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

PAIRS="${PAIRS:-udp-ff udp tcp dot}"
COUNT="${COUNT:-100000}"
RUNS="${RUNS:-3}"
INFLIGHT="${INFLIGHT:-100}"
CLIENTS="${CLIENTS:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
DATA_DIR="${DATA_DIR:-$REPO_ROOT/bench-data}"
BIN="${DNSLUICE_BIN:-$REPO_ROOT/target/release/dnsluice}"
ENV_FILE="${DNSLUICE_SERVERS_DIR:-$REPO_ROOT/target/test-servers}/servers.env"
[[ -f $ENV_FILE ]] || { echo "no $ENV_FILE: run tests/servers/up.sh first" >&2; exit 1; }
# shellcheck disable=SC1090
source "$ENV_FILE"

if [[ $SKIP_BUILD != 1 ]]; then
    cargo build --release --bin dnsluice
fi
mkdir -p "$DATA_DIR"
PCAP="$DATA_DIR/replay-$COUNT.pcap"
NAMES="$DATA_DIR/replay-$COUNT.dnsperf"
if [[ ! -s $PCAP ]]; then
    python3 benches/gen-pcap.py --count "$COUNT" --zone lookup.test --edns 0 --out "$PCAP" >&2
fi
if [[ ! -s $NAMES ]]; then
    # The same queries, in the same order, as dnsperf's "name type" lines.
    printf '[[stage]]\nmodule = "input.mmpcap"\npath = "%s"\n[[stage]]\nmodule = "filter.layer"\n[[stage]]\nmodule = "filter.dns"\n[[stage]]\nmodule = "output.json"\n' "$PCAP" > "$DATA_DIR/names.toml"
    "$BIN" run "$DATA_DIR/names.toml" -q |
        python3 -c 'import json,sys
for l in sys.stdin:
    q = json.loads(l)["dns"]["question"][0]
    print(q["name"], q["type"])' > "$NAMES"
fi
[[ $(wc -l < "$NAMES") == "$COUNT" ]] || { echo "dnsperf file: not $COUNT lines" >&2; exit 1; }

now() { date +%s.%N; }
host_of() { echo "${1%:*}"; }
port_of() { echo "${1##*:}"; }
TMP=$(mktemp -d)
trap 'kill $SINK_PID 2>/dev/null || true; rm -rf "$TMP"' EXIT
SINK_PID=
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# timed CMD...: runs CMD under /usr/bin/time into $TMP/time (wall s, user s, system s, peak RSS KiB).
timed() { /usr/bin/time -f "%e %U %S %M" -o "$TMP/time" "$@"; }
# figures ANSWERED LOST: "rate lost cpu_us rss_mib" of the last timed run:
# answers per second of the whole process's wall time, CPU per query.
figures() {
    awk -v done="$1" -v lost="$2" -v n="$COUNT" \
        '{printf "%.0f %d %.2f %.1f\n", done / $1, lost, ($2 + $3) * 1e6 / n, $4 / 1024}' "$TMP/time"
}

# ours_rr TRANSPORT SERVER EXTRA...: prints "rate lost cpu_us rss_mib connections handshakes".
ours_rr() {
    local transport=$1 server=$2
    shift 2
    timed "$BIN" replay "$PCAP" --server "$server" --transport "$transport" --inflight "$INFLIGHT" \
        --clients "$CLIENTS" -q --stats-json "$TMP/ours.json" "$@"
    local answered lost rest
    read -r answered lost rest < <(python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
assert s["sent"] == int(sys.argv[2]), ("not all sent", s["sent"])
print(s["answered"], s["sent"] - s["answered"], s["connections_opened"], s["tls_handshakes"])' "$TMP/ours.json" "$COUNT")
    echo "$(figures "$answered" "$lost") $rest"
}

# peer_rr MODE SERVER: dnsperf; prints "rate lost cpu_us rss_mib".
peer_rr() {
    timed dnsperf -m "$1" -s "$(host_of "$2")" -p "$(port_of "$2")" -d "$NAMES" -n 1 \
        -q "$INFLIGHT" -c "$CLIENTS" -t 5 > "$TMP/peer.txt" 2>&1 || true
    local completed lost
    completed=$(awk '/Queries completed:/ {print $3}' "$TMP/peer.txt")
    lost=$(awk '/Queries lost:/ {print $3}' "$TMP/peer.txt")
    [[ -n $completed && -n $lost ]] || { echo "dnsperf failed:" >&2; cat "$TMP/peer.txt" >&2; exit 1; }
    # dnsperf loses the queries in flight when a server closes its TCP
    # connection (knot does, after a while), and then waits out its
    # timeout: such a round is left out.
    figures "$completed" "$lost"
}

ours_ff() {
    local t0 t1
    t0=$(now)
    "$BIN" replay "$PCAP" --server "127.0.0.1:$SINK_PORT" --no-responses -q --stats-json "$TMP/ff.json"
    t1=$(now)
    python3 -c 'import json,sys
s = json.load(open(sys.argv[1])); assert s["sent"] == int(sys.argv[2]), s["sent"]
print(s["sent"] / (float(sys.argv[4]) - float(sys.argv[3])))' "$TMP/ff.json" "$COUNT" "$t0" "$t1"
}

peer_ff() {
    local t0 t1 sent
    t0=$(now)
    sent=$(dnsjit benches/dnsjit/udpcli.lua "$PCAP" 127.0.0.1 "$SINK_PORT")
    t1=$(now)
    [[ $sent == "$COUNT" ]] || { echo "dnsjit sent $sent of $COUNT" >&2; exit 1; }
    python3 -c 'import sys; print(int(sys.argv[1]) / (float(sys.argv[3]) - float(sys.argv[2])))' "$sent" "$t0" "$t1"
}

echo "replay-vs-peers: $COUNT queries (lookup.test A), runs $RUNS, inflight $INFLIGHT, clients $CLIENTS; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-7s %14s %14s %8s  %s\n' pair "ours q/s" "peer q/s" ratio notes
for pair in $PAIRS; do
    ratios=() ours_all=() peer_all=() ours_cpu=() peer_cpu=() ours_rss=() peer_rss=() notes="" left=0
    if [[ $pair == udp-ff ]]; then
        SINK_PORT=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        python3 -c 'import socket,sys,time; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",int(sys.argv[1]))); time.sleep(3600)' "$SINK_PORT" &
        SINK_PID=$!
        sleep 0.3
    fi
    for ((r = 0; r < RUNS; r++)); do
        ol=0 pl=0 oc="" pc="" orss="" prss=""
        for side in $( ((r % 2)) && echo "peer ours" || echo "ours peer"); do
            case $pair/$side in
                udp-ff/ours) o=$(ours_ff) ;;
                udp-ff/peer) p=$(peer_ff) ;;
                udp/ours) read -r o ol oc orss c h < <(ours_rr udp "$KNOT"); notes="ours: $c sockets" ;;
                udp/peer) read -r p pl pc prss < <(peer_rr udp "$KNOT") ;;
                tcp/ours) read -r o ol oc orss c h < <(ours_rr tcp "$KNOT"); notes="ours: $c connections" ;;
                tcp/peer) read -r p pl pc prss < <(peer_rr tcp "$KNOT") ;;
                dot/ours) read -r o ol oc orss c h < <(ours_rr tls "$DOT" --ca-file "$CA_FILE" --tls-name "$TLS_NAME"); notes="ours: $c connections, $h TLS handshakes" ;;
                dot/peer) read -r p pl pc prss < <(peer_rr dot "$DOT") ;;
                *) echo "unknown pair $pair" >&2; exit 2 ;;
            esac
        done
        if ((ol || pl)); then
            echo "$pair round $r: left out, queries lost: ours $ol, dnsperf $pl (ours $o q/s, dnsperf $p q/s)" >&2
            left=$((left + 1))
            continue
        fi
        ours_all+=("$o") peer_all+=("$p")
        [[ -n $oc ]] && ours_cpu+=("$oc") peer_cpu+=("$pc") ours_rss+=("$orss") peer_rss+=("$prss")
        ratios+=("$(python3 -c "print($o / $p)")")
    done
    if [[ $pair == udp-ff ]]; then kill "$SINK_PID"; SINK_PID=; fi
    if ((${#ratios[@]} == 0)); then
        printf '%-7s every round lost queries (%d left out)\n' "$pair" "$left"
        continue
    fi
    printf '%-7s %14.0f %14.0f %8.2f  %s; %d of %d rounds without a loss\n' "$pair" \
        "$(printf '%s\n' "${ours_all[@]}" | median)" "$(printf '%s\n' "${peer_all[@]}" | median)" \
        "$(printf '%s\n' "${ratios[@]}" | median)" "$notes" "${#ratios[@]}" "$RUNS"
    if ((${#ours_cpu[@]})); then
        printf '%-7s medians: CPU per query (user+sys) ours %.2f us, dnsperf %.2f us; peak RSS ours %.1f MiB, dnsperf %.1f MiB\n' "$pair" \
            "$(printf '%s\n' "${ours_cpu[@]}" | median)" "$(printf '%s\n' "${peer_cpu[@]}" | median)" \
            "$(printf '%s\n' "${ours_rss[@]}" | median)" "$(printf '%s\n' "${peer_rss[@]}" | median)"
    fi
done
