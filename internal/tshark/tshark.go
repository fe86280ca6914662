// Package tshark holds the options with which the tests have tshark
// dissect iWARP captures, so that every test reads a capture the same way.
//
//	out, err := exec.Command("tshark", append([]string{"-r", file, "-V"}, tshark.Args...)...).Output()
package tshark

// Args are the options of every dissection of an iWARP capture:
//
//   - The heuristics for RPC-over-RDMA and SMB Direct are off: they would
//     take Send payloads for theirs.
//   - The ip.access (gsm_ipa) dissector is off: its heuristic claims a TCP
//     segment that starts with the all-zero first Marker.
//   - TCP tries its heuristic dissectors before those registered on a
//     port: MPA is found only by a heuristic (its startup frames), and a
//     connection's ephemeral port may be one another protocol registered
//     (TCP 34980, EtherCAT's, made tshark read a perftest control
//     connection as EtherCAT and TwinCAT Network Variables).
var Args = []string{
	"--disable-heuristic", "rpcrdma_iwarp",
	"--disable-heuristic", "smb_direct_iwarp",
	"--disable-protocol", "gsm_ipa",
	"-o", "tcp.try_heuristic_first:TRUE",
}
