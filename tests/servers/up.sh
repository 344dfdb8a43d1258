#!/usr/bin/env bash
# Starts the DNS servers the tests talk to, on loopback addresses only:
#   knot     authoritative for lookup.test. (100,000+ names), 0.0.10.in-addr.arpa.,
#            axfr.test. (anyone on loopback may transfer it) and noaxfr.test.
#            (transfers refused); answers version.bind (CH TXT) with $KNOT_VERSION
#   dnsdist  in front of knot: plain DNS, DoT and DoH (HTTP/2)
#   dnsluice-netem  a slow nameserver: 127.0.0.2 forwards to the fast
#            servers, holding every datagram and byte chunk DELAY_MS each way
#   nats-server  JetStream brokers for the work-queue tests: one plain, one
#            TLS-only with a password (file storage under $STATE, emptied
#            whenever they are started)
# and writes $STATE/servers.env (KEY=VALUE lines) for tests and scripts.
#
# State (configs, zones, certificates, logs, pid files) lives in
# $DNSLUICE_SERVERS_DIR, default <workspace>/target/test-servers.
# Safe to rerun: a server that is still running is left alone.
# tests/servers/down.sh stops them all.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tests/servers
STATE=${DNSLUICE_SERVERS_DIR:-$ROOT/target/test-servers}
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
DELAY_MS=${DNSLUICE_DELAY_MS:-20}
NAMES=100000
TLS_NAME=dns.test
KNOT_VERSION=dnsluice-test-knot-1

# Addresses. 127.0.0.1, .3, .4 are fast; 127.0.0.2 is the slow one.
# DNSLUICE_SERVERS_PORT_OFFSET (default 0) is added to every port, so that
# several checkouts on one machine can each run their own servers.
OFFSET=${DNSLUICE_SERVERS_PORT_OFFSET:-0}
KNOT_PORT=$((53530 + OFFSET))
DNSDIST_PORT=$((53531 + OFFSET))
DOT_PORT=$((8853 + OFFSET))
DOH_PORT=$((8443 + OFFSET))
NATS_PORT=$((4222 + OFFSET))
NATS_TLS_PORT=$((4223 + OFFSET))
FAST_IPS=(127.0.0.1 127.0.0.3 127.0.0.4)
TLS_IPS=(127.0.0.1 127.0.0.3)
SLOW_IP=127.0.0.2

for tool in knotd dnsdist kdig openssl python3 nats-server; do
    command -v "$tool" >/dev/null || {
        echo "up.sh: $tool is missing (apt-get install knot knot-dnsutils dnsdist openssl python3 nats-server)" >&2
        exit 1
    }
done

