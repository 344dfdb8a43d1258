#!/usr/bin/env bash
# Makes the field corpus captures that no public project ships (README.md,
# "Made here"): real traffic captured with the real tools, inside network
# namespaces this script creates and removes (no address outside them is
# ever used), then derived files re-encapsulated by scapy.
#
# Needs root, iproute2, tcpdump, kdig (knot-dnsutils), nftables, python3,
# python3-scapy. Usage: bash make.sh OUTDIR   (then: python3 ../truth.py FILES)
set -euo pipefail
OUT=$(realpath "${1:?usage: make.sh OUTDIR}")
HERE=$(cd "$(dirname "$0")" && pwd)
RESPONDER="$HERE/responder.py"
NA=i19fa NB=i19fb NN=i19fn
cleanup() { for n in $NA $NB $NN; do ip netns del $n 2>/dev/null || true; done; }
trap cleanup EXIT
cleanup

queries() { # queries SERVER (UDP A/AAAA/TXT, TCP A, TCP two in one connection)
    local server=$1
    for name in www.example. mail.example. example.; do
        kdig +timeout=1 +retry=0 @"$server" "$name" A > /dev/null || true
    done
    kdig +timeout=1 +retry=0 @"$server" www.example. AAAA > /dev/null || true
    kdig +timeout=1 +retry=0 +tcp @"$server" tcp.example. A > /dev/null || true
    kdig +timeout=1 +retry=0 +tcp +keepopen @"$server" one.example. A two.example. A > /dev/null || true
}

# 1. NFLOG: `tcpdump -i nflog:5` on loopback traffic logged by nftables.
ip netns add $NN
ip -n $NN link set lo up
ip netns exec $NN nft -f - <<NFT
table inet i19 {
    chain out {
        type filter hook output priority 0;
        meta l4proto { udp, tcp } th dport 53 log group 5
        meta l4proto { udp, tcp } th sport 53 log group 5
    }
}
NFT
ip netns exec $NN python3 "$RESPONDER" 127.0.0.1 53 6 &
ip netns exec $NN python3 "$RESPONDER" ::1 53 6 &
ip netns exec $NN tcpdump -q -i nflog:5 -w "$OUT/made-nflog.pcap" 2> /dev/null &
DUMP=$!
sleep 1
ip netns exec $NN bash -c "$(declare -f queries); queries 127.0.0.1; queries ::1"
sleep 1
kill $DUMP; wait $DUMP || true

# 2. VXLAN (the kernel's vxlan device, VNI 42, UDP 4789) between two
# namespaces over a veth pair; the capture is of the veth (outer headers).
ip netns add $NA
ip netns add $NB
ip link add i19va netns $NA type veth peer name i19vb netns $NB
ip -n $NA addr add 192.0.2.1/24 dev i19va
ip -n $NB addr add 192.0.2.2/24 dev i19vb
for n in $NA $NB; do ip -n $n link set lo up; done
ip -n $NA link set i19va up
ip -n $NB link set i19vb up
ip -n $NA link add vx42 type vxlan id 42 dstport 4789 local 192.0.2.1 remote 192.0.2.2
ip -n $NB link add vx42 type vxlan id 42 dstport 4789 local 192.0.2.2 remote 192.0.2.1
ip -n $NA addr add 198.51.100.1/24 dev vx42
ip -n $NB addr add 198.51.100.2/24 dev vx42
ip -n $NA addr add 2001:db8:42::1/64 dev vx42 nodad
ip -n $NB addr add 2001:db8:42::2/64 dev vx42 nodad
ip -n $NA link set vx42 up
ip -n $NB link set vx42 up
ip netns exec $NB python3 "$RESPONDER" 198.51.100.2 53 8 &
ip netns exec $NB python3 "$RESPONDER" 2001:db8:42::2 53 8 &
ip netns exec $NA tcpdump -q -i i19va -w "$OUT/made-vxlan.pcap" 'udp port 4789' 2> /dev/null &
DUMP=$!
sleep 1
ip netns exec $NA bash -c "$(declare -f queries); queries 198.51.100.2; queries 2001:db8:42::2"
sleep 1
kill $DUMP; wait $DUMP || true

# 3. The rest (the kernel here has no ipip, sit, gre or mpls devices): the
# DNS packets of the VXLAN capture, re-encapsulated by scapy.
/usr/bin/python3 "$HERE/derive.py" "$OUT/made-vxlan.pcap" "$OUT"
