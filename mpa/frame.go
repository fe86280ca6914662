package mpa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/iwarpgo/iwarp/term"
)

// The keys of RFC 5044 §7.1.1, Figure 8.
const (
	// RequestKey is "MPA ID Req Frame": 4D 50 41 20 49 44 20 52 65 71 20
	// 46 72 61 6D 65.
	RequestKey = "MPA ID Req Frame"
	// ReplyKey is "MPA ID Rep Frame": 4D 50 41 20 49 44 20 52 65 70 20
	// 46 72 61 6D 65.
	ReplyKey = "MPA ID Rep Frame"
)

// Sizes and limits of the startup frames.
const (
	// KeyLen is the length of the Key field.
	KeyLen = 16
	// FrameHeaderLen is the fixed part of an MPA Request or Reply Frame:
	// the Key, the flag octet, Rev and PD_Length.
	FrameHeaderLen = KeyLen + 4
	// MaxPrivateData is the most Private Data a frame may carry: "The
	// Private Data field MUST be between 0 and 512 octets in length."
	// (RFC 5044 §7.1.1)
	MaxPrivateData = 512
	// MaxFrameLen is the longest MPA Request or Reply Frame.
	MaxFrameLen = FrameHeaderLen + MaxPrivateData
)

// The revisions this package speaks: 1 is RFC 5044; 2 is RFC 6581's
// enhanced connection establishment.
const (
	Rev1 = 1
	Rev2 = 2
)

// Bits of the flag octet (octet 16 of the frame).
const (
	flagM   = 0x80 // Marker usage REQUIRED from the peer
	flagC   = 0x40 // CRC preferred
	flagR   = 0x20 // Rejected Connection (Reply only)
	flagS   = 0x10 // RFC 6581: Private Data begins with enhanced data (Rev >= 2)
	resRev1 = 0x1f // Res in RFC 5044: the five low bits
	resRev2 = 0x0f // Res in RFC 6581: four bits, S took the fifth
)

// Frame is an MPA Request Frame or MPA Reply Frame, RFC 5044 §7.1.1 with
// the S bit of RFC 6581 §6:
//
//	    0                   1                   2                   3
//	    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	0  |                                                               |
//	   +         Key (16 bytes containing "MPA ID Req Frame")          +
//	4  |      (4D 50 41 20 49 44 20 52 65 71 20 46 72 61 6D 65)        |
//	   +         Or  (16 bytes containing "MPA ID Rep Frame")          +
//	8  |      (4D 50 41 20 49 44 20 52 65 70 20 46 72 61 6D 65)        |
//	   +                                                               +
//	12 |                                                               |
//	   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	16 |M|C|R|S| Res   |     Rev       |          PD_Length            |
//	   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	   ~                   Private Data                                ~
//	   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// In Rev 1 (RFC 5044) the S bit does not exist: it is part of Res, which is
// "set to zero when sending, and not checked on reception". ParseFrame
// therefore reports S as Enhanced only when Rev >= 2, and keeps the bit in
// Res otherwise, so that Append(ParseFrame(b)) gives back b.
type Frame struct {
	// Reply is true for an MPA Reply Frame (Key "MPA ID Rep Frame"),
	// false for an MPA Request Frame (Key "MPA ID Req Frame").
	Reply bool
	// Markers is the M bit: the sender REQUIRES Markers in the FPDUs the
	// peer sends to it.
	Markers bool
	// CRC is the C bit: the sender prefers CRCs. CRCs are used in both
	// directions if either frame sets it.
	CRC bool
	// Reject is the R bit: in a Reply, the Responder's ULP rejected the
	// connection parameters. Zero in a Request, and not checked there.
	Reject bool
	// Enhanced is the S bit of RFC 6581 (Rev >= 2 only): the Private Data
	// begins with the enhanced RDMA connection establishment data, see
	// EnhancedData and Frame.Enhancement.
	Enhanced bool
	// Res holds the reserved bits as received: the low four bits of octet
	// 16 for Rev >= 2, the low five for Rev 1. Zero when sending.
	Res uint8
	// Rev is the MPA revision: 1 (RFC 5044) or 2 (RFC 6581).
	Rev uint8
	// PrivateData is at most MaxPrivateData octets; its length is the
	// PD_Length field. ParseFrame returns a slice of its input, not a copy.
	PrivateData []byte
}

// Len returns the length of the encoded frame.
func (f *Frame) Len() int { return FrameHeaderLen + len(f.PrivateData) }

