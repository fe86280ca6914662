// Package replay turns a decoded capture of iWARP traffic (the records of
// capture, which "iwarp dump" prints) into what the demo page
// plays: the connections and DDP streams found, the MPA startup of each
// connection, and one event per FPDU or DDP Segment saying where its
// payload lands and which messages it completes.
//
// Placement follows RFC 5041 §5 as far as a capture shows it. A tagged
// segment (RDMA Write, RDMA Read Response) lands in the buffer its STag
// names at TO; the buffer's extent is learned from the traffic, from the
// lowest TO any segment names to the end of the highest. An untagged
// segment lands in the receive buffer that its QN and MSN select, at MO
// (RFC 5041 §5.3). A message is delivered when its last segment (L set)
// and every segment before it on its stream are placed, and every earlier
// message of the stream is delivered (RFC 5041 §5.4): over MPA that is
// when the last segment arrives, since TCP keeps order; over SCTP the
// DDP-SSN orders the segments of a stream (RFC 5043 §5.1).
//
// RDMAP's meaning is joined across messages: a Read Response names the
// Read Request it answers (RFC 5040 §4.4, in the order the requests were
// sent), an Atomic Response its Atomic Request by the Request Identifier
// (RFC 7306 §5.2), and a Terminate the segment whose DDP header it
// carries (RFC 5040 §4.8), read the RFC's way or, when the header is laid
// out as Linux siw's little-endian bitfields put it, that way.
//
// A CRC that fails marks the FPDU bad: RFC 5044 §4.4 has the receiver
// treat it as invalid, so nothing of it is placed.
//
// DecryptDTLS opens DDP over SCTP over DTLS 1.2 (RFC 6347) with the key
// log of the sessions (NSS CLIENT_RANDOM lines, as --keylog writes
// them): the keys come from the logged master secret by the TLS 1.2
// PRF's key expansion (RFC 5246 §6.3), the records open with AES-GCM
// (RFC 5288) or AES-CBC with HMAC-SHA256 checked (RFC 5246 §6.2.3.2).
// Deviations: no CCM suites, no renegotiation, and a record that fails
// to open is skipped and counted, not reported one by one.
//
// Build is pure computation on the records: no network, no files, and it
// compiles for js/wasm, where the page's WebAssembly calls it.
// Model.SummaryJSON, EventsJSON and SnapshotJSON give the JSON the page
// reads: the model without its events, a window of events with the
// octets each places, and the picture at any point of the capture.
package replay
