# A knot of a bench's own, serving lookup.test with n0 .. n{NAMES-1}
# (tests/servers/gen_zone.py's zone), sourced by the benches that need one:
#
#   source benches/bench-knot.sh
#   start_bench_knot DIR PORT NAMES      # sets KNOT (host:port) and KNOT_PID
#   ...
#   stop_bench_knot
#
# KNOT_RCVBUF (bytes, default 4194304): the receive buffer of knot's UDP
# sockets. knot takes the kernel's default (net.core.rmem_default, 208 KiB
# on Debian: about 270 queries), and on two cores shared by client, server
# and emulator a knot scheduled out for 15 ms at 20,000 queries/s gets a
# burst past it and drops, which a bench would then count against the
# client. A server run for that load would have a larger buffer; knot has no
# setting for it, so as root the default is raised while knot binds and put
# back at once. KNOT_RCVBUF=0 keeps the kernel's default (and without root
# the default is kept, said on stderr).

start_bench_knot() {
    local dir=$1 port=$2 names=$3 zones=$1/zones want got old_default=
    if [[ ! -s $zones/lookup.test.zone || $(grep -c '^n[0-9]* ' "$zones/lookup.test.zone") -lt $names ]]; then
        python3 tests/servers/gen_zone.py "$zones" "$names" >&2
    fi
    mkdir -p "$dir/knot/db"
    cat > "$dir/knot.conf" <<CONF
server:
    rundir: "$dir/knot"
    listen: [ 127.0.0.1@$port ]
    udp-workers: 2
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: "$dir/knot/db"
template:
  - id: default
    storage: "$zones"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: lookup.test.
CONF
    local rcvbuf=${KNOT_RCVBUF:-4194304}
    if [[ $rcvbuf != 0 ]]; then
        if [[ -w /proc/sys/net/core/rmem_default ]]; then
            old_default=$(cat /proc/sys/net/core/rmem_default)
            echo "$rcvbuf" > /proc/sys/net/core/rmem_default
        else
            echo "bench knot: not root, its sockets keep the kernel's default receive buffer" >&2
        fi
    fi
    knotd -c "$dir/knot.conf" > "$dir/knot.log" 2>&1 &
    KNOT_PID=$!
    KNOT="127.0.0.1:$port"
    want=$(python3 -c "import sys; sys.path.insert(0, 'tests/servers'); import gen_zone; print(gen_zone.address_of(12345 % $names))")
    for _ in $(seq 300); do
        got=$(kdig +short +timeout=1 +retry=0 @127.0.0.1 -p "$port" "n$((12345 % names)).lookup.test" A 2>/dev/null || true)
        [[ $got == "$want" ]] && break
        sleep 0.2
    done
    [[ -n $old_default ]] && echo "$old_default" > /proc/sys/net/core/rmem_default
    [[ $got == "$want" ]] || { echo "the bench knot does not answer: $(tail -5 "$dir/knot.log")" >&2; return 1; }
    echo "bench knot on $KNOT: $names names, UDP receive buffers $(knot_rcvbuf "$port") bytes" >&2
}

# knot_rcvbuf PORT: the receive buffer sizes of the UDP sockets on PORT, as
# the kernel reports them (ss's skmem rb).
knot_rcvbuf() {
    ss -uamnH "sport = :$1" 2>/dev/null | grep -o 'rb[0-9]*' | sed 's/rb//' | sort -u | paste -sd/ -
}

stop_bench_knot() {
    [[ -n ${KNOT_PID:-} ]] && kill "$KNOT_PID" 2>/dev/null || true
    KNOT_PID=
}