// Append appends the encoded frame to b. It encodes the fields as they are;
// call Validate first to check them (Append with more than 65535 octets of
// Private Data writes PD_Length modulo 2^16).
func (f *Frame) Append(b []byte) []byte {
	if f.Reply {
		b = append(b, ReplyKey...)
	} else {
		b = append(b, RequestKey...)
	}
	var flags uint8
	if f.Markers {
		flags |= flagM
	}
	if f.CRC {
		flags |= flagC
	}
	if f.Reject {
		flags |= flagR
	}
	if f.Enhanced {
		flags |= flagS
	}
	if f.Rev >= Rev2 {
		flags |= f.Res & resRev2
	} else {
		flags |= f.Res & resRev1
	}
	b = append(b, flags, f.Rev)
	b = binary.BigEndian.AppendUint16(b, uint16(len(f.PrivateData)))
	return append(b, f.PrivateData...)
}

// Validate reports whether f may be sent as it is, as an error wrapping
// term.MPAInvalidFrame.
func (f *Frame) Validate() error {
	if err := checkRev(f.Rev); err != nil {
		return err
	}
	if len(f.PrivateData) > MaxPrivateData {
		// "The Private Data field MUST be between 0 and 512 octets in
		// length." (RFC 5044 §7.1.1)
		return invalidFrame("Private Data of %d octets exceeds %d", len(f.PrivateData), MaxPrivateData)
	}
	if f.Enhanced {
		if f.Rev < Rev2 {
			// "To use any enhanced connection establishment feature,
			// this MUST be set to two or higher." (RFC 6581 §6, Rev)
			return invalidFrame("S bit set with Rev %d", f.Rev)
		}
		if len(f.PrivateData) < EnhancedDataLen {
			// "if the 'S' flag is set, Private Data MUST begin with
			// enhanced RDMA connection establishment data" (RFC 6581 §6)
			return invalidFrame("S bit set but Private Data has only %d octets", len(f.PrivateData))
		}
	}
	if !f.Reply && f.Reject {
		// "This bit is set to zero, and not checked on reception in the
		// MPA Request Frame." (RFC 5044 §7.1.1, R)
		return invalidFrame("R bit set in an MPA Request Frame")
	}
	return nil
}

// Enhancement returns the enhanced RDMA connection establishment data at
// the start of the Private Data (RFC 6581 §9) and the ULP's Private Data
// that follows it. For a frame without the S bit it returns ok false and
// all of the Private Data.
func (f *Frame) Enhancement() (e EnhancedData, ulp []byte, ok bool) {
	if !f.Enhanced {
		return EnhancedData{}, f.PrivateData, false
	}
	e, n, err := ParseEnhancedData(f.PrivateData)
	if err != nil {
		return EnhancedData{}, f.PrivateData, false
	}
	return e, f.PrivateData[n:], true
}

func (f Frame) String() string {
	kind := "Request"
	if f.Reply {
		kind = "Reply"
	}
	return fmt.Sprintf("MPA %s Frame{M:%t C:%t R:%t S:%t Rev:%d PD_Length:%d}",
		kind, f.Markers, f.CRC, f.Reject, f.Enhanced, f.Rev, len(f.PrivateData))
}

// ErrShortFrame is wrapped by ParseFrame's error when b ends before the
// frame does: more octets of the stream may complete it.
var ErrShortFrame = errors.New("mpa: startup frame truncated")

func invalidFrame(format string, args ...any) error {
	return term.MPAInvalidFrame.With(format, args...)
}

func shortFrame(format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrShortFrame, term.MPAInvalidFrame.With(format, args...))
}

func checkRev(rev uint8) error {
	// "MPA receivers compliant with this version of the specification
	// MUST check this field. If the MPA receiver cannot interoperate with
	// the received version, then it MUST close the connection and report
	// an error locally." (RFC 5044 §7.1.1, Rev)
	if rev != Rev1 && rev != Rev2 {
		return invalidFrame("unsupported MPA revision %d (this implementation speaks 1 and 2)", rev)
	}
	return nil
}

// ParseFrame decodes an MPA Request or Reply Frame from the start of b and
// returns it with the number of octets it took. Which of the two it is
// comes from the Key; the caller checks that it is the one it expects
// (Frame.Reply). PrivateData aliases b.
//
// Every error wraps term.MPAInvalidFrame. When b is a strict prefix of a
// frame that could still be valid, the error also wraps ErrShortFrame.
func ParseFrame(b []byte) (Frame, int, error) {
	var f Frame
	if len(b) < FrameHeaderLen {
		if k := b[:min(len(b), KeyLen)]; !keyPrefix(k) {
			return f, 0, invalidFrame("bad Key %q", k)
		}
		return f, 0, shortFrame("%d of %d octets of the frame header", len(b), FrameHeaderLen)
	}
	f, pdLen, err := parseFrameHeader(b)
	if err != nil {
		return f, 0, err
	}
	n := FrameHeaderLen + pdLen
	if len(b) < n {
		return f, 0, shortFrame("%d of %d octets of Private Data", len(b)-FrameHeaderLen, pdLen)
	}
	f.PrivateData = b[FrameHeaderLen:n:n]
	return f, n, nil
}

