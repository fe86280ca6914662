#!/usr/bin/env bash
# Soaks sctp:// (package sctpddp) under every attack its limit tests run,
# at once, for a while: a flood of junk datagrams and of real DTLS
# ClientHellos from 512 spoofed source addresses, a peer that takes every
# association and session it is allowed, and peers that vanish without a
# goodbye, while well-behaved clients connect over and over. Every 5 s it
# prints the heap in use, the goroutines, the handshakes and associations
# the Listener holds and how the clients fared; it fails if more than 1 in
# 20 well-behaved connections fail, if dead peers are not reaped, or if
# memory and goroutines have not come back at the end.
#
# Usage: scripts/soak-sctp.sh [DURATION [FLOOD_RATE]]
#   DURATION    how long the attacks last (Go duration; default 2m)
#   FLOOD_RATE  datagrams a second of each kind, junk and ClientHellos
#               (default 10000; the machine's CPU bounds what is reached)
#
# Linux (or any system where all of 127.0.0.0/8 is loopback): the
# attackers bind 127.0.0.2-19.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-2m}
rate=${2:-10000}
SCTPDDP_SOAK=$duration SCTPDDP_FLOOD_RATE=$rate \
	exec go test -run '^TestSoak$' -count 1 -v -timeout 0 ./sctpddp/