# alive NAME: the process in $STATE/NAME.pid is running.
alive() {
    local pid
    [[ -f $STATE/$1.pid ]] && pid=$(<"$STATE/$1.pid") && [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

# ports_free ADDR:PORT...: exits naming the first TCP or UDP port that
# another process holds. (knot binds with SO_REUSEPORT, so a second knot
# would silently share the port with the first instead of failing.)
ports_free() {
    python3 - "$@" <<'PY' || exit 1
import socket, sys
for addr in sys.argv[1:]:
    host, port = addr.rsplit(":", 1)
    for kind, name in ((socket.SOCK_STREAM, "TCP"), (socket.SOCK_DGRAM, "UDP")):
        s = socket.socket(socket.AF_INET, kind)
        if kind == socket.SOCK_STREAM:  # TIME_WAIT leftovers are no conflict
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
        except OSError:
            sys.exit(f"up.sh: {name} {addr} is already in use by another process "
                     "(another checkout's test servers? stop them with its "
                     "tests/servers/down.sh, or use them: "
                     "DNSLUICE_SERVERS_DIR=<its>/target/test-servers)")
        finally:
            s.close()
PY
}

# start NAME "ADDR:PORT..." COMMAND...: runs COMMAND in the background unless
# NAME is alive, after checking that its ports are free.
# spawns: knotd dnsdist nats-server (through start; .ci/run installs what this names)
start() {
    local name=$1 ports=$2
    shift 2
    alive "$name" && return 0
    # shellcheck disable=SC2086 # a list of addresses
    ports_free $ports
    nohup "$@" >"$STATE/$name.log" 2>&1 </dev/null &
    echo $! >"$STATE/$name.pid"
}

# --- zones -------------------------------------------------------------------
ZONES=$STATE/zones
if [[ ! -s $ZONES/lookup.test.zone || $HERE/gen_zone.py -nt $ZONES/lookup.test.zone ||
      $HERE/typed_zone.py -nt $ZONES/lookup.test.zone ]]; then
    python3 "$HERE/gen_zone.py" "$ZONES" "$NAMES"
fi

# --- certificates: a CA and a server certificate it signs ----------------------
if [[ ! -s $STATE/cert.pem || ! -s $STATE/ca.pem ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -days 3650 -subj "/CN=dnsluice test CA" \
        -keyout "$STATE/ca-key.pem" -out "$STATE/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -subj "/CN=$TLS_NAME" -keyout "$STATE/key.pem" -out "$STATE/cert.csr" 2>/dev/null
    san="DNS:$TLS_NAME"
    for ip in 127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4; do san+=",IP:$ip"; done
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' \
        "$san" >"$STATE/cert.ext"
    openssl x509 -req -in "$STATE/cert.csr" -CA "$STATE/ca.pem" -CAkey "$STATE/ca-key.pem" \
        -CAcreateserial -days 3650 -extfile "$STATE/cert.ext" -out "$STATE/cert.pem" 2>/dev/null
    rm -f "$STATE/cert.csr" "$STATE/cert.ext"
fi

# --- knot ----------------------------------------------------------------------
mkdir -p "$STATE/knot/db"
{
    echo "server:"
    echo "    rundir: \"$STATE/knot\""
    echo "    listen: [ $(printf '%s@'"$KNOT_PORT"', ' "${FAST_IPS[@]}" | sed 's/, $//') ]"
    echo "    udp-workers: 2"
    # knot 3.2 has a fixed listen backlog (10) per socket; with reuseport each
    # TCP worker gets its own listening socket, so more of them take more
    # connection bursts.
    echo "    tcp-workers: 8"
    echo "    tcp-reuseport: on"
    echo "    tcp-max-clients: 4096"
    echo "    tcp-idle-timeout: 60"
    echo "    background-workers: 1"
    echo "    version: \"$KNOT_VERSION\""
    echo "log:"
    echo "  - target: stderr"
    echo "    any: warning"
    echo "acl:"
    echo "  - id: transfer-from-loopback"
    echo "    address: [ 127.0.0.0/8, ::1 ]"
    echo "    action: transfer"
    echo "database:"
    echo "    storage: \"$STATE/knot/db\""
    echo "template:"
    echo "  - id: default"
    echo "    storage: \"$ZONES\""
    echo "    file: \"%s.zone\""
    echo "    zonefile-sync: -1"
    echo "    zonefile-load: whole"
    echo "    journal-content: none"
    echo "zone:"
    echo "  - domain: lookup.test."
    echo "  - domain: 0.0.10.in-addr.arpa."
    echo "  - domain: axfr.test."
    echo "    acl: transfer-from-loopback"
    echo "  - domain: noaxfr.test."
} >"$STATE/knot.conf"
knot_ports="" dnsdist_ports="127.0.0.1:$DNSDIST_PORT"
for ip in "${FAST_IPS[@]}"; do knot_ports+=" $ip:$KNOT_PORT"; done
for ip in "${TLS_IPS[@]}"; do dnsdist_ports+=" $ip:$DOT_PORT $ip:$DOH_PORT"; done
start knot "$knot_ports" knotd -c "$STATE/knot.conf"

# --- dnsdist -------------------------------------------------------------------
{
    echo "-- written by tests/servers/up.sh"
    echo "setSecurityPollSuffix('')"
    # maxInFlight: answer a connection's queries out of order (RFC 7766) and
    # pipeline them to knot over few connections; without it dnsdist opens a
    # backend connection per query in flight, and knot's fixed listen backlog
    # (10) makes some of those fail under load, which dnsdist passes on to
    # its client as a reset.
    echo "setLocal('127.0.0.1:$DNSDIST_PORT', {maxInFlight=256})"
    for ip in "${TLS_IPS[@]}"; do
        echo "addTLSLocal('$ip:$DOT_PORT', '$STATE/cert.pem', '$STATE/key.pem', {maxInFlight=256})"
        echo "addDOHLocal('$ip:$DOH_PORT', '$STATE/cert.pem', '$STATE/key.pem', '/dns-query')"
    done
    echo "newServer({address='127.0.0.1:$KNOT_PORT', checkName='lookup.test.', checkType='SOA', maxInFlight=256})"
} >"$STATE/dnsdist.conf"
start dnsdist "$dnsdist_ports" dnsdist --supervised --disable-syslog -C "$STATE/dnsdist.conf"

# --- the slow nameserver ---------------------------------------------------------
(cd "$ROOT" && nice -n 10 cargo build -q -p dnsluice-netem)
NETEM=${CARGO_TARGET_DIR:-$ROOT/target}/debug/dnsluice-netem
start netem "$SLOW_IP:$KNOT_PORT $SLOW_IP:$DOT_PORT $SLOW_IP:$DOH_PORT" "$NETEM" --delay-ms "$DELAY_MS" \
    "$SLOW_IP:$KNOT_PORT=127.0.0.1:$KNOT_PORT" \
    "$SLOW_IP:$DOT_PORT=127.0.0.1:$DOT_PORT" \
    "$SLOW_IP:$DOH_PORT=127.0.0.1:$DOH_PORT"

# --- NATS JetStream brokers (tests/queue_*.rs) ------------------------------------
NATS_USER=dnsluice
[[ -s $STATE/nats-password ]] || openssl rand -hex 16 >"$STATE/nats-password"
if ! alive nats; then
    rm -rf "$STATE/nats"
    start nats "127.0.0.1:$NATS_PORT" nats-server -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$STATE/nats"
fi
if ! alive nats-tls; then
    rm -rf "$STATE/nats-tls"
    cat >"$STATE/nats-tls.conf" <<CONF
listen: 127.0.0.1:$NATS_TLS_PORT
jetstream { store_dir: "$STATE/nats-tls" }
tls { cert_file: "$STATE/cert.pem", key_file: "$STATE/key.pem" }
authorization { user: $NATS_USER, password: "$(<"$STATE/nats-password")" }
CONF
    start nats-tls "127.0.0.1:$NATS_TLS_PORT" nats-server -c "$STATE/nats-tls.conf"
fi

# --- servers.env ---------------------------------------------------------------
join() { local IFS=,; echo "$*"; }
fast_dns=() fast_dot=() fast_doh=()
for ip in "${FAST_IPS[@]}"; do fast_dns+=("$ip:$KNOT_PORT"); done
for ip in "${TLS_IPS[@]}"; do
    fast_dot+=("$ip:$DOT_PORT")
    fast_doh+=("https://$ip:$DOH_PORT/dns-query")
done
cat >"$STATE/servers.env.tmp" <<ENV
# Written by tests/servers/up.sh; read by testkit::servers().
STATE_DIR=$STATE
KNOT=127.0.0.1:$KNOT_PORT
DNSDIST=127.0.0.1:$DNSDIST_PORT
DOT=127.0.0.1:$DOT_PORT
DOH=https://127.0.0.1:$DOH_PORT/dns-query
SLOW=$SLOW_IP:$KNOT_PORT
SLOW_DOT=$SLOW_IP:$DOT_PORT
SLOW_DOH=https://$SLOW_IP:$DOH_PORT/dns-query
SLOW_DELAY_MS=$DELAY_MS
NETEM=$NETEM
FAST_DNS=$(join "${fast_dns[@]}")
FAST_DOT=$(join "${fast_dot[@]}")
FAST_DOH=$(join "${fast_doh[@]}")
CA_FILE=$STATE/ca.pem
CERT_FILE=$STATE/cert.pem
KEY_FILE=$STATE/key.pem
TLS_NAME=$TLS_NAME
ZONE=lookup.test.
ZONE_NAMES=$NAMES
REVERSE_ZONE=0.0.10.in-addr.arpa.
AXFR_ZONE=axfr.test.
NOAXFR_ZONE=noaxfr.test.
KNOT_VERSION=$KNOT_VERSION
NATS=127.0.0.1:$NATS_PORT
NATS_TLS=127.0.0.1:$NATS_TLS_PORT
NATS_USER=$NATS_USER
NATS_PASSWORD_FILE=$STATE/nats-password
ENV

# --- wait until every server answers --------------------------------------------
# ask LABEL ADDRESS KDIG-ARGS...: retries for up to 20 s until n12345 resolves.
want=$(python3 -c "import sys; sys.path.insert(0, '$HERE'); import gen_zone; print(gen_zone.address_of(12345))")
ask() {
    local label=$1 addr=$2 got=""
    shift 2
    for _ in $(seq 200); do
        got=$(kdig +short +timeout=1 +retry=0 "@${addr%:*}" -p "${addr##*:}" "$@" \
            n12345.lookup.test. A 2>/dev/null || true)
        if [[ $got == "$want" ]]; then
            printf '  %-12s %-16s ok\n' "$label" "$addr"
            return 0
        fi
        sleep 0.1
    done
    echo "up.sh: $label $addr ($*) did not answer n12345.lookup.test. A = $want (got '${got}'); logs in $STATE" >&2
    tail -n 20 "$STATE"/*.log >&2 || true
    exit 1
}
tls=(+tls-ca="$STATE/ca.pem" +tls-hostname="$TLS_NAME")
echo "test DNS servers (state in $STATE):"
for ip in "${FAST_IPS[@]}"; do
    ask knot/udp "$ip:$KNOT_PORT"
    ask knot/tcp "$ip:$KNOT_PORT" +tcp
done
ask slow/udp "$SLOW_IP:$KNOT_PORT"
ask slow/tcp "$SLOW_IP:$KNOT_PORT" +tcp
ask dnsdist/udp "127.0.0.1:$DNSDIST_PORT"
ask dnsdist/tcp "127.0.0.1:$DNSDIST_PORT" +tcp
for ip in "${TLS_IPS[@]}" "$SLOW_IP"; do
    ask dot "$ip:$DOT_PORT" "${tls[@]}"
    ask doh "$ip:$DOH_PORT" "${tls[@]}" +https=/dns-query
done
# listening LABEL ADDRESS: waits up to 10 s for a TCP listener.
listening() {
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/${2%:*}/${2##*:}") 2>/dev/null; then
            printf '  %-12s %-16s ok\n' "$1" "$2"
            return 0
        fi
        sleep 0.1
    done
    echo "up.sh: $1 is not listening on $2; logs in $STATE" >&2
    exit 1
}
listening nats "127.0.0.1:$NATS_PORT"
listening nats-tls "127.0.0.1:$NATS_TLS_PORT"
bash "$ROOT/tests/world/up.sh"  # the simulated internet (tests/world/README.md)
DNSLUICE_WORLD_WAN=1 bash "$ROOT/tests/world/up.sh"  # and behind an emulated wide-area network
mv "$STATE/servers.env.tmp" "$STATE/servers.env"
echo "  wrote $STATE/servers.env"