// parseFrameHeader decodes the fixed part of a frame, the first
// FrameHeaderLen octets of b, and returns the frame without its Private
// Data and the PD_Length field, which it has checked. It builds no error
// for a header that is valid, so that ReadFrame allocates only the
// Private Data.
func parseFrameHeader(b []byte) (Frame, int, error) {
	var f Frame
	switch string(b[:KeyLen]) {
	case RequestKey:
	case ReplyKey:
		f.Reply = true
	default:
		// "Responder mode receivers MUST check this field for the same
		// value, and close the connection and report an error locally if
		// any other value is detected." (RFC 5044 §7.1.1, Key)
		return f, 0, invalidFrame("bad Key %q", b[:KeyLen])
	}
	flags, rev := b[16], b[17]
	pdLen := int(binary.BigEndian.Uint16(b[18:20]))
	if err := checkRev(rev); err != nil {
		return f, 0, err
	}
	f.Rev = rev
	f.Markers = flags&flagM != 0
	f.CRC = flags&flagC != 0
	f.Reject = flags&flagR != 0
	if !f.Reply {
		// R: "set to zero, and not checked on reception in the MPA
		// Request Frame" (RFC 5044 §7.1.1).
		f.Reject = false
	}
	if rev >= Rev2 {
		f.Enhanced = flags&flagS != 0
		f.Res = flags & resRev2
	} else {
		f.Res = flags & resRev1
	}
	if pdLen > MaxPrivateData {
		// "If the receiver detects that the PD_Length field does not
		// match the length of the Private Data field, or if the length
		// of the Private Data field exceeds 512 octets, the receiver
		// MUST close the connection and report an error locally."
		// (RFC 5044 §7.1.1, PD_Length)
		return f, 0, invalidFrame("PD_Length %d exceeds %d", pdLen, MaxPrivateData)
	}
	if f.Enhanced && pdLen < EnhancedDataLen {
		// "if the 'S' flag is set, Private Data MUST begin with enhanced
		// RDMA connection establishment data (see Section 9)." (RFC 6581 §6)
		return f, 0, invalidFrame("S bit set but PD_Length is %d", pdLen)
	}
	return f, pdLen, nil
}

// keyPrefix reports whether b is a prefix of one of the two keys.
func keyPrefix(b []byte) bool {
	return len(b) <= KeyLen && (string(b) == RequestKey[:len(b)] || string(b) == ReplyKey[:len(b)])
}

// ReadFrame reads one MPA Request or Reply Frame from r, which is
// positioned at the frame's first octet. It reads exactly the frame's
// octets and nothing after them, so the FPDUs that follow can be read from
// r by a Reader afterwards. The returned PrivateData is newly allocated.
//
// A frame that is not valid gives an error wrapping term.MPAInvalidFrame;
// a stream that ends inside the frame gives one wrapping
// term.MPAConnectionLost and io.ErrUnexpectedEOF (io.EOF if it ends
// before the first octet).
func ReadFrame(r io.Reader) (Frame, error) {
	var hdr [FrameHeaderLen]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if n > 0 && !keyPrefix(hdr[:min(n, KeyLen)]) {
			return Frame{}, invalidFrame("bad Key %q", hdr[:min(n, KeyLen)])
		}
		return Frame{}, connLost(err)
	}
	f, pdLen, err := parseFrameHeader(hdr[:]) // pdLen <= MaxPrivateData when err is nil
	if err != nil {
		return Frame{}, err
	}
	if pdLen == 0 {
		return f, nil
	}
	pd := make([]byte, pdLen)
	if _, err := io.ReadFull(r, pd); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, connLost(err)
	}
	f.PrivateData = pd
	return f, nil
}

// connLost maps an error of the underlying stream to MPA's code 1, "TCP
// connection closed, terminated, or lost" (RFC 5044 §8), keeping the
// original error in the chain. A clean io.EOF stays io.EOF.
func connLost(err error) error {
	if err == io.EOF {
		return io.EOF
	}
	return fmt.Errorf("%w: %w", term.MPAConnectionLost.With("%v", err), err)
}
