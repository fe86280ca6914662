package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
)

// sctpSeg is a DDP Segment record of SCTP stream 1 from A to B, as
// capture.Decode makes it.
func sctpSeg(ssn uint16, h ddp.Header, payload string) capture.Record {
	raw := append(h.Append(nil), payload...)
	st := uint16(1)
	op := rdmap.Control(h.RsvdULP[0]).Opcode()
	opv := uint8(op)
	n := len(payload)
	return capture.Record{Time: time.Unix(1, int64(ssn)), Conn: 1, Transport: "sctp", Src: "A:1", Dst: "B:1",
		Kind: capture.KindSegment, Len: len(raw) + 2, SCTPStream: &st, DDPSSN: &ssn,
		DDP:    &capture.DDP{Tagged: h.Tagged, Last: h.Last, STag: h.STag, TO: h.TO, QN: h.QN, MSN: h.MSN, MO: h.MO},
		Opcode: &opv, Op: op.String(), PayloadLen: &n, Raw: raw}
}

// checkModel checks what must hold of any model: events in order, each
// placement inside its buffer, each segment delivered at most once and
// only when placed, names pointing back in time, and the JSON the page
// reads well formed.
func checkModel(t testing.TB, m *Model) {
	t.Helper()
	delivered := map[int]bool{}
	for i := range m.Events {
		e := &m.Events[i]
		if e.I != i || e.Rec == nil || e.Conn < 1 || e.Conn > len(m.Conns) {
			t.Fatalf("event %d: %+v", i, e)
		}
		if e.Buffer != 0 {
			b := m.Buffers[e.Buffer-1]
			if e.Offset+uint64(len(e.payload)) > b.Len && e.Offset+uint64(len(e.payload)) >= e.Offset {
				t.Fatalf("event %d: %d octets at %d overrun buffer %+v", i, len(e.payload), e.Offset, b)
			}
		}
		if e.Answers >= i {
			t.Fatalf("event %d names event %d, not before it", i, e.Answers)
		}
		for _, j := range e.Delivered {
			d := &m.Events[j]
			if j > i || delivered[j] || d.Kind != EventSegment || d.Buffer == 0 && len(d.payload) != 0 {
				t.Fatalf("event %d delivers event %d (%+v), delivered before: %v", i, j, m.Events[j], delivered[j])
			}
			delivered[j] = true
		}
	}
	var ids []int
	for _, b := range m.Buffers {
		ids = append(ids, b.ID)
	}
	for _, b := range [][]byte{m.SummaryJSON(""), m.EventsJSON(0, len(m.Events)), m.SnapshotJSON(len(m.Events), ids)} {
		if !json.Valid(b) || bytes.HasPrefix(b, []byte(`{"error"`)) {
			t.Fatalf("bad JSON: %.200s", b)
		}
	}
}

func FuzzDecode(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join(captures, "*.pcap"))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 8<<10 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _, err := Decode(b)
		if err != nil {
			return
		}
		checkModel(t, m)
	})
}

// FuzzBuild plays sequences of DDP Segments with arbitrary DDP-SSNs,
// flags and offsets, as a reordering, duplicating network would deliver
// them: four octets an operation.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{2, 0x81, 4, 1, 3, 0x80, 0, 2, 1, 0x01, 0, 1, 4, 0xc0, 8, 0})
	f.Add([]byte{0xff, 0x81, 0, 1, 0, 0x81, 0, 2, 1, 0x81, 0, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var recs []capture.Record
		for i := 0; i+4 <= len(ops) && len(recs) < 256; i += 4 {
			ssn := uint16(ops[i])
			flags, off, id := ops[i+1], uint32(ops[i+2]), uint32(ops[i+3]%4)
			h := ddp.Header{Tagged: flags&0x40 != 0, Last: flags&0x80 != 0, DV: ddp.Version}
			if h.Tagged {
				h.STag, h.TO = id, uint64(off)
			} else {
				h.RsvdULP[0] = byte(rdmap.OpSend)
				h.MSN, h.MO = id, off
			}
			recs = append(recs, sctpSeg(ssn, h, fmt.Sprint(flags&0x0f)))
		}
		if len(recs) == 0 {
			return
		}
		checkModel(t, Build(recs))
	})
}
