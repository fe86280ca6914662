#!/usr/bin/env bash
# Soaks the built commands under a hostile peer that speaks the protocol
# and then misbehaves: cmd/iwarp's TestHostile builds iwarp and starts
# "iwarp serve", "iwarp rping -s -P" and "iwarp perf --listen" as
# processes, each over tcp:// and sctp:// (with --psk), and from
# 127.0.0.2 sends them, over and over:
#
#   - Read Responses twice (over sctp:// the later DDP-SSN first), late,
#     never (the connection closed, or held), with half the data, in two
#     segments the Last one first, with a bit flipped (rping);
#   - Read Responses and Atomic Responses nobody asked for, and real ones
#     replayed (serve's Read Response, perf's Atomic Response), a Send
#     twice, as many Read Requests as the IRD and four times as many with
#     the Responses read a second late (serve);
#   - segments with a bit flipped after MPA's CRC is computed, or in the
#     plaintext handed to DTLS; segments shorter than their DDP Header;
#     half an FPDU, then gone;
#   - connections abandoned in their TCP, MPA, DTLS and DDP Stream
#     Session startups, and ten reconnects in a row;
#
# beside a well-behaved client on 127.0.0.1 (RDMA Writes read back and
# compared, rping's pings with their data checked, "iwarp perf --connect"
# runs) that must succeed every time. It fails if a server exits or
# prints a crash, if a misbehaviour is not answered as the protocol says
# (a Terminate, the connection closed, or the command's next message where
# it is legal), if the server's VmRSS peaks 128 MiB above where it
# started or grows by 64 MiB from the first quarter of the rounds to the
# last, or if more than 100 goroutines are left once every client has
# gone (counted in the SIGQUIT dump that ends each server). Every 30 s it
# prints the rounds, the RSS and how the good client fares.
#
# Usage: scripts/soak-hostile.sh [DURATION]
#   DURATION  how long each command is attacked (Go duration; default
#             10m): its tcp:// and sctp:// servers at once, the three
#             commands one after the other.
#
# Linux only (it reads /proc, and binds 127.0.0.2).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10m}
IWARP_HOSTILE=$duration \
	exec go test -run '^TestHostile$' -count 1 -v -timeout 0 ./cmd/iwarp/
