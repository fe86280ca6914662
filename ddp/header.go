package ddp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Header lengths, RFC 5041 §4.2 (112 bits) and §4.3 (144 bits).
const (
	TaggedHeaderLen   = 14
	UntaggedHeaderLen = 18
	MaxHeaderLen      = UntaggedHeaderLen
)

// Field offsets in the headers (RFC 5041 Figures 4 and 5).
const (
	offControl  = 0  // both: the DDP Control Field
	offRsvdULP  = 1  // both: RsvdULP (one octet tagged, five untagged)
	offSTag     = 2  // tagged: STag, 32 bits
	offTO       = 6  // tagged: TO, 64 bits
	offQN       = 6  // untagged: QN, 32 bits
	offMSN      = 10 // untagged: MSN, 32 bits
	offMO       = 14 // untagged: MO, 32 bits
	rsvdULPLenU = 5  // untagged RsvdULP: 40 bits
)

// Version is the DDP version this package speaks: "This field MUST be set
// to one to indicate the version of the specification described in this
// document." (RFC 5041 §4.1)
const Version = 1

// Control is the DDP Control Field, RFC 5041 §4.1, Figure 3:
//
//	+-+-+-+-+-+-+-+-+
//	|T|L| Rsvd  |DV |
//	+-+-+-+-+-+-+-+-+
type Control byte

const (
	controlT    Control = 0x80
	controlL    Control = 0x40
	controlRsvd Control = 0x3c
	controlDV   Control = 0x03
)

// MakeControl builds a control field with Rsvd zero: "This field MUST be
// set to zero on transmit" (RFC 5041 §4.1).
func MakeControl(tagged, last bool, dv uint8) Control {
	c := Control(dv) & controlDV
	if tagged {
		c |= controlT
	}
	if last {
		c |= controlL
	}
	return c
}

// Tagged reports the T flag.
func (c Control) Tagged() bool { return c&controlT != 0 }

// Last reports the L flag.
func (c Control) Last() bool { return c&controlL != 0 }

// DV returns the DDP version field.
func (c Control) DV() uint8 { return uint8(c & controlDV) }

// HeaderLen returns the length of the header that this control field
// starts.
func (c Control) HeaderLen() int {
	if c.Tagged() {
		return TaggedHeaderLen
	}
	return UntaggedHeaderLen
}

// TaggedHeader is a view of a DDP Tagged Buffer Model header, RFC 5041
// §4.2, Figure 4. It must be at least TaggedHeaderLen bytes long.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	                                +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	                                |T|L| Rsvd  | DV|   RsvdULP     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              STag                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                               TO                              +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type TaggedHeader []byte

// Control returns the DDP Control Field.
func (h TaggedHeader) Control() Control { return Control(h[offControl]) }

// RsvdULP returns the 8-bit field reserved for the ULP (RDMAP's control
// byte).
func (h TaggedHeader) RsvdULP() byte { return h[offRsvdULP] }

// STag returns the Steering Tag.
func (h TaggedHeader) STag() uint32 { return binary.BigEndian.Uint32(h[offSTag:]) }

// TO returns the Tagged Offset.
func (h TaggedHeader) TO() uint64 { return binary.BigEndian.Uint64(h[offTO:]) }

// UntaggedHeader is a view of a DDP Untagged Buffer Model header, RFC 5041
// §4.3, Figure 5. It must be at least UntaggedHeaderLen bytes long.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	                                +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	                                |T|L| Rsvd  | DV| RsvdULP[0:7]  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            RsvdULP[8:39]                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               QN                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              MSN                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              MO                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type UntaggedHeader []byte

// Control returns the DDP Control Field.
func (h UntaggedHeader) Control() Control { return Control(h[offControl]) }

// RsvdULP returns the 40-bit field reserved for the ULP: RDMAP's control
// byte followed by the Invalidate STag (RFC 5040 §4.1).
func (h UntaggedHeader) RsvdULP() []byte { return h[offRsvdULP : offRsvdULP+rsvdULPLenU] }

// QN returns the Queue Number.
func (h UntaggedHeader) QN() uint32 { return binary.BigEndian.Uint32(h[offQN:]) }

// MSN returns the Message Sequence Number.
func (h UntaggedHeader) MSN() uint32 { return binary.BigEndian.Uint32(h[offMSN:]) }

// MO returns the Message Offset.
func (h UntaggedHeader) MO() uint32 { return binary.BigEndian.Uint32(h[offMO:]) }

// Header is a decoded DDP header of either model. For a tagged header only
// RsvdULP[0], STag and TO are meaningful; for an untagged one RsvdULP (all
// five bytes), QN, MSN and MO.
type Header struct {
	Tagged  bool
	Last    bool
	DV      uint8
	RsvdULP [5]byte
	STag    uint32
	TO      uint64
	QN      uint32
	MSN     uint32
	MO      uint32
}

// ErrShortHeader is returned by ParseHeader for fewer bytes than the
// header its control field announces.
var ErrShortHeader = errors.New("ddp: segment shorter than its DDP header")

// Len returns the encoded length of h: 14 or 18 bytes.
func (h *Header) Len() int {
	if h.Tagged {
		return TaggedHeaderLen
	}
	return UntaggedHeaderLen
}

// Control returns h's control field.
func (h *Header) Control() Control { return MakeControl(h.Tagged, h.Last, h.DV) }

// Append appends the wire form of h to b. The Rsvd bits are zero.
func (h *Header) Append(b []byte) []byte {
	b = append(b, byte(h.Control()))
	if h.Tagged {
		b = append(b, h.RsvdULP[0])
		b = binary.BigEndian.AppendUint32(b, h.STag)
		return binary.BigEndian.AppendUint64(b, h.TO)
	}
	b = append(b, h.RsvdULP[:]...)
	b = binary.BigEndian.AppendUint32(b, h.QN)
	b = binary.BigEndian.AppendUint32(b, h.MSN)
	return binary.BigEndian.AppendUint32(b, h.MO)
}

// ParseHeader decodes the DDP header at the start of b and returns it with
// its length. It checks only that b is long enough; field values (the
// version among them) are checked at placement, where each failure has
// its own Error Code (RFC 5041 §7).
func ParseHeader(b []byte) (Header, int, error) {
	var h Header
	if len(b) < 1 {
		return h, 0, ErrShortHeader
	}
	c := Control(b[offControl])
	n := c.HeaderLen()
	if len(b) < n {
		return h, 0, ErrShortHeader
	}
	h.Tagged, h.Last, h.DV = c.Tagged(), c.Last(), c.DV()
	if h.Tagged {
		t := TaggedHeader(b)
		h.RsvdULP[0] = t.RsvdULP()
		h.STag = t.STag()
		h.TO = t.TO()
		return h, n, nil
	}
	u := UntaggedHeader(b)
	copy(h.RsvdULP[:], u.RsvdULP())
	h.QN = u.QN()
	h.MSN = u.MSN()
	h.MO = u.MO()
	return h, n, nil
}

func (h Header) String() string {
	l := 0
	if h.Last {
		l = 1
	}
	if h.Tagged {
		return fmt.Sprintf("DDP tagged L=%d DV=%d RsvdULP=%#02x STag=%#08x TO=%#x", l, h.DV, h.RsvdULP[0], h.STag, h.TO)
	}
	return fmt.Sprintf("DDP untagged L=%d DV=%d RsvdULP=%x QN=%d MSN=%d MO=%d", l, h.DV, h.RsvdULP[:], h.QN, h.MSN, h.MO)
}
