#!/usr/bin/env bash
# Records web/static/captures/lossy-tcp.pcap: MPA over a real TCP path
# that loses packets, as a capture point on that path sees it.
#
# Three network namespaces in a row, the client's, a router's and the
# server's, joined by veth pairs (segmentation offloads off, so the
# capture holds the TCP segments as they cross the link). The
# router forwards, and nftables there drops 8 % of the packets of more
# than 300 octets in each direction (the MPA startup gets through; data
# is lost). A sender's own netfilter would not do: TCP takes a packet its
# own host drops for a failed send and sends it again at once. dumpcap
# captures on the server's link, where:
#   - a packet from the client lost at the router never appears: the
#     capture has a hole, and the client's retransmission arrives after
#     the octets that follow it;
#   - a packet from the server lost at the router appears twice: the
#     original, then the server's retransmission.
# Over that path, `iwarp perf` makes two connections: 12 RDMA Writes of
# 6,000 octets with MPA Markers asked for by the client (so the FPDUs
# sent to it carry them), then 6 RDMA Reads of 6,000 octets. Which
# packets are lost changes with each recording.
#
# Usage: scripts/record-lossy-tcp.sh [OUT]   (as root; OUT defaults to
#        web/static/captures/lossy-tcp.pcap)
# Needs: ip (iproute2), nft (nftables), ethtool, dumpcap (tshark), go.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-web/static/captures/lossy-tcp.pcap}
for tool in ip nft ethtool dumpcap go; do
	command -v "$tool" >/dev/null || { echo "record-lossy-tcp: $tool is not installed" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "record-lossy-tcp: needs root (network namespaces and nftables)" >&2; exit 1; }

a=iwarp-lossy-a r=iwarp-lossy-r b=iwarp-lossy-b
work=$(mktemp -d)
cleanup() {
	kill "${srv:-}" "${cap:-}" 2>/dev/null || true
	for ns in "$a" "$r" "$b"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/iwarp" ./cmd/iwarp
for ns in "$a" "$r" "$b"; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
done
ip link add veth-a netns "$a" type veth peer name veth-ra netns "$r"
ip link add veth-b netns "$b" type veth peer name veth-rb netns "$r"
ip -n "$a" addr add 10.77.1.1/24 dev veth-a
ip -n "$r" addr add 10.77.1.2/24 dev veth-ra
ip -n "$r" addr add 10.77.2.2/24 dev veth-rb
ip -n "$b" addr add 10.77.2.1/24 dev veth-b
for end in "$a veth-a" "$r veth-ra" "$r veth-rb" "$b veth-b"; do
	set -- $end
	ip -n "$1" link set "$2" up
	ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null
done
# The router's link to the server carries 1,400 octets a packet, less
# than the 1,500 both ends see on their own links when they connect: the
# client learns the path's MTU from the router (ICMP, Fragmentation
# Needed) after its first full packets, and from then on its TCP cuts
# the FPDUs that MPA sized for the first MSS across two segments.
ip -n "$r" link set veth-ra mtu 1400
ip -n "$a" route add default via 10.77.1.2
ip -n "$b" route add default via 10.77.2.2
ip netns exec "$r" sysctl -q -w net.ipv4.ip_forward=1
ip netns exec "$r" nft -f - <<'EOF'
table inet loss {
	chain forward { type filter hook forward priority 0; tcp dport 7310 meta length > 300 numgen random mod 100 < 8 drop; tcp sport 7310 meta length > 300 numgen random mod 100 < 8 drop; }
}
EOF

ip netns exec "$a" "$work/iwarp" perf --listen tcp://10.77.1.1:7310 >"$work/server.log" 2>&1 &
srv=$!
ip netns exec "$a" dumpcap -q -P -i veth-a -f "tcp port 7310" -w "$work/capture.pcap" 2>"$work/dumpcap.log" &
cap=$!
for _ in $(seq 50); do
	grep -q "File:" "$work/dumpcap.log" 2>/dev/null && break
	sleep 0.1
done
ip netns exec "$b" "$work/iwarp" perf --connect tcp://10.77.1.1:7310 --markers --op write --size 6000 --iters 12
ip netns exec "$b" "$work/iwarp" perf --connect tcp://10.77.1.1:7310 --op read --size 6000 --iters 6
sleep 1
kill -INT "$cap"
wait "$cap" || true
cp "$work/capture.pcap" "$out"
echo "record-lossy-tcp: wrote $out"
