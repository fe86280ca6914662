package replay

import (
	"fmt"
	"math"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

type connKey struct {
	transport string
	conn      int
}

type streamKey struct {
	conn     int
	src, dst string
	sctp     int // the SCTP stream, -1 over MPA
}

type tagKey struct {
	conn  int
	owner string
	stag  uint32
}

type recvKey struct {
	conn    int
	owner   string
	qn, msn uint32
	sctp    int
	src     string
}

// builder holds what Build learns as it walks the records.
type builder struct {
	m       *Model
	conns   map[connKey]int
	streams map[streamKey]*streamState
	states  []*streamState // by stream ID - 1
	tagged  map[tagKey]int // buffer ID
	recv    map[recvKey]int
	reads   map[string][]readReq // outstanding Read Requests by conn and requester
	atomics map[string]int       // Atomic Requests by conn, requester and Request Identifier
	rtrDue  map[int]bool         // connections whose initiator's first FPDU may be an RTR
	tagExt  map[tagKey]*extent
	recvExt map[recvKey]uint64
}

type extent struct{ lo, hi uint64 }

type readReq struct {
	ev       int
	sinkSTag uint32
}

// Build makes the model of a capture's records, as capture.Decode (or
// DecodePrefix) returns them. It never fails: what it cannot place, it
// says why in the event.
func Build(recs []capture.Record) *Model {
	b := &builder{
		m:       &Model{Events: make([]Event, 0, len(recs))},
		conns:   map[connKey]int{},
		streams: map[streamKey]*streamState{},
		tagged:  map[tagKey]int{},
		recv:    map[recvKey]int{},
		reads:   map[string][]readReq{},
		atomics: map[string]int{},
		rtrDue:  map[int]bool{},
		tagExt:  map[tagKey]*extent{},
		recvExt: map[recvKey]uint64{},
	}
	b.learnExtents(recs)
	for i := range recs {
		b.record(&recs[i], recs[0].Time.UnixNano())
	}
	return b.m
}

// segmentOf returns a record's DDP header and payload, when it is a DDP
// Segment whose header parses.
func segmentOf(r *capture.Record) (ddp.Header, []byte, bool) {
	if r.DDP == nil || (r.Kind != capture.KindFPDU && r.Kind != capture.KindSegment) {
		return ddp.Header{}, nil, false
	}
	h, hl, err := ddp.ParseHeader(r.Raw)
	if err != nil {
		return ddp.Header{}, nil, false
	}
	return h, r.Raw[hl:], true
}

// sctpStream is a record's SCTP stream, -1 over MPA.
func sctpStream(r *capture.Record) int {
	if r.SCTPStream == nil {
		return -1
	}
	return int(*r.SCTPStream)
}

// learnExtents finds each buffer's extent from every segment that lands
// in it (a bad CRC's included: the page still says where it pointed).
func (b *builder) learnExtents(recs []capture.Record) {
	for i := range recs {
		r := &recs[i]
		h, p, ok := segmentOf(r)
		if !ok {
			continue
		}
		n := uint64(len(p))
		if h.Tagged {
			k := tagKey{r.Conn<<1 | transportBit(r), r.Dst, h.STag}
			end := h.TO + n
			if end < h.TO {
				end = math.MaxUint64
			}
			e := b.tagExt[k]
			if e == nil {
				b.tagExt[k] = &extent{h.TO, end}
				continue
			}
			e.lo, e.hi = min(e.lo, h.TO), max(e.hi, end)
			continue
		}
		k := recvKey{r.Conn<<1 | transportBit(r), r.Dst, h.QN, h.MSN, sctpStream(r), r.Src}
		b.recvExt[k] = max(b.recvExt[k], uint64(h.MO)+n)
	}
}

// transportBit keeps the two transports' connection numbers apart in
// the keys of learnExtents and placement.
func transportBit(r *capture.Record) int {
	if r.Transport == "sctp" {
		return 1
	}
	return 0
}

func (b *builder) record(r *capture.Record, t0 int64) {
	m := b.m
	e := Event{I: len(m.Events), Rec: r, T: float64(r.Time.UnixNano()-t0) / 1e9, Message: -1, Answers: -1, Buffer: 0}
	e.Conn = b.conn(r)
	c := &m.Conns[e.Conn-1]
	switch r.Kind {
	case capture.KindMPARequest, capture.KindMPAReply:
		e.Kind = EventFrame
		f, _, err := mpa.ParseFrame(r.Raw)
		if err == nil {
			fr := frameOf(&f)
			if f.Reply {
				c.Reply = fr
			} else {
				c.Request = fr
			}
			if c.Request != nil && c.Reply != nil {
				c.CRC = c.Request.CRC || c.Reply.CRC
				c.MarkersToInitiator, c.MarkersToResponder = c.Request.Markers, c.Reply.Markers
				b.rtrDue[e.Conn] = c.Request.PeerToPeer && c.Reply.PeerToPeer
			}
		}
	case capture.KindSessionControl:
		e.Kind = EventControl
		if r.DDPSSN != nil {
			st := b.stream(r, e.Conn)
			e.Stream = st.id
			e.Seq = st.control(*r.DDPSSN, e.I)
		}
	case capture.KindFPDU, capture.KindSegment:
		e.Kind = EventSegment
		m.Segments++
		b.segment(&e, r, c)
	default:
		e.Kind = EventError
		m.Errors++
	}
	m.Events = append(m.Events, e)
	if e.Stream != 0 {
		b.deliver(&m.Events[len(m.Events)-1])
	}
}

// conn returns the model's connection of a record, made when first seen.
func (b *builder) conn(r *capture.Record) int {
	k := connKey{r.Transport, r.Conn}
	if id, ok := b.conns[k]; ok {
		return id
	}
	id := len(b.m.Conns) + 1
	b.conns[k] = id
	c := Conn{ID: id, Transport: r.Transport, CaptureConn: r.Conn, Initiator: r.Src, Responder: r.Dst}
	if r.Kind == capture.KindMPAReply {
		c.Initiator, c.Responder = r.Dst, r.Src
	}
	b.m.Conns = append(b.m.Conns, c)
	return id
}

func frameOf(f *mpa.Frame) *Frame {
	fr := &Frame{Reply: f.Reply, Rev: f.Rev, Markers: f.Markers, CRC: f.CRC, Reject: f.Reject, Enhanced: f.Enhanced}
	e, ulp, ok := f.Enhancement()
	if ok {
		fr.IRD, fr.ORD = e.IRD, e.ORD
		fr.PeerToPeer, fr.SendRTR, fr.WriteRTR, fr.ReadRTR = e.PeerToPeer, e.SendRTR, e.WriteRTR, e.ReadRTR
	}
	fr.PrivateData = append([]byte{}, ulp...)
	return fr
}

// stream returns the stream state of a record, made when first seen.
func (b *builder) stream(r *capture.Record, conn int) *streamState {
	k := streamKey{conn, r.Src, r.Dst, sctpStream(r)}
	st := b.streams[k]
	if st == nil {
		st = &streamState{id: len(b.m.Streams) + 1, sctp: r.Transport == "sctp", placed: map[int64]int{}}
		b.streams[k] = st
		b.states = append(b.states, st)
		s := Stream{ID: st.id, Conn: conn, Src: r.Src, Dst: r.Dst}
		if r.SCTPStream != nil {
			v := *r.SCTPStream
			s.SCTPStream = &v
		}
		b.m.Streams = append(b.m.Streams, s)
	}
	return st
}

// segment fills in where a segment lands and what it names.
func (b *builder) segment(e *Event, r *capture.Record, c *Conn) {
	st := b.stream(r, e.Conn)
	e.Stream = st.id
	b.m.Streams[st.id-1].Segments++
	h, p, ok := segmentOf(r)
	if !ok {
		e.Why = "its DDP header is unreadable: nothing is placed"
		e.Seq = st.seqOf(r.DDPSSN)
		return
	}
	e.payload = p
	e.Seq = st.seqOf(r.DDPSSN)
	op := rdmap.Control(h.RsvdULP[0]).Opcode()
	if b.rtrDue[e.Conn] && r.Src == c.Initiator {
		b.rtrDue[e.Conn] = false
		e.RTR = isRTR(c, op, r, len(p))
	}
	if r.CRC == capture.CRCBad {
		e.Why = "its CRC32c is wrong: the receiver treats the FPDU as invalid and places nothing of it (RFC 5044 §4.4)"
		return
	}
	if len(p) == 0 {
		// A zero-length segment (an RTR, a zero-length Send or Write)
		// places nothing but takes its place in the stream's order.
		if !st.place(e.Seq, e.I) {
			e.Why = fmt.Sprintf("a segment with the same place in the stream (%d) came before: a duplicate", e.Seq)
		}
		b.names(e, r, &h, op)
		return
	}
	ct := r.Conn<<1 | transportBit(r)
	if h.Tagged {
		k := tagKey{ct, r.Dst, h.STag}
		id, ok := b.tagged[k]
		if !ok {
			x := b.tagExt[k]
			id = b.addBuffer(Buffer{Conn: e.Conn, Owner: r.Dst, Tagged: true, STag: h.STag, Base: x.lo, Len: x.hi - x.lo})
			b.tagged[k] = id
		}
		e.Buffer, e.Offset = id, h.TO-b.m.Buffers[id-1].Base
	} else {
		k := recvKey{ct, r.Dst, h.QN, h.MSN, sctpStream(r), r.Src}
		id, ok := b.recv[k]
		if !ok {
			id = b.addBuffer(Buffer{Conn: e.Conn, Owner: r.Dst, QN: h.QN, MSN: h.MSN, Len: b.recvExt[k]})
			b.recv[k] = id
		}
		e.Buffer, e.Offset = id, uint64(h.MO)
	}
	if !st.place(e.Seq, e.I) {
		e.Why = fmt.Sprintf("a segment with the same place in the stream (%d) came before: a duplicate", e.Seq)
		e.Buffer = 0
		return
	}
	b.names(e, r, &h, op)
}

func (b *builder) addBuffer(buf Buffer) int {
	buf.ID = len(b.m.Buffers) + 1
	buf.Shown = int(min(buf.Len, MaxShown))
	b.m.Buffers = append(b.m.Buffers, buf)
	return buf.ID
}

// isRTR reports whether the initiator's first FPDU is the RTR that RFC
// 6581 §4 has it send in peer-to-peer mode: a zero-length Send or RDMA
// Write, or a zero-length RDMA Read, of a kind the Reply accepted.
func isRTR(c *Conn, op rdmap.Opcode, r *capture.Record, n int) bool {
	rep := c.Reply
	switch {
	case op == rdmap.OpSend && n == 0:
		return rep.SendRTR
	case op == rdmap.OpWrite && n == 0:
		return rep.WriteRTR
	case op == rdmap.OpReadRequest && r.ReadReq != nil && r.ReadReq.Size == 0:
		return rep.ReadRTR
	}
	return false
}
