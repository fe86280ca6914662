package ddp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

// fakeULP owns one region per STag and records deliveries and faults.
type fakeULP struct {
	regions map[uint32]TaggedBuffer
	foreign map[uint32]bool // STags of another stream
	check   func(h *Header) *term.Error
	deliv   []Delivery
	faults  []Fault
	last    Delivery
	keep    int // keep at most this many deliveries (0: all)
}

func (u *fakeULP) CheckSegment(h *Header) *term.Error {
	if u.check != nil {
		return u.check(h)
	}
	return nil
}

func (u *fakeULP) TaggedBuffer(h *Header) (TaggedBuffer, *term.Error) {
	if u.foreign[h.STag] {
		return TaggedBuffer{}, term.DDPSTagNotAssociated
	}
	tb, ok := u.regions[h.STag]
	if !ok {
		return TaggedBuffer{}, term.DDPInvalidSTag
	}
	return tb, nil
}

func (u *fakeULP) Deliver(d *Delivery) {
	u.last = *d
	if u.keep == 0 || len(u.deliv) < u.keep {
		u.deliv = append(u.deliv, *d)
	}
}
func (u *fakeULP) Fault(f *Fault) { u.faults = append(u.faults, *f) }

// guarded returns n octets of memory inside a larger block whose guard
// octets must never change.
type guarded struct {
	block []byte
	mem   []byte
}

const guard = 64

func newGuarded(n int) *guarded {
	block := make([]byte, n+2*guard)
	for i := range block {
		block[i] = 0xee
	}
	g := &guarded{block: block, mem: block[guard : guard+n : guard+n]}
	clear(g.mem)
	return g
}

func (g *guarded) intact(t testing.TB) {
	t.Helper()
	for i := 0; i < guard; i++ {
		if g.block[i] != 0xee || g.block[len(g.block)-1-i] != 0xee {
			t.Fatal("a write landed outside the registered memory")
		}
	}
}

func (g *guarded) zero() bool {
	for _, b := range g.mem {
		if b != 0 {
			return false
		}
	}
	return true
}

type testStream struct {
	*Stream
	ulp    *fakeULP
	region *guarded
	bufs   []*guarded
}

