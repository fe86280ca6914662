package capture

// This file holds every use of sctpddp's codec (PPID, SessionControl,
// SegmentChunk and their parsers), so that a move of that codec is one
// edit here.

import (
	"bytes"
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// sctpDecoder collects the DDP traffic of SCTP packets.
type sctpDecoder struct {
	recs  []Record
	asm   *pcapfile.SCTPAssembler
	conns map[string]int // association (its two ends, sorted) -> conn number, from 1
	order int
}

func newSCTPDecoder() *sctpDecoder {
	return &sctpDecoder{asm: pcapfile.NewSCTPAssembler(), conns: map[string]int{}}
}

// packet decodes one captured packet if it is SCTP: the messages of PPID
// 16 and 17 it completes.
func (d *sctpDecoder) packet(p pcapfile.Packet) {
	sp, _ := pcapfile.DecodeSCTP(p.LinkType, p.Data) // the chunks before a malformed one count
	for _, m := range d.asm.Add(p.Time, sp) {
		ppid := wire.PPID(m.PPID)
		if ppid != wire.PPIDSegment && ppid != wire.PPIDSessionControl {
			continue
		}
		from, to := m.Src.String(), m.Dst.String()
		key := from + " " + to
		if to < from {
			key = to + " " + from
		}
		d.message(m.Time, key, from, to, m.Stream, ppid, m.Data)
	}
}

func (d *sctpDecoder) message(t time.Time, key, from, to string, stream uint16, ppid wire.PPID, msg []byte) {
	c, ok := d.conns[key]
	if !ok {
		c = len(d.conns) + 1
		d.conns[key] = c
	}
	d.order++
	// A message of one chunk aliases the reader's packet buffer, which
	// the next packet reuses; Raw keeps it.
	msg = bytes.Clone(msg)
	r := Record{Time: t, Conn: c, Transport: "sctp", Src: from, Dst: to, Len: len(msg), order: d.order}
	if ppid == wire.PPIDSessionControl {
		r.Raw = msg
	}
	st := stream
	r.SCTPStream = &st
	if ppid == wire.PPIDSessionControl {
		describeSessionControl(&r, msg)
	} else {
		describeSegmentChunk(&r, msg)
	}
	d.recs = append(d.recs, r)
}

// describeSessionControl fills in a DDP Stream Session Control message's
// fields and note.
func describeSessionControl(r *Record, msg []byte) {
	m, _, err := wire.ParseSessionControl(msg)
	if err != nil {
		r.Kind, r.Note = KindError, fmt.Sprintf("DDP Stream Session Control message unreadable: %v", err)
		return
	}
	ssn := uint16(m.SSN)
	r.Kind, r.DDPSSN, r.Function = KindSessionControl, &ssn, m.Function.String()
	r.Note = fmt.Sprintf("%s on DDP stream %d", m.Function, *r.SCTPStream)
	if m.Function.Enhanced() && m.Function != wire.FunctionTerminate {
		r.Note += fmt.Sprintf(" (RFC 6581: IRD %d, ORD %d)", m.Enhanced.IRD, m.Enhanced.ORD)
	}
	r.Note += fmt.Sprintf(", %d bytes of private data.", len(m.PrivateData))
	switch m.Function {
	case wire.FunctionInitiate, wire.FunctionEnhancedInitiate:
		r.Note += " The active side asks to start a DDP Stream Session."
	case wire.FunctionAccept, wire.FunctionEnhancedAccept:
		r.Note += " The passive side accepts: DDP Segments may flow."
	case wire.FunctionReject, wire.FunctionEnhancedReject:
		r.Note += " The passive side refuses the session."
	case wire.FunctionTerminate:
		r.Note += " The session ends."
	}
}

// describeSegmentChunk fills in a DDP Segment Chunk's fields and note.
func describeSegmentChunk(r *Record, msg []byte) {
	sc, _, err := wire.ParseSegmentChunk(msg)
	if err != nil {
		r.Kind, r.Note = KindError, fmt.Sprintf("DDP Segment chunk unreadable: %v", err)
		return
	}
	ssn := uint16(sc.SSN)
	r.Kind, r.DDPSSN = KindSegment, &ssn
	describeSegment(r, sc.Segment)
}
