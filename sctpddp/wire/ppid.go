package wire

import "fmt"

// PPID is an SCTP Payload Protocol Identifier (RFC 4960 §3.3.1), the 32-bit
// field of a DATA chunk that RFC 5043 §5.2 uses to tell its two kinds of
// Payload Data Chunk apart.
type PPID uint32

// The Payload Protocol Identifiers of RFC 5043 §5.2 and §12:
//
//	DDP Segment Chunk          - 16
//	DDP Stream Session Control - 17
const (
	PPIDSegment        PPID = 16 // DDP Segment Chunk (§5.2.2)
	PPIDSessionControl PPID = 17 // DDP Stream Session Control (§5.2.3)
)

func (p PPID) String() string {
	switch p {
	case PPIDSegment:
		return "DDP Segment Chunk"
	case PPIDSessionControl:
		return "DDP Stream Session Control"
	}
	return fmt.Sprintf("PPID(%d)", uint32(p))
}

// The Adaptation Layer Indication of RFC 5043 §5.1, an INIT/INIT-ACK
// parameter defined by RFC 5061 §4.2.6:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Type =0xC006           |    Length = Variable          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Adaptation Indication                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// pion/sctp can neither send nor report this parameter, so package sctpddp
// does not put it on the wire (a deviation its documentation lists).
const (
	AdaptationLayerIndicationType uint16 = 0xC006     // parameter type
	AdaptationIndicationDDP       uint32 = 0x00000001 // "DDP - 0x00000001"
)