// newTestStream: STag 0x100 is 4096 octets at TO 0x10000; STag 0x200 is
// another stream's; queue 0 has three 1000-octet buffers posted.
func newTestStream(t testing.TB, window int) *testStream {
	t.Helper()
	g := newGuarded(4096)
	u := &fakeULP{regions: map[uint32]TaggedBuffer{0x100: {Mem: g.mem, Base: 0x10000}}, foreign: map[uint32]bool{0x200: true}}
	s, err := NewStream(Config{Queues: 3, QueueDepth: 8, Window: window, ULP: u})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testStream{Stream: s, ulp: u, region: g}
	for i := 0; i < 3; i++ {
		b := newGuarded(1000)
		ts.bufs = append(ts.bufs, b)
		if err := s.Post(0, Buffer{SGL: [][]byte{b.mem[:300], b.mem[300:]}, ID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

func seg(h Header, payload []byte) []byte { return append(h.Append(nil), payload...) }

func tagged(stag uint32, to uint64, last bool) Header {
	return Header{Tagged: true, Last: last, DV: 1, RsvdULP: [5]byte{0x40}, STag: stag, TO: to}
}

func untagged(qn, msn, mo uint32, last bool) Header {
	return Header{Last: last, DV: 1, RsvdULP: [5]byte{0x43}, QN: qn, MSN: msn, MO: mo}
}

// Every check of RFC 5041 §7.1 produces exactly its Error Type and Code
// of §7.2, places nothing, and stops the stream.
func TestPlacementChecks(t *testing.T) {
	p := pattern(100)
	cases := []struct {
		name string
		seg  []byte
		want *term.Error
	}{
		{"tagged invalid STag", seg(tagged(0x999, 0x10000, true), p), term.DDPInvalidSTag},
		{"tagged STag not associated with stream", seg(tagged(0x200, 0x10000, true), p), term.DDPSTagNotAssociated},
		{"tagged TO below base", seg(tagged(0x100, 0xffff, true), p), term.DDPBaseBounds},
		{"tagged TO past end", seg(tagged(0x100, 0x11000, true), p), term.DDPBaseBounds},
		{"tagged TO+len past end", seg(tagged(0x100, 0x10fa0, true), p), term.DDPBaseBounds},
		{"tagged TO wrap", seg(func() Header {
			h := tagged(0x300, 0xffffffffffffffd0, true)
			return h
		}(), p), term.DDPTOWrap},
		{"tagged invalid DDP version", seg(func() Header { h := tagged(0x100, 0x10000, true); h.DV = 2; return h }(), p), term.DDPTaggedInvalidVersion},
		{"untagged invalid QN", seg(untagged(3, 1, 0, true), p), term.DDPInvalidQN},
		{"untagged no buffer", seg(untagged(0, 4, 0, true), p), term.DDPNoBuffer},
		{"untagged no buffer on an empty queue", seg(untagged(1, 1, 0, true), p), term.DDPNoBuffer},
		{"untagged MSN already consumed", seg(untagged(0, 0, 0, true), p), term.DDPMSNRange},
		{"untagged MSN far ahead", seg(untagged(0, 1<<20, 0, true), p), term.DDPMSNRange},
		{"untagged invalid MO", seg(untagged(0, 1, 1000, true), p), term.DDPInvalidMO},
		// Zero-length: checks 3 and 4 do not apply (§7.1), but a message
		// ending beyond its 1000-octet buffer would be delivered longer
		// than the buffer.
		{"untagged zero-length segment beyond the buffer", seg(untagged(0, 1, 1001, true), nil), term.DDPInvalidMO},
		{"untagged message too long", seg(untagged(0, 1, 950, true), p), term.DDPMessageTooLong},
		{"untagged invalid DDP version", seg(func() Header { h := untagged(0, 1, 0, true); h.DV = 0; return h }(), p), term.DDPUntaggedInvalidVersion},
		{"truncated header", seg(tagged(0x100, 0x10000, true), nil)[:9], term.DDPLocalCatastrophic},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestStream(t, 1)
			if tc.want == term.DDPTOWrap {
				// A region at the very top of the 64-bit TO space.
				ts.ulp.regions[0x300] = TaggedBuffer{Mem: ts.region.mem, Base: 0xffffffffffffffc0}
			}
			err := ts.Receive(0, tc.seg)
			var te *term.Error
			if !errors.As(err, &te) || !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if l, et, c := te.Triple(); l != tc.want.Layer || et != tc.want.EType || c != tc.want.Code {
				t.Fatalf("triple %v/%v/%v", l, et, c)
			}
			if len(ts.ulp.faults) != 1 || !errors.Is(ts.ulp.faults[0].Err, tc.want) {
				t.Fatalf("faults %+v", ts.ulp.faults)
			}
			f := ts.ulp.faults[0]
			if tc.want != term.DDPLocalCatastrophic {
				hl := Control(tc.seg[0]).HeaderLen()
				if f.HeaderLen != hl || !bytes.Equal(f.Header[:hl], tc.seg[:hl]) || f.SegLen != len(tc.seg) {
					t.Fatalf("fault carries header % x (%d), seglen %d", f.Header[:f.HeaderLen], f.HeaderLen, f.SegLen)
				}
			}
			if !ts.region.zero() {
				t.Fatal("tagged memory written")
			}
			for _, b := range ts.bufs {
				if !b.zero() {
					t.Fatal("untagged buffer written")
				}
				b.intact(t)
			}
			ts.region.intact(t)
			// "DDP MUST silently drop any subsequent incoming DDP Segments."
			if err := ts.Receive(1, seg(tagged(0x100, 0x10000, true), p)); err != ErrStopped {
				t.Fatalf("after the error: %v", err)
			}
			if !ts.region.zero() || len(ts.ulp.deliv) != 0 || len(ts.ulp.faults) != 1 {
				t.Fatal("placed or delivered after the error")
			}
		})
	}
}

func TestULPCheckStopsBeforePlacement(t *testing.T) {
	ts := newTestStream(t, 1)
	ts.ulp.check = func(h *Header) *term.Error {
		if h.RsvdULP[0] == 0x4f {
			return term.RDMAPUnexpectedOpcode
		}
		return nil
	}
	h := untagged(0, 1, 0, true)
	h.RsvdULP[0] = 0x4f
	if err := ts.Receive(0, seg(h, pattern(10))); !errors.Is(err, term.RDMAPUnexpectedOpcode) {
		t.Fatal(err)
	}
	if !ts.bufs[0].zero() {
		t.Fatal("placed before the ULP's check")
	}
}

// "The STag and TO fields MUST NOT be checked for a zero-length Tagged
// DDP Message." (RFC 5041 §5.2)
func TestZeroLengthTaggedNotChecked(t *testing.T) {
	ts := newTestStream(t, 1)
	if err := ts.Receive(0, seg(tagged(0xbad, 0xffffffffffffffff, true), nil)); err != nil {
		t.Fatal(err)
	}
	if len(ts.ulp.deliv) != 1 || ts.ulp.deliv[0].Len != 0 {
		t.Fatalf("deliveries %+v", ts.ulp.deliv)
	}
}

func TestZeroLengthUntaggedConsumesBuffer(t *testing.T) {
	ts := newTestStream(t, 1)
	if err := ts.Receive(0, seg(untagged(0, 1, 0, true), nil)); err != nil {
		t.Fatal(err)
	}
	if len(ts.ulp.deliv) != 1 || ts.ulp.deliv[0].Buffer.ID != 0 || ts.Posted(0) != 2 {
		t.Fatalf("deliveries %+v, posted %d", ts.ulp.deliv, ts.Posted(0))
	}
	// A zero-length last segment at the end of its 1000-octet buffer: a
	// message the buffer's length, no longer.
	if err := ts.Receive(1, seg(untagged(0, 2, 1000, true), nil)); err != nil {
		t.Fatal(err)
	}
	if len(ts.ulp.deliv) != 2 || ts.ulp.deliv[1].Len != 1000 {
		t.Fatalf("deliveries %+v", ts.ulp.deliv)
	}
}

// Segments are placed on arrival, in any order, and a message is
// delivered only once it and every earlier message are placed.
func TestPlacementBeforeDelivery(t *testing.T) {
	ts := newTestStream(t, 16)
	msg := pattern(900)
	// Message A: untagged MSN 1 in three segments (seq 0-2); message B:
	// a tagged write in two (seq 3-4); message C: untagged MSN 2 (seq 5).
	segs := [][]byte{
		seg(untagged(0, 1, 0, false), msg[:300]),
		seg(untagged(0, 1, 300, false), msg[300:600]),
		seg(untagged(0, 1, 600, true), msg[600:]),
		seg(tagged(0x100, 0x10000, false), msg[:500]),
		seg(tagged(0x100, 0x10000+500, true), msg[500:]),
		seg(untagged(0, 2, 0, true), msg[:10]),
	}
	order := []uint32{5, 4, 2, 0, 3, 1}
	wantDelivered := []int{0, 0, 0, 0, 0, 3}
	for i, seq := range order {
		if err := ts.Receive(seq, segs[seq]); err != nil {
			t.Fatal(err)
		}
		if got := len(ts.ulp.deliv); got != wantDelivered[i] {
			t.Fatalf("after seq %d: %d delivered, want %d", seq, got, wantDelivered[i])
		}
	}
	// Placement happened at once: the tagged write was in memory before
	// anything was delivered.
	if !bytes.Equal(ts.region.mem[:900], msg) || !bytes.Equal(ts.bufs[0].mem[:900], msg) {
		t.Fatal("bytes not placed")
	}
	d := ts.ulp.deliv
	if d[0].Header.MSN != 1 || d[0].Len != 900 || d[0].Buffer.ID != 0 ||
		!d[1].Header.Tagged || d[1].Len != 900 ||
		d[2].Header.MSN != 2 || d[2].Len != 10 || d[2].Buffer.ID != 1 {
		t.Fatalf("deliveries %+v", d)
	}
	ts.region.intact(t)
}

// A peer that numbers its untagged messages out of order is caught at
// delivery, where buffers are consumed in posting order.
func TestMSNOutOfOrderAtDelivery(t *testing.T) {
	ts := newTestStream(t, 4)
	// Seq 0 carries MSN 2: a buffer is posted for it, so it is placed,
	// but it is the stream's first message and MSN 1 is due.
	if err := ts.Receive(0, seg(untagged(0, 2, 0, true), pattern(5))); err != nil {
		t.Fatal(err)
	}
	if len(ts.ulp.faults) != 1 || !errors.Is(ts.ulp.faults[0].Err, term.DDPMSNRange) || len(ts.ulp.deliv) != 0 {
		t.Fatalf("faults %+v deliveries %d", ts.ulp.faults, len(ts.ulp.deliv))
	}
}

func TestWindow(t *testing.T) {
	ts := newTestStream(t, 4)
	if err := ts.Receive(4, seg(untagged(0, 1, 0, true), nil)); err != ErrWindow {
		t.Fatalf("seq 4 in a window of 4: %v", err)
	}
	if ts.Stopped() {
		t.Fatal("a window error stopped the stream")
	}
}

func TestFailReportsOnce(t *testing.T) {
	ts := newTestStream(t, 1)
	ts.Fail(term.MPACRCError)
	ts.Fail(term.MPAConnectionLost)
	if len(ts.ulp.faults) != 1 || !errors.Is(ts.ulp.faults[0].Err, term.MPACRCError) || ts.ulp.faults[0].HeaderLen != 0 {
		t.Fatalf("faults %+v", ts.ulp.faults)
	}
	if err := ts.Post(0, Buffer{}); err != ErrStopped {
		t.Fatal(err)
	}
	if got := ts.Drain(0); len(got) != 3 || got[0].ID != 0 || got[2].ID != 2 {
		t.Fatalf("drained %+v", got)
	}
}

// Zero allocations per segment in steady state: tagged placement, and
// untagged placement with delivery and reposting.
func TestPlacementAllocs(t *testing.T) {
	ts := newTestStream(t, 1)
	ts.ulp.keep = 1
	wseg := seg(tagged(0x100, 0x10000, true), pattern(1400))
	seq := uint32(0)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := ts.Receive(seq, wseg); err != nil {
			t.Fatal(err)
		}
		seq++
	})
	if allocs != 0 {
		t.Fatalf("tagged: %v allocations per segment", allocs)
	}
	msn := uint32(1)
	hdr := make([]byte, 0, UntaggedHeaderLen)
	payload := pattern(500)
	buf := make([]byte, 0, UntaggedHeaderLen+500)
	allocs = testing.AllocsPerRun(1000, func() {
		h := untagged(0, msn, 0, true)
		hdr = h.Append(hdr[:0])
		buf = append(append(buf[:0], hdr...), payload...)
		if err := ts.Receive(seq, buf); err != nil {
			t.Fatal(err)
		}
		ts.Post(0, ts.ulp.last.Buffer)
		seq++
		msn++
	})
	if allocs != 0 {
		t.Fatalf("untagged: %v allocations per segment", allocs)
	}
}

