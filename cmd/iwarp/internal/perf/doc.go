// Package perf is the engine of `iwarp perf`: perftest-style bandwidth
// and latency of RDMA Write, RDMA Read, Send (RFC 5040) and Atomic
// Operations (RFC 7306 FetchAdd and CmpSwap) between two of this module's
// queue pairs, over whatever transport the caller connects them with
// (MPA/TCP, DDP over SCTP), and the same bytes over the raw transport for
// comparison. The command keeps its flags, output and wiring; this
// package has the control protocol, the client and the server, the raw
// baselines and the statistics (perftest's columns, which `iwarp perf
// --perftest` prints too).
//
// # The control protocol
//
// Control messages are Sends of CtlLen octets that start with the magic
// "IWPF" (Ctl, ParseCtl); data Sends are told apart by their length or
// first octets. The client sends a hello (the operation, the largest
// size, the receive buffers it wants posted, its region for Write
// latency's answers, whether it will compare with the raw transport);
// the server grants it, registering the regions and buffers, and answers
// with an advert (the region's STag and TO, the credit window of a Send
// test, the raw listener's port and a token for it, its AtomicIRD), or
// refuses it (CtlRefuse: a code and the numbers, which the client returns
// as *RefusedError). Each test is a start answered by an ack, the
// operations, and a done answered by an ack once everything before it has
// landed. A Send bandwidth test's sender keeps within the credits the
// server returns; a Send latency test's Sends are echoed, a Write
// latency test's Write and zero-length Send answered the same way.
//
// # Raw baselines
//
// A raw transfer (RawHeader, then the data) runs on a connection of its
// own to the server's raw listener, alternating with the iWARP test in
// CompareRounds rounds. Over TCP it is the best plain Go stream (see
// rawtcp.go: gathered or batched writes of up to 1 MiB, reads of up to
// 1 MiB, CRC32c over every octet on both sides when MPA uses CRCs);
// over SCTP, messages of the MULPDU on an association with the iWARP
// one's configuration; for latency, round trips of the same sizes as the
// RDMA messages (a Send's bytes there and back, a Read Request's 28
// octets and the bytes back, an Atomic Request's 52 and an Atomic
// Response's 12).
//
// # Limits
//
// A Server sizes nothing from a client's word alone (Limits): each
// connection is admitted within connection counts in all and per IP
// address, gets a protection domain of its own limited to what its hello
// was granted, and its hello is granted only within a per-connection and a
// per-server memory budget; a connection without a hello within
// HelloTimeout, or on which nothing moves for IdleTimeout, is closed. The
// raw listener serves only a live perf connection that asked for it (by
// the token of its advert), within that connection's grant, one transfer
// at a time. docs/security.md has the table and the attack tests.
//
// Deviations from perftest: latency samples are each iteration's own
// round trip (perftest's are differences of successive posts) and the
// typical latency is their median; a Write latency round trip ends with a
// zero-length Send rather than a polled octet (Go cannot poll memory
// safely), so it is compared with an echo.
package perf
