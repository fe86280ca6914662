// Package perftest speaks perftest's rdma_cm protocol (the -R option of
// ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_read_lat and
// ib_send_lat) over this module's MPA/TCP and RDMAP, as perftest 4.5-0.17
// (Debian 12's perftest 4.5+0.17, version string "6.06") speaks it over
// Linux siw: Dial is perftest's client, Serve its server.
//
// What follows was read in perftest's source (src/perftest_communication.c,
// perftest_resources.c, perftest_parameters.c and each test's main) and
// confirmed on the wire: testdata/ holds captures of perftest talking to
// itself over siw, and the tests decode them.
//
// # Connections
//
// Two MPA connections, both from the client to the server's port (18515
// by default), both revision 2 with RFC 6581's enhanced data (S=1),
// client-server (no RTR), no Private Data of perftest's own:
//
//   - the control connection (create_comm_struct, rdma_client_connect,
//     rdma_server_connect): IRD/ORD 0/0 (rdma_conn_param zeroed; librdmacm
//     takes 0 literally, only 0xff means "the device's maximum");
//   - after the first exchanges, the data connection
//     (create_rdma_cm_connection): IRD/ORD 0/0, or out_reads/out_reads for
//     ib_read_bw and ib_read_lat (siw's max_qp_rd_atom, 128, unless -o).
//     The server listens again on the same port only after the control
//     connection's first handshake; the client retries refused
//     connections 10 times, 100 ms apart.
//
// # The control connection
//
// Each side posts one 56-octet receive before connecting and reposts it
// right after each message it reads; every message is one Send, answered
// by one Send: the client writes and then reads, the server reads and
// then writes (ctx_xchg_data_rdma, ctx_hand_shake). perftest copies C
// variables as they are (x86-64, LP64):
//
//	exchange_versions   char version[16]       "6.06" and NULs (peers before 5.70 are refused)
//	check_sys_data      int cycle_buffer       4 octets, big-endian (page size, 4096)
//	                    int cache_line_size    4 octets, big-endian (64)
//	check_mtu           char[2]                the enum ibv_mtu in decimal and a NUL: "3\0" (1024)
//	ctx_hand_shake      struct pingpong_dest   56 octets, zeroed (before the data connection)
//	ctx_hand_shake      struct pingpong_dest   56 octets, zeroed (after it)
//
// then, per test (one queue pair; Dest is this side's record):
//
//	ib_write_bw, ib_read_bw  Dest ×3, the test, Dest, 5 report fields, Dest
//	ib_send_bw, ib_send_lat  Dest ×3, receives posted, Dest, the test, Dest
//	ib_read_lat              Dest ×4, the test, Dest
//	ib_write_lat             Dest ×4, the test (no closing exchange)
//
// struct pingpong_dest (see Dest) is lid, out_reads, qpn, psn, rkey, 4
// octets of padding, vaddr, gid[16], srqn, gid_index, each integer
// big-endian (rdma_write_keys converts them with htobe32/htobe64); the
// padding is whatever was on perftest's stack. Over iWARP only rkey and
// vaddr are used: the peer's data region, which ib_send_bw replaces by its
// credit buffer. The report (xchg_bw_reports) is size and iters as 8-octet
// big-endian integers, then BW peak, BW average and message rate as
// byte-swapped IEEE doubles, one Send each; perftest's server of a
// unidirectional test sends its report uninitialized and prints the
// client's.
//
// # The data connection
//
//   - ib_write_bw: the client RDMA Writes -s octets to (rkey, vaddr +
//     offset), -t outstanding, a completion asked for every -Q (1 above
//     8 KiB), the offset stepping by the size rounded up to the cache line
//     within the cycle buffer (for sizes up to half of it). The server only
//     waits.
//   - ib_read_bw: the same with RDMA Reads (28-octet Read Requests, the
//     sink being the client's buffer).
//   - ib_send_bw: the client Sends; the server posts rx depth (-r, 512,
//     at most -n) receives and reposts them until -n are posted. Over
//     iWARP the server RDMA Writes its count of receives as a
//     little-endian uint32 into the client's credit buffer every
//     rx depth/3 receives, and the client keeps fewer than rx depth Sends
//     beyond the last credit.
//   - ib_send_lat: Send ping-pong, the client first; each side reposts a
//     receive while more are due.
//   - ib_read_lat: one RDMA Read at a time from the client; the server
//     waits.
//   - ib_write_lat: RDMA Write ping-pong, the server first: each side
//     writes -s octets whose last octet counts the pings, and spins on the
//     last octet of its own buffer until the peer's Write has set it. Here
//     an observer of the data queue pair reads that octet on the goroutine
//     that placed it, instead of polling memory. Serve refuses
//     ib_write_lat: see ErrWriteLatServer.
//
// At the end each side destroys its resources: the connections close.
//
// # Limits
//
// Only the cycle buffer and the cache line size come from the peer; the
// server takes the larger of its own and the peer's and holds the memory
// that decides to Config.MemoryBudget (Config.Check, ErrBudget). One
// queue pair (-q 1), RC, no duration mode (-D), no --run_infinitely, no
// bidirectional mode (-b), one size per session (no -a).
package perftest
