// Package chunk is the wire codec of the SCTP association (RFC 9260) that
// carries DDP over SCTP (RFC 5043): the common header and its CRC32c, an
// iterator over a packet's chunks, one type per chunk with Append, Len and
// ParseX, the INIT parameters and error causes, and a Builder that writes a
// packet into a reused buffer. It holds no association state, starts no
// goroutines and reads no clocks; the association decides what a chunk
// means.
//
// Receiving a packet, without allocating:
//
//	if err := chunk.VerifyChecksum(pkt); err != nil {
//		return // RFC 9260 §6.8: silently discard
//	}
//	h := chunk.Header(pkt)
//	it := chunk.Chunks(pkt)
//	for it.Next() {
//		c := it.Chunk()
//		switch c.Type() {
//		case chunk.TypeData:
//			d, _, err := chunk.ParseData(c)
//			...
//		case chunk.TypeSACK:
//			s, _, err := chunk.ParseSACK(c)
//			for i := range s.GapAckBlocks.Len() {
//				blk := s.GapAckBlocks.At(i)
//				...
//			}
//		default:
//			if a := c.Type().Unrecognized(); a.Report() {
//				cause := chunk.RawCause{Code: chunk.CauseUnrecognizedChunkType, Info: c.Unpadded()}
//				...
//			}
//		}
//	}
//	if err := it.Err(); err != nil { ... }
//
// Sending one:
//
//	var w chunk.Builder
//	w.Start(buf, src, dst, h.VerificationTag())
//	w.Buf = chunk.SACK{CumulativeTSNAck: cum, ARwnd: rwnd}.Append(w.Buf)
//	copy(w.ReserveData(chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, TSN: tsn, PPID: 16}, len(seg)), seg)
//	pkt := w.Finish()
//
// # Conventions
//
// ParseX(b) parses the chunk, parameter or error cause at the start of b
// and returns it and the bytes it occupies, padding included. Slices in
// the result alias b and are valid as long as b is. Variable lists (Gap Ack
// Blocks, Duplicate TSNs, FORWARD TSN entries, stream lists, the parameters
// of an INIT, the causes of an ABORT) are kept in wire form: parsing hands
// out views of the packet read with Len/At or an iterator, and building
// appends to slices the caller reuses, so neither direction allocates.
// Append(b) appends the encoding with its padding; Len returns its length.
//
// Malformed input returns an error, never panics: a *ChunkError,
// *ParamError or *CauseError wrapping one of the sentinel errors
// (ErrTruncated, ErrLength, ErrWrongType, ErrNoUserData, ErrParamCount, ...)
// for errors.Is. Append methods panic only on a chunk too long for its
// 16-bit length field, which no input can cause.
//
// # What is implemented
//
//   - RFC 9260 §3 (packet format), §3.1 (common header), §3.2 (chunk
//     format, padding, the unrecognized chunk action of Table 2: Type
//     .Unrecognized), §3.2.1 (parameter format and Table 3:
//     ParamType.Unrecognized), §3.3.1 to §3.3.13 (all chunks: DATA, INIT,
//     INIT ACK, SACK, HEARTBEAT, HEARTBEAT ACK, ABORT, SHUTDOWN, SHUTDOWN
//     ACK, ERROR, COOKIE ECHO, COOKIE ACK, SHUTDOWN COMPLETE), the INIT and
//     INIT ACK parameters of §3.3.2.1 and §3.3.3.1 and the 13 error causes
//     of §3.3.10, and the CRC32c of §6.8 and Appendix A.
//   - RFC 3758 §3.1 and §3.2: Forward-TSN-Supported and FORWARD TSN.
//   - RFC 4895: the Random, Chunk List and Requested HMAC Algorithm
//     parameters as types only, carried opaque (RawParam); no AUTH chunk.
//   - RFC 5061 §4.1 (ASCONF, ASCONF-ACK), §4.2 (their parameters, Adaptation
//     Layer Indication, Supported Extensions), §4.3 (error causes).
//   - RFC 5043 §5.1 and §12: AdaptationCodePointDDP, the code point the
//     Adaptation Layer Indication carries for DDP.
//   - RFC 6525 §3.1 and §4: RE-CONFIG and its six parameters.
//   - RFC 8260 §2.1 and §2.3.1: I-DATA and I-FORWARD-TSN.
//   - RFC 9653: the Zero Checksum Acceptable parameter (type 0x8001, EDMID
//     1 for DTLS) and Builder.FinishZeroChecksum. The RFC's text was not at
//     hand: the parameter follows its abstract and pion/sctp's
//     implementation, which agree.
//
// RFC 6951 (SCTP over UDP) changes nothing in these formats: the packet is
// carried whole in a UDP datagram.
//
// # Deviations and choices
//
//   - A packet that ends inside the padding of its last chunk is rejected
//     (ErrTruncated): RFC 9260 §3.2 makes the sender pad every chunk, and
//     Linux and pion/sctp reject such packets too. The value of padding
//     bytes is never checked ("The receiver MUST ignore the padding bytes").
//   - The last parameter of a chunk may have its padding counted in the
//     Chunk Length or not ("A robust implementation is expected to accept
//     the chunk whether or not the final padding has been included").
//   - SHUTDOWN, SHUTDOWN ACK, COOKIE ACK and SHUTDOWN COMPLETE must have
//     exactly the Length their figures give (8, 4, 4, 4), a SACK exactly 16
//     plus its blocks and TSNs, and the FORWARD TSN variants whole entries.
//   - An ERROR chunk with no error cause is accepted.
//   - A HEARTBEAT or HEARTBEAT ACK must hold exactly one Heartbeat Info
//     parameter. pion/sctp v1.12.1 sends HEARTBEAT chunks of Length 4,
//     without it: ParseHeartbeat rejects them, and since the iterator still
//     hands such a chunk out, the association can skip that chunk alone.
//   - Parsers check lengths and structure; checks on values that call for
//     an association's action are separate (Init.Check, InitAck.Check) or
//     left to it (the Host Name Address ABORT, the RE-CONFIG combinations,
//     the bundling rules of §3 and §6.10, Verification Tag rules of §8.5).
//   - Reserved bits and fields are written as 0 and not reported: the
//     flags of chunks other than DATA, I-DATA, ABORT and SHUTDOWN COMPLETE,
//     the Res bits of DATA and I-DATA, and the Reserved fields of I-DATA,
//     I-FORWARD-TSN entries, Invalid Stream Identifier and the Add Streams
//     requests.
//   - PPIDs are read and written big-endian (RFC 9260 leaves their byte
//     order to the upper layer; RFC 5043's are in network byte order).
package chunk
