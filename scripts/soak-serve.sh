#!/usr/bin/env bash
# Soaks the built commands under issue 19's attacks at the issue's scale:
# cmd/iwarp's TestSoakServe builds iwarp and starts "iwarp serve" (tcp://,
# and sctp:// with --psk) and "iwarp perf --listen" as processes with
# their default limits, a fresh one for each attack, and runs:
#
#   - RDMA Writes with a bad MPA CRC, one connection after another: the
#     region serve reports at the close must be as it was;
#   - 3,800 silent MPA connections from one address (and 3,800 TCP
#     connections that send nothing): serve under 2 GiB;
#   - 3,800 DDP Stream Sessions opened from one address: serve under 2 GiB;
#   - a peer flooding its sctp:// sessions with RDMA Writes, killed with
#     SIGKILL (a child process): its sessions freed within 60 s;
#   - spoofed DTLS junk and ClientHellos at 10,000 datagrams a second from
#     512 addresses for at least 8 s: serve under 500 MiB;
#   - perf hellos asking for 8 GiB and 2 GiB: the perf server under 1 GiB,
#     while real "iwarp perf" runs go on;
#
# each beside a well-behaved peer from another loopback address that must
# get in every time (once a second) and move data. It prints, for each
# attack, the scale reached, the server's RSS before, at its peak and
# after, its heap (GODEBUG=gctrace=1), its CPU time, how the good peer
# fared and how long dead sessions took to go, and fails if a "Done when"
# number of the issue is not met.
#
# Usage: scripts/soak-serve.sh [DURATION]
#   DURATION  about how long the soak takes (Go duration; default 3m):
#             each attack is held for an eighth of it, at least 8 s; the
#             killed peer's sessions take the dead-peer timeout (30 s)
#             more.
#
# Linux only (it reads /proc, and binds 127.0.0.2-127.0.0.47).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-3m}
IWARP_SOAK=$duration \
	exec go test -run '^TestSoakServe$' -count 1 -v -timeout 0 ./cmd/iwarp/
