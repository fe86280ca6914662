package rdmap

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// TerminateHeader is the Terminate Header, RFC 5040 §4.8, Figures 7 and 8.
// It immediately follows the untagged DDP header (QN 2).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Layer | EType |   Error Code  |M|D|R|       Reserved          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  DDP Segment Length  (if any) |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	//                  Terminated DDP Header (if any)             //
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	//                 Terminated RDMA Header (if any)             //
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The DDP Segment Length is present when M or D is set ("It MUST be valid
// if the M bit is set. It MUST be present when the D bit is set."); the
// Terminated DDP Header, 14 or 18 octets as its own T flag says, when D is
// set; the Terminated RDMA Header, an RDMA Read Request Header of 28
// octets, when R is set.
type TerminateHeader struct {
	Layer      term.Layer
	EType      uint8
	Code       uint8
	M, D, R    bool
	SegLen     uint16
	DDPHeader  []byte // the Terminated DDP Header when D is set
	RDMAHeader []byte // the Terminated RDMA Header when R is set
}

// Errors from ParseTerminate.
var (
	ErrShortTerminate = errors.New("rdmap: Terminate Header truncated")
	ErrTerminateHdrCt = errors.New("rdmap: Terminate Header's R bit is set without the D bit")
)

// Err returns the triple as an error reported by the peer.
func (t *TerminateHeader) Err() *term.Error {
	return &term.Error{Layer: t.Layer, EType: t.EType, Code: t.Code, Remote: true}
}

// Len returns the encoded length of t.
func (t *TerminateHeader) Len() int {
	n := 4
	if t.M || t.D {
		n += 2
	}
	if t.D {
		n += len(t.DDPHeader)
	}
	if t.R {
		n += len(t.RDMAHeader)
	}
	return n
}

// Append appends the wire form of t to b. The Reserved bits are zero.
func (t *TerminateHeader) Append(b []byte) []byte {
	b = append(b, uint8(t.Layer)<<4|t.EType&0x0f, t.Code)
	var hdrct byte
	if t.M {
		hdrct |= 0x80
	}
	if t.D {
		hdrct |= 0x40
	}
	if t.R {
		hdrct |= 0x20
	}
	b = append(b, hdrct, 0)
	if t.M || t.D {
		b = binary.BigEndian.AppendUint16(b, t.SegLen)
	}
	if t.D {
		b = append(b, t.DDPHeader...)
	}
	if t.R {
		b = append(b, t.RDMAHeader...)
	}
	return b
}

// ParseTerminate decodes a Terminate Header. The returned slices alias b.
func ParseTerminate(b []byte) (TerminateHeader, int, error) {
	var t TerminateHeader
	if len(b) < 4 {
		return t, 0, ErrShortTerminate
	}
	t.Layer = term.Layer(b[0] >> 4)
	t.EType = b[0] & 0x0f
	t.Code = b[1]
	t.M, t.D, t.R = b[2]&0x80 != 0, b[2]&0x40 != 0, b[2]&0x20 != 0
	n := 4
	if t.M || t.D {
		if len(b) < n+2 {
			return t, 0, ErrShortTerminate
		}
		t.SegLen = binary.BigEndian.Uint16(b[n:])
		n += 2
	}
	if t.D {
		if len(b) < n+1 {
			return t, 0, ErrShortTerminate
		}
		hl := ddp.Control(b[n]).HeaderLen()
		if len(b) < n+hl {
			return t, 0, ErrShortTerminate
		}
		t.DDPHeader = b[n : n+hl]
		n += hl
	} else if t.R {
		return t, 0, ErrTerminateHdrCt
	}
	if t.R {
		if len(b) < n+ReadRequestLen {
			return t, 0, ErrShortTerminate
		}
		t.RDMAHeader = b[n : n+ReadRequestLen]
		n += ReadRequestLen
	}
	return t, n, nil
}

func (t *TerminateHeader) String() string {
	return fmt.Sprintf("Terminate %s M=%t D=%t R=%t seglen=%d", t.Err().Name(), t.M, t.D, t.R, t.SegLen)
}
