package chunk

// Builder builds one SCTP packet in place in a buffer the caller owns and
// reuses: the common header first, then chunks appended one after the
// other, and the CRC32c last (RFC 9260 §6.8). It does not allocate once
// the buffer's capacity holds the packet.
//
//	var w chunk.Builder
//	w.Start(buf, srcPort, dstPort, peerVerificationTag)
//	w.Buf = sack.Append(w.Buf)
//	for _, seg := range segments {
//		userData := w.ReserveData(chunk.Data{Flags: ..., TSN: ..., PPID: 16}, seg.Len())
//		seg.CopyTo(userData) // DDP header and payload, copied once
//	}
//	packet := w.Finish()
//
// Buf is exported so that any chunk's Append method adds to it; Len and
// the chunks' Len methods tell the caller how close it is to the path MTU.
// The packet returned by Finish aliases the buffer and stays valid until
// the next Start.
type Builder struct {
	// Buf is the packet built so far, from its common header on.
	Buf []byte
}

// Start begins a packet in buf (from its start; its contents are
// overwritten) with a common header holding the ports and Verification Tag.
func (w *Builder) Start(buf []byte, srcPort, dstPort uint16, vtag uint32) {
	w.Buf = AppendHeader(buf[:0], srcPort, dstPort, vtag)
}

// Len returns the length of the packet so far.
func (w *Builder) Len() int { return len(w.Buf) }

// ReserveData appends a DATA chunk for n bytes of user data and returns the
// n bytes where the user data goes, for the caller to fill before Finish
// (see Data.AppendReserve).
func (w *Builder) ReserveData(d Data, n int) []byte {
	var userData []byte
	w.Buf, userData = d.AppendReserve(w.Buf, n)
	return userData
}

// ReserveIData is ReserveData for an I-DATA chunk.
func (w *Builder) ReserveIData(d IData, n int) []byte {
	var userData []byte
	w.Buf, userData = d.AppendReserve(w.Buf, n)
	return userData
}

// Finish computes the CRC32c over the packet, stores it in the common
// header and returns the packet. Chunks must not be changed afterwards
// (user data reserved with ReserveData included).
func (w *Builder) Finish() []byte {
	SetPacketChecksum(w.Buf)
	return w.Buf
}

// FinishZeroChecksum returns the packet with a Checksum of 0, for an
// association whose peer has announced the Zero Checksum Acceptable
// parameter (RFC 9653) with an error detection method the packet's path
// provides (DTLS, EDMIDDTLS).
func (w *Builder) FinishZeroChecksum() []byte {
	Header(w.Buf).SetChecksum(0)
	return w.Buf
}
