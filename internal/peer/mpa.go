package peer

import (
	"errors"
	"fmt"
	"sync"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// MinMPAMULPDU is the smallest segment the demo sends over MPA: "the MPA
// on TCP sender MUST NOT shrink the MULPDU below 128 octets" (RFC 5044
// §4.5). The page's smaller sizes apply to the data channel only.
const MinMPAMULPDU = mpa.MinMULPDU

// MPAMULPDU returns the segment size the demo uses over MPA for a page's
// choice of n octets (0: the largest): within MPA's range, "between 128
// octets and 64768 octets, inclusive" (RFC 5044 §3); the page's sizes
// outside it are for the data channel.
func MPAMULPDU(n int) int {
	if n == 0 {
		return mpa.MaxMULPDU
	}
	return min(max(n, MinMPAMULPDU), mpa.MaxMULPDU)
}

// CapMULPDU returns ep, which makes its DDP segments no larger than n
// octets whatever its LLP offers: over a WebSocket, MPA knows no EMSS and
// offers RFC 5044 §3's largest MULPDU, 64768, and the demo cuts messages
// smaller to show segmentation.
// A segment size is the sender's choice (RFC 5041 §5.2: at most the
// MULPDU); the receiver accepts any up to the LLP's.
func CapMULPDU(ep ddp.Endpoint, n int) ddp.Endpoint { return capped{ep, n} }

type capped struct {
	ddp.Endpoint
	n int
}

func (c capped) Start(llp ddp.LLP, how ddp.Start) error {
	return c.Endpoint.Start(cappedLLP{llp, c.n}, how)
}

type cappedLLP struct {
	ddp.LLP
	n int
}

func (c cappedLLP) MULPDU() int { return min(c.LLP.MULPDU(), c.n) }

// Tap reads both directions of an MPA connection as mpa.Config.Trace
// hands them over (every octet, from the first of the startup frames),
// and reports each startup frame and each FPDU as an Event: where it sits
// in the stream, its ULPDU_Length, PAD, Markers and CRC field, and the
// DDP segment inside it. It is how the demo's ladder shows what crossed
// the wire on the MPA path.
type Tap struct {
	initiator bool
	emit      func(Event)

	mu   sync.Mutex
	dirs [2]tapDir // 0: sent by this end, 1: received
	req  *mpa.Frame
	rep  *mpa.Frame
	opts [2]mpa.Options // per direction, once both frames are known
	full bool           // Full Operation: both frames seen
}

type tapDir struct {
	buf    []byte
	pos    uint64 // stream position of buf[0] in Full Operation
	framed bool   // the startup frame was read
	seq    uint32
	failed bool
}

// maxTapWait is the most octets a direction holds after its startup
// frame while the other direction's has not come: "Since the receiver's
// ability to deal with Markers is unknown until the Request and Reply
// Frames have been received, sending FPDUs before this occurs is not
// possible." (RFC 5044 §7.1.2) Past it, the direction is reported as
// failed and no longer read.
const maxTapWait = 64 << 10

// NewTap returns a Tap for the end that is the MPA Initiator or not;
// emit receives the events, on the goroutine that read or wrote.
func NewTap(initiator bool, emit func(Event)) *Tap {
	return &Tap{initiator: initiator, emit: emit}
}

// Observe is the mpa.Config.Trace function.
func (t *Tap) Observe(fromLocal bool, b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := 1
	if fromLocal {
		i = 0
	}
	d := &t.dirs[i]
	if d.failed {
		return
	}
	d.buf = append(d.buf, b...)
	t.parse(i)
	if t.full {
		t.parse(1 - i) // the other direction may have waited for this frame
	}
}

// parse reads what it can of direction i. t.mu is held.
func (t *Tap) parse(i int) {
	d := &t.dirs[i]
	if d.failed {
		return // reported once; the other direction's Observe comes here too
	}
	out := i == 0
	if !d.framed {
		f, n, err := mpa.ParseFrame(d.buf)
		if err != nil {
			if errors.Is(err, mpa.ErrShortFrame) {
				return
			}
			d.failed = true
			t.emit(Event{Kind: "mpa-frame", Out: out, Error: err.Error()})
			return
		}
		f.PrivateData = append([]byte(nil), f.PrivateData...)
		d.framed = true
		d.buf = d.buf[n:]
		fromInitiator := out == t.initiator
		if fromInitiator {
			t.req = &f
		} else {
			t.rep = &f
		}
		t.emit(Event{Kind: "mpa-frame", Out: out, Len: uint32(n), Text: f.String()})
		if t.req != nil && t.rep != nil && !t.full {
			fi, fr := mpa.Negotiate(t.req, t.rep)
			// opts[0] is what this end sends.
			if t.initiator {
				t.opts = [2]mpa.Options{fi, fr}
			} else {
				t.opts = [2]mpa.Options{fr, fi}
			}
			t.full = true
		}
	}
	if !t.full {
		if len(d.buf) > maxTapWait {
			d.failed = true
			d.buf = nil
			t.emit(Event{Kind: "fpdu", Out: out, Error: fmt.Sprintf("over %d octets before the other end's startup frame (RFC 5044 §7.1.2: no FPDU before both frames)", maxTapWait)})
		}
		return
	}
	if t.rep.Reject {
		// What follows a rejecting Reply is not MPA: "the implementation
		// MUST exit MPA, leaving the TCP connection open" (RFC 5044
		// §7.1.2). Nothing reads it, so nothing keeps it.
		d.buf = nil
		return
	}
	o := t.opts[i]
	for {
		n, ok := mpa.FPDULen(d.buf, d.pos, o)
		if !ok || len(d.buf) < n {
			break
		}
		ulpdu, m, err := mpa.ParseFPDU(nil, d.buf[:n], d.pos, o)
		if err != nil {
			d.failed = true
			t.emit(Event{Kind: "fpdu", Out: out, Seq: d.seq, Pos: d.pos, Wire: n, Error: err.Error()})
			return
		}
		ev := Event{Kind: "fpdu", Out: out, Seq: d.seq, Pos: d.pos, Wire: m,
			ULPDU: len(ulpdu), Pad: mpa.PadLen(len(ulpdu)), CRC: mpa.WireCRC(d.buf[m-mpa.CRCLen:])}
		if o.Markers {
			for k := 0; k < m; k++ {
				if (d.pos+uint64(k))%mpa.MarkerInterval == 0 {
					ev.Markers = append(ev.Markers, k)
				}
			}
		}
		if h, hl, err := ddp.ParseHeader(ulpdu); err == nil {
			ev.Tagged, ev.Last = h.Tagged, h.Last
			ev.Op = rdmap.Opcode(h.RsvdULP[0] & 0x0f).String()
			ev.STag, ev.TO, ev.QN, ev.MSN, ev.MO = h.STag, h.TO, h.QN, h.MSN, h.MO
			ev.Len = uint32(len(ulpdu) - hl)
		} else {
			ev.Text = fmt.Sprintf("ULPDU without a DDP header: %v", err)
		}
		if !o.CRC {
			ev.Text = "CRC not in use (zero or ignored)"
		}
		t.emit(ev)
		d.seq++
		d.pos += uint64(m)
		d.buf = d.buf[m:]
	}
	if len(d.buf) == 0 {
		d.buf = nil // let a large buffer go
	}
}
