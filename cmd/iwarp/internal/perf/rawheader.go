package perf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// RawMode is what a raw transfer does.
type RawMode uint8

// The raw transfers.
const (
	// RawToServer: Count messages of Size octets, client to server, as
	// one stream; the server answers one octet when it has them all.
	RawToServer RawMode = 1
	// RawToClient: the same, server to client; the client answers one
	// octet when it has them all.
	RawToClient RawMode = 2
	// RawRPC: Count requests of Req octets, each answered with Size
	// octets, with up to Window requests outstanding (1: a ping-pong).
	RawRPC RawMode = 3
)

func (m RawMode) String() string {
	switch m {
	case RawToServer:
		return "to-server"
	case RawToClient:
		return "to-client"
	case RawRPC:
		return "rpc"
	}
	return fmt.Sprintf("RawMode(%d)", uint8(m))
}

// RawHeaderLen is the length of a raw transfer's header.
const RawHeaderLen = 40

// rawMagic starts a raw transfer's header: "IWPR".
const rawMagic = 0x49575052

// RawHeader is the first thing a client sends on a raw connection (the
// first octets of a TCP connection, the first message of an SCTP stream):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       magic "IWPR"                            |
//	+---------------+---------------+-------------------------------+
//	|     Mode      |    Flags      |           reserved            |
//	+---------------+---------------+-------------------------------+
//	|                             Size                              |
//	+---------------------------------------------------------------+
//	|                             Count                             |
//	+---------------------------------------------------------------+
//	|                              Req                              |
//	+---------------------------------------------------------------+
//	|                            Window                             |
//	+---------------------------------------------------------------+
//	|            Token (16 octets: the perf connection's)           |
//	+---------------------------------------------------------------+
//
// Flags bit 0: every message is followed by its CRC32c (TCP only). All
// big-endian.
type RawHeader struct {
	Mode   RawMode
	CRC    bool
	Size   uint32 // each message (a response, in RawRPC)
	Count  uint32 // messages (round trips, in RawRPC)
	Req    uint32 // RawRPC: each request
	Window uint32 // RawRPC: requests outstanding at most
	Token  [TokenLen]byte
}

// Len returns the encoded length, RawHeaderLen.
func (h *RawHeader) Len() int { return RawHeaderLen }

// Append appends the header's RawHeaderLen octets to b.
func (h *RawHeader) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, rawMagic)
	flags := byte(0)
	if h.CRC {
		flags = 1
	}
	b = append(b, byte(h.Mode), flags, 0, 0)
	b = binary.BigEndian.AppendUint32(b, h.Size)
	b = binary.BigEndian.AppendUint32(b, h.Count)
	b = binary.BigEndian.AppendUint32(b, h.Req)
	b = binary.BigEndian.AppendUint32(b, h.Window)
	return append(b, h.Token[:]...)
}

// ErrRawHeader is ParseRawHeader's error.
var ErrRawHeader = errors.New("perf: bad raw transfer header")

// ParseRawHeader decodes a raw transfer's header: its magic, a known mode
// and a size and count of at least one (requests and window too in
// RawRPC). It checks nothing against limits: the server does.
func ParseRawHeader(b []byte) (RawHeader, int, error) {
	if len(b) < RawHeaderLen {
		return RawHeader{}, 0, fmt.Errorf("%w: %d octets, want %d", ErrRawHeader, len(b), RawHeaderLen)
	}
	if binary.BigEndian.Uint32(b) != rawMagic {
		return RawHeader{}, 0, fmt.Errorf("%w: no magic", ErrRawHeader)
	}
	h := RawHeader{Mode: RawMode(b[4]), CRC: b[5]&1 != 0,
		Size:   binary.BigEndian.Uint32(b[8:]),
		Count:  binary.BigEndian.Uint32(b[12:]),
		Req:    binary.BigEndian.Uint32(b[16:]),
		Window: binary.BigEndian.Uint32(b[20:]),
	}
	copy(h.Token[:], b[24:RawHeaderLen])
	switch {
	case h.Mode != RawToServer && h.Mode != RawToClient && h.Mode != RawRPC:
		return RawHeader{}, 0, fmt.Errorf("%w: mode %d", ErrRawHeader, b[4])
	case h.Size == 0 || h.Count == 0:
		return RawHeader{}, 0, fmt.Errorf("%w: size %d, count %d", ErrRawHeader, h.Size, h.Count)
	case h.Mode == RawRPC && (h.Req == 0 || h.Window == 0):
		return RawHeader{}, 0, fmt.Errorf("%w: request %d, window %d", ErrRawHeader, h.Req, h.Window)
	}
	return h, RawHeaderLen, nil
}
