// Package capture decodes and records captures of iWARP traffic.
//
// Decode reads a pcap or pcapng capture (capture/pcapfile) and returns
// one Record per MPA startup frame and FPDU of each MPA/TCP connection
// (Markers stripped and CRCs checked as negotiated) and per DDP Segment
// and DDP Stream Session Control message carried in SCTP DATA chunks
// (RFC 5043), with the DDP and RDMAP fields (RFC 5040, RFC 5041, RFC 7306)
// and a note in plain words. "iwarp dump" prints them.
//
// Recorder writes what an endpoint sends and receives as a capture while
// it runs: the MPA byte stream of each TCP connection inside synthesized
// Ethernet/IP/TCP packets, one FPDU a segment, or the SCTP packets of a
// DTLS association before encryption inside raw IP packets. Packets reach
// the file as they come (pcapfile.File), so the capture can be read while
// it grows and is whole up to its last packets when the process is killed.
package capture