func BenchmarkPlaceTagged(b *testing.B) {
	for _, size := range []int{64, 1400, 65536 - TaggedHeaderLen} {
		b.Run(sizeName(size), func(b *testing.B) {
			g := newGuarded(1 << 20)
			u := &fakeULP{regions: map[uint32]TaggedBuffer{1: {Mem: g.mem}}, keep: 1}
			s, _ := NewStream(Config{Queues: 3, QueueDepth: 1, Window: 1, ULP: u})
			w := seg(tagged(1, 0, true), pattern(size))
			seq := uint32(0)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				s.Receive(seq, w)
				seq++
			}
		})
	}
}

// A stream with a large window starts with a small ring of slots and grows
// it only as segments arrive far ahead: an idle stream costs little, and
// placement and delivery still follow the sequence numbers across the
// growth, however far a segment overtook the others.
func TestWindowGrowsOnDemand(t *testing.T) {
	ts := newTestStream(t, 1<<15)
	if len(ts.slots) > 16 {
		t.Fatalf("a stream starts with %d slots", len(ts.slots))
	}
	// 3000 tagged single-octet Writes, the last first, then some from the
	// middle, then the rest in order: each lands at its own offset.
	const n = 3000
	order := []uint32{n - 1, 1500, 700, 2999 - 1, 16, 17}
	seen := map[uint32]bool{}
	for _, q := range order {
		seen[q] = true
	}
	for q := uint32(0); q < n; q++ {
		if !seen[q] {
			order = append(order, q)
		}
	}
	for i, q := range order {
		b := []byte{byte(q)}
		if err := ts.Receive(q, seg(tagged(0x100, 0x10000+uint64(q), true), b)); err != nil {
			t.Fatalf("segment %d (seq %d): %v", i, q, err)
		}
	}
	if len(ts.ulp.deliv) != n || ts.Next() != n {
		t.Fatalf("%d delivered, next %d", len(ts.ulp.deliv), ts.Next())
	}
	for q := 0; q < n; q++ {
		if ts.region.mem[q] != byte(q) {
			t.Fatalf("octet %d is %d", q, ts.region.mem[q])
		}
	}
	if len(ts.slots) < n || len(ts.slots) > 2*4096 {
		t.Fatalf("%d slots after a segment 2999 ahead", len(ts.slots))
	}
}
