package chunk

import "encoding/binary"

// Offsets of the SACK chunk's fixed fields, and their length with the chunk
// header.
const (
	sackCumTSNOff = 4
	sackARwndOff  = 8
	sackNumGapOff = 12
	sackNumDupOff = 14

	sackFixedLen = 16
)

// SACK is a Selective Acknowledgement (SACK) chunk (RFC 9260 §3.3.4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 3    |  Chunk Flags  |         Chunk Length          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Cumulative TSN Ack                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Advertised Receiver Window Credit (a_rwnd)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Number of Gap Ack Blocks = N  |  Number of Duplicate TSNs = M |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Gap Ack Block #1 Start     |     Gap Ack Block #1 End      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	/                                                               /
//	\                              ...                              \
//	/                                                               /
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Gap Ack Block #N Start     |     Gap Ack Block #N End      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Duplicate TSN 1                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	/                                                               /
//	\                              ...                              \
//	/                                                               /
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Duplicate TSN M                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The Gap Ack Blocks and Duplicate TSNs are kept in wire form, so that
// ParseSACK hands them out as views of the packet without allocating and
// the association builds them into slices it reuses:
//
//	s.GapAckBlocks = s.GapAckBlocks[:0].AppendBlock(2, 3).AppendBlock(5, 5)
//
// Number of Gap Ack Blocks and Number of Duplicate TSNs are derived from
// the lists' lengths.
type SACK struct {
	CumulativeTSNAck uint32
	ARwnd            uint32 // Advertised Receiver Window Credit (a_rwnd)
	GapAckBlocks     GapAckBlocks
	DuplicateTSNs    TSNList
}

// Len returns the bytes Append adds.
func (s SACK) Len() int { return sackFixedLen + len(s.GapAckBlocks) + len(s.DuplicateTSNs) }

// Append appends the chunk to b.
func (s SACK) Append(b []byte) []byte {
	b = appendChunkHeader(b, TypeSACK, 0, s.Len())
	b = binary.BigEndian.AppendUint32(b, s.CumulativeTSNAck)
	b = binary.BigEndian.AppendUint32(b, s.ARwnd)
	b = binary.BigEndian.AppendUint16(b, uint16(s.GapAckBlocks.Len()))
	b = binary.BigEndian.AppendUint16(b, uint16(s.DuplicateTSNs.Len()))
	b = append(b, s.GapAckBlocks...)
	return append(b, s.DuplicateTSNs...)
}

// ParseSACK parses the SACK chunk at the start of b and returns it and the
// bytes it occupies. The lists alias b. The Chunk Length must be exactly 16
// plus 4 bytes per Gap Ack Block and per Duplicate TSN.
func ParseSACK(b []byte) (SACK, int, error) {
	_, v, n, err := parseChunk(b, TypeSACK, sackFixedLen)
	if err != nil {
		return SACK{}, 0, err
	}
	numGap := int(binary.BigEndian.Uint16(b[sackNumGapOff:]))
	numDup := int(binary.BigEndian.Uint16(b[sackNumDupOff:]))
	if chunkHeaderLen+len(v) != sackFixedLen+4*numGap+4*numDup {
		return SACK{}, 0, chunkErr(TypeSACK, 0, ErrLength)
	}
	s := SACK{
		CumulativeTSNAck: binary.BigEndian.Uint32(b[sackCumTSNOff:]),
		ARwnd:            binary.BigEndian.Uint32(b[sackARwndOff:]),
	}
	gaps := b[sackFixedLen : sackFixedLen+4*numGap]
	dups := b[sackFixedLen+4*numGap : sackFixedLen+4*numGap+4*numDup]
	if numGap > 0 {
		s.GapAckBlocks = GapAckBlocks(gaps)
	}
	if numDup > 0 {
		s.DuplicateTSNs = TSNList(dups)
	}
	return s, n, nil
}

// GapAckBlock is one Gap Ack Block: offsets from the Cumulative TSN Ack.
// "All DATA chunks with TSNs greater than or equal to (Cumulative TSN Ack +
// Gap Ack Block Start) and less than or equal to (Cumulative TSN Ack + Gap
// Ack Block End) of each Gap Ack Block are assumed to have been received
// correctly."
type GapAckBlock struct {
	Start, End uint16
}

// GapAckBlocks is a list of Gap Ack Blocks in wire form, 4 bytes each.
type GapAckBlocks []byte

// Len returns the number of blocks.
func (g GapAckBlocks) Len() int { return len(g) / 4 }

// At returns the i-th block.
func (g GapAckBlocks) At(i int) GapAckBlock {
	return GapAckBlock{
		Start: binary.BigEndian.Uint16(g[4*i:]),
		End:   binary.BigEndian.Uint16(g[4*i+2:]),
	}
}

// AppendBlock appends a block to the list.
func (g GapAckBlocks) AppendBlock(start, end uint16) GapAckBlocks {
	g = binary.BigEndian.AppendUint16(g, start)
	return binary.BigEndian.AppendUint16(g, end)
}

// TSNList is a list of 32-bit TSNs in wire form, as the Duplicate TSNs of a
// SACK.
type TSNList []byte

// Len returns the number of TSNs.
func (l TSNList) Len() int { return len(l) / 4 }

// At returns the i-th TSN.
func (l TSNList) At(i int) uint32 { return binary.BigEndian.Uint32(l[4*i:]) }

// AppendTSN appends a TSN to the list.
func (l TSNList) AppendTSN(tsn uint32) TSNList { return binary.BigEndian.AppendUint32(l, tsn) }
