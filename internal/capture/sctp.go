package capture

// This file holds every use of sctpddp's codec (PPID, SessionControl,
// SegmentChunk and their parsers), so that a move of that codec is one
// edit here.

import (
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/internal/pcapfile"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// sctpDecoder collects the DDP traffic of SCTP packets.
type sctpDecoder struct {
	recs  []Record
	conns map[string]int // association (its two ends, sorted) -> conn number, from 1
	frags map[string][]byte
	order int
}

func newSCTPDecoder() *sctpDecoder {
	return &sctpDecoder{conns: map[string]int{}, frags: map[string][]byte{}}
}

// packet decodes one captured packet if it is SCTP: the DATA chunks of
// PPID 16 and 17, put back together from their fragments.
func (d *sctpDecoder) packet(p pcapfile.Packet) {
	sp, _ := pcapfile.DecodeSCTP(p.LinkType, p.Data) // the chunks before a malformed one count
	if len(sp.Chunks) == 0 {
		return
	}
	from, to := sp.Src.String(), sp.Dst.String()
	key := from + " " + to
	if to < from {
		key = to + " " + from
	}
	for _, c := range sp.Chunks {
		dc, ok := c.Data()
		if !ok {
			continue
		}
		ppid := sctpddp.PPID(dc.PPID)
		if ppid != sctpddp.PPIDSegment && ppid != sctpddp.PPIDSessionControl {
			continue
		}
		fk := fmt.Sprintf("%s>%s/%d", from, to, dc.Stream)
		switch {
		case dc.Begin && dc.End:
			d.message(p.Time, key, from, to, dc.Stream, ppid, dc.Data)
		case dc.Begin:
			d.frags[fk] = append([]byte(nil), dc.Data...)
		default:
			if prev, ok := d.frags[fk]; ok {
				prev = append(prev, dc.Data...)
				if dc.End {
					delete(d.frags, fk)
					d.message(p.Time, key, from, to, dc.Stream, ppid, prev)
				} else {
					d.frags[fk] = prev
				}
			}
		}
	}
}

func (d *sctpDecoder) message(t time.Time, key, from, to string, stream uint16, ppid sctpddp.PPID, msg []byte) {
	c, ok := d.conns[key]
	if !ok {
		c = len(d.conns) + 1
		d.conns[key] = c
	}
	d.order++
	r := Record{Time: t, Conn: c, Transport: "sctp", Src: from, Dst: to, Len: len(msg), order: d.order}
	st := stream
	r.SCTPStream = &st
	if ppid == sctpddp.PPIDSessionControl {
		describeSessionControl(&r, msg)
	} else {
		describeSegmentChunk(&r, msg)
	}
	d.recs = append(d.recs, r)
}

// describeSessionControl fills in a DDP Stream Session Control message's
// fields and note.
func describeSessionControl(r *Record, msg []byte) {
	m, _, err := sctpddp.ParseSessionControl(msg)
	if err != nil {
		r.Kind, r.Note = KindError, fmt.Sprintf("DDP Stream Session Control message unreadable: %v", err)
		return
	}
	ssn := uint16(m.SSN)
	r.Kind, r.DDPSSN, r.Function = KindSessionControl, &ssn, m.Function.String()
	r.Note = fmt.Sprintf("%s on DDP stream %d", m.Function, *r.SCTPStream)
	if m.Function.Enhanced() && m.Function != sctpddp.FunctionTerminate {
		r.Note += fmt.Sprintf(" (RFC 6581: IRD %d, ORD %d)", m.Enhanced.IRD, m.Enhanced.ORD)
	}
	r.Note += fmt.Sprintf(", %d bytes of private data.", len(m.PrivateData))
	switch m.Function {
	case sctpddp.FunctionInitiate, sctpddp.FunctionEnhancedInitiate:
		r.Note += " The active side asks to start a DDP Stream Session."
	case sctpddp.FunctionAccept, sctpddp.FunctionEnhancedAccept:
		r.Note += " The passive side accepts: DDP Segments may flow."
	case sctpddp.FunctionReject, sctpddp.FunctionEnhancedReject:
		r.Note += " The passive side refuses the session."
	case sctpddp.FunctionTerminate:
		r.Note += " The session ends."
	}
}

// describeSegmentChunk fills in a DDP Segment Chunk's fields and note.
func describeSegmentChunk(r *Record, msg []byte) {
	sc, _, err := sctpddp.ParseSegmentChunk(msg)
	if err != nil {
		r.Kind, r.Note = KindError, fmt.Sprintf("DDP Segment chunk unreadable: %v", err)
		return
	}
	ssn := uint16(sc.SSN)
	r.Kind, r.DDPSSN = KindSegment, &ssn
	describeSegment(r, sc.Segment)
}
