package replay

import (
	"fmt"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// names joins a segment to the message it answers or names: a Read
// Response to its Read Request, an Atomic Response to its Atomic Request,
// a Terminate to the segment it terminated.
func (b *builder) names(e *Event, r *capture.Record, h *ddp.Header, op rdmap.Opcode) {
	switch {
	case op == rdmap.OpReadRequest && r.ReadReq != nil:
		k := peerKey(e.Conn, r.Src)
		b.reads[k] = append(b.reads[k], readReq{ev: e.I, sinkSTag: r.ReadReq.SinkSTag})
	case op == rdmap.OpReadResponse:
		// RFC 5040 §4.4: Read Responses go back in the order of the
		// requests; the Sink STag tells them apart where several are
		// outstanding.
		k := peerKey(e.Conn, r.Dst)
		q := b.reads[k]
		for j := range q {
			if q[j].sinkSTag != h.STag {
				continue
			}
			e.Answers = q[j].ev
			if h.Last {
				b.reads[k] = append(q[:j:j], q[j+1:]...)
			}
			break
		}
	case op == rdmap.OpAtomicRequest && r.Atomic != nil:
		b.atomics[atomicKey(e.Conn, r.Src, r.Atomic.RequestID)] = e.I
	case op == rdmap.OpAtomicResponse && r.AtomicResp != nil:
		k := atomicKey(e.Conn, r.Dst, r.AtomicResp.OrigRequestID)
		if j, ok := b.atomics[k]; ok {
			e.Answers = j
			delete(b.atomics, k)
		}
	case op == rdmap.OpTerminate:
		th := terminatedHeader(e.payload)
		if th == nil {
			return
		}
		e.Terminated = th
		for j := e.I - 1; j >= 0; j-- {
			c := &b.m.Events[j]
			if c.Kind == EventSegment && c.Conn == e.Conn && c.Rec.Src == r.Dst && c.Rec.DDP != nil && th.matches(c.Rec.DDP) {
				e.Answers = j
				refused(b.m, c, e)
				break
			}
		}
	}
}

// refused undoes the placement of segment c, which the Terminate t names:
// the peer found it in error, and a segment "MUST be validated before
// Placement" (RFC 5041 §7.1, tagged and untagged alike), so nothing of it
// was placed and its message was not delivered.
func refused(m *Model, c, t *Event) {
	c.Refused = true
	if c.Buffer == 0 && len(c.Delivered) == 0 {
		return
	}
	m.Delivered -= len(c.Delivered)
	c.Buffer, c.Delivered = 0, nil
	c.Why = fmt.Sprintf("the peer refused it: its Terminate (#%d) names this segment, and nothing of it is placed", t.Rec.N)
}

func peerKey(conn int, requester string) string { return fmt.Sprint(conn, " ", requester) }

func atomicKey(conn int, requester string, id uint32) string {
	return fmt.Sprint(conn, " ", requester, " ", id)
}

// terminatedHeader reads the DDP header a Terminate Message carries: the
// RFC 5040 §4.8 way when its D bit is set, else Linux siw's way when the
// Terminate Control looks like siw's little-endian bitfields (Layer and
// Error Type nibbles swapped, M, D and R in the three low bits of the
// reserved octet, which RFC 5040 §4.8 has zero). Nil when it carries none.
func terminatedHeader(p []byte) *TerminatedHeader {
	t, _, err := rdmap.ParseTerminate(p)
	if err == nil && t.D {
		h, _, err := ddp.ParseHeader(t.DDPHeader)
		if err != nil {
			return nil
		}
		return headerOf(&h, uint8(t.Layer), t.EType, t.Code, false)
	}
	if len(p) < 4 || p[2]&0xe0 != 0 || p[2]&0x02 == 0 {
		return nil
	}
	// siw: bit 0 M, bit 1 D, bit 2 R; the DDP Segment Length follows the
	// four octets of the control when M or D is set, as in the RFC.
	n := 6
	if len(p) < n+1 {
		return nil
	}
	h, _, err := ddp.ParseHeader(p[n:])
	if err != nil {
		return nil
	}
	return headerOf(&h, p[0]&0x0f, p[0]>>4, p[1], true)
}

func headerOf(h *ddp.Header, layer, etype, code uint8, siw bool) *TerminatedHeader {
	return &TerminatedHeader{DDP: capture.DDP{Tagged: h.Tagged, Last: h.Last, STag: h.STag, TO: h.TO, QN: h.QN, MSN: h.MSN, MO: h.MO},
		Siw: siw, Layer: layer, EType: etype, ECode: code, Name: term.New(term.Layer(layer), etype, code).Name()}
}

// matches reports whether a segment's DDP header is the terminated one.
func (th *TerminatedHeader) matches(d *capture.DDP) bool {
	if th.Tagged != d.Tagged {
		return false
	}
	if th.Tagged {
		return th.STag == d.STag && th.TO == d.TO
	}
	return th.QN == d.QN && th.MSN == d.MSN && th.MO == d.MO
}
