// Package pcapfile reads and writes packet capture files, enough for the
// project's tests and for recording and dumping iWARP sessions:
//
//   - Reader: pcap (both byte orders, microsecond and nanosecond
//     timestamps) and pcapng (Section Header, Interface Description,
//     Enhanced, Simple and the obsolete Packet Block; if_tsresol; several
//     sections and byte orders in one file).
//   - DecodeIP: Ethernet (with 802.1Q/802.1ad tags), Linux cooked v1 and
//     v2, BSD/OpenBSD loopback and raw IP link layers; IPv4 and IPv6
//     (hop-by-hop, routing and destination options headers). DecodeTCP
//     and DecodeSCTP decode what it finds (DecodeSCTP also the records of
//     Wireshark's "Export PDUs to File", DecodeExportedPDU, and SCTP in
//     UDP as RFC 6951 encapsulates it, known by its checksum).
//   - Assembler and ReadStreams: each direction's TCP byte stream put
//     back together by sequence number, with retransmitted and
//     overlapping segments merged, missing octets reported as a
//     *GapError and retransmissions that disagree as an *OverlapError.
//   - SCTPAssembler: SCTP user messages put back together from their
//     DATA chunks, retransmitted chunks dropped.
//   - Writer and ConnWriter: a pcap file with synthesized Ethernet, IPv4
//     or IPv6 (AppendIPHeader) and TCP headers around given byte streams,
//     which tshark and Wireshark open as an ordinary capture. File writes one
//     to disk as packets come, whole records at a time, so that it can be
//     read while it grows and survives its writer's death.
//
// It is made for clean captures (loopback, a test network): IP fragments
// are skipped, not reassembled; sequence numbers are compared with 32-bit
// serial arithmetic, so one direction must carry less than 2 GiB; and
// every segment's payload is kept in memory until the streams are
// assembled. Malformed files and packets give errors wrapping ErrFormat,
// never a panic, and no length field makes it allocate more than
// MaxPacket plus a little per packet.
package pcapfile
