package ddp

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/iwarpgo/iwarp/trace"
)

// recorder is an LLP that keeps every segment it is given.
type recorder struct {
	mulpdu int
	segs   [][]byte
	busy   bool // WriteNow refuses
}

func (r *recorder) MULPDU() int  { return r.mulpdu }
func (r *recorder) Flush() error { return nil }
func (r *recorder) WriteNow(hdr []byte, payload [][]byte) (bool, error) {
	if r.busy {
		return false, nil
	}
	return true, r.WriteSegment(hdr, payload)
}
func (r *recorder) WriteSegment(hdr []byte, payload [][]byte) error {
	seg := append([]byte(nil), hdr...)
	for _, p := range payload {
		seg = append(seg, p...)
	}
	r.segs = append(r.segs, seg)
	return nil
}

type wantSeg struct {
	last bool
	off  uint64 // TO or MO
	n    int
}

// checkSegs checks that the segments r holds are those of one DDP message
// msg, cut as want lists them (the L flag, TO or MO, and payload length of
// each). ulp holds what the ULP gave with the message: the model (Tagged),
// the RsvdULP, and for a tagged message the STag and the initial TO, for
// an untagged one the QN and the MSN. Every segment must carry those
// fields as given: "Each DDP Segment within a specific DDP Message MUST
// contain the same value for this field" (RFC 5041 §4.2 and §4.3, of the
// RsvdULP, the STag, the QN and the MSN; the STag and the QN "MUST be the
// value supplied by the ULP"). Its TO must be "the octet offset from the
// first octet in the associated ULP Message to the first octet in the ULP
// Payload contained in the DDP Segment, plus the TO assigned to the first
// octet in the associated ULP Message", its MO "the octet offset from the
// first octet in the associated ULP Message (which is defined to be zero)
// to the first octet in the ULP Payload contained in the DDP Segment"
// (§5.2). L is set on the last segment only (§4.1), and together the
// segments carry the whole message (§5.2).
func checkSegs(t *testing.T, r *recorder, ulp Header, want []wantSeg, msg []byte) {
	t.Helper()
	if len(r.segs) != len(want) {
		t.Fatalf("%d segments, want %d", len(r.segs), len(want))
	}
	var pos int
	for i, seg := range r.segs {
		h, hl, err := ParseHeader(seg)
		if err != nil {
			t.Fatal(err)
		}
		if len(seg) > r.mulpdu {
			t.Errorf("segment %d is %d octets, over the MULPDU %d", i, len(seg), r.mulpdu)
		}
		if h.Tagged != ulp.Tagged || h.DV != Version {
			t.Fatalf("segment %d: %v, want tagged %v, DV %d", i, h, ulp.Tagged, Version)
		}
		if last := i == len(r.segs)-1; h.Last != last {
			t.Errorf("segment %d of %d: L %v", i, len(r.segs), h.Last)
		}
		off := uint64(h.MO)
		if ulp.Tagged {
			off = h.TO
			if h.STag != ulp.STag || h.RsvdULP[0] != ulp.RsvdULP[0] {
				t.Errorf("segment %d: STag %#x RsvdULP %#02x, want the ULP's %#x and %#02x", i, h.STag, h.RsvdULP[0], ulp.STag, ulp.RsvdULP[0])
			}
			if h.TO != ulp.TO+uint64(pos) {
				t.Errorf("segment %d: TO %#x, want %#x + %d octets sent before it", i, h.TO, ulp.TO, pos)
			}
		} else {
			if h.RsvdULP != ulp.RsvdULP || h.QN != ulp.QN || h.MSN != ulp.MSN {
				t.Errorf("segment %d: RsvdULP %x QN %d MSN %d, want %x, %d, %d", i, h.RsvdULP, h.QN, h.MSN, ulp.RsvdULP, ulp.QN, ulp.MSN)
			}
			if uint64(h.MO) != uint64(pos) {
				t.Errorf("segment %d: MO %d, want the %d octets sent before it", i, h.MO, pos)
			}
		}
		got := wantSeg{h.Last, off, len(seg) - hl}
		if got != want[i] {
			t.Errorf("segment %d: %+v (%v), want %+v", i, got, h, want[i])
		}
		if pos+got.n > len(msg) || !bytes.Equal(seg[hl:], msg[pos:pos+got.n]) {
			t.Fatalf("segment %d carries the wrong bytes", i)
		}
		pos += got.n
	}
	if pos != len(msg) {
		t.Errorf("the segments carry %d octets of a %d-octet message", pos, len(msg))
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// RFC 5041 §5.2: "if the ULP Untagged Message was 2048 octets, and the
// MULPDU was 1500 octets, the Data Source would generate two DDP
// Segments, one with MO = 0, containing 1482 octets of ULP Payload, and a
// second with MO = 1482, containing 566 octets of ULP Payload."
func TestSegmentRFCUntaggedExample(t *testing.T) {
	r := &recorder{mulpdu: 1500}
	s := NewSender(r, 3, 0, nil)
	msg := pattern(2048)
	msn, err := s.SendUntagged([5]byte{0x43}, 0, [][]byte{msg})
	if err != nil || msn != 1 {
		t.Fatalf("SendUntagged = %d, %v; want MSN 1 (RFC 5041 §4.3: the initial MSN MUST be one)", msn, err)
	}
	checkSegs(t, r, Header{RsvdULP: [5]byte{0x43}, QN: 0, MSN: 1}, []wantSeg{{false, 0, 1482}, {true, 1482, 566}}, msg)
}

// RFC 5041 §5.2: "if the ULP Tagged Message was 2048 octets with an
// initial TO of 16384, and the MULPDU was 1500 octets, the Data Source
// would generate two DDP Segments: one with TO = 16384, containing the
// first 1486 octets of ULP payload, and a second with TO = 17870,
// containing 562 octets of ULP payload."
func TestSegmentRFCTaggedExample(t *testing.T) {
	r := &recorder{mulpdu: 1500}
	s := NewSender(r, 3, 0, nil)
	msg := pattern(2048)
	if err := s.SendTagged(0x40, 0x1234, 16384, [][]byte{msg}); err != nil {
		t.Fatal(err)
	}
	checkSegs(t, r, Header{Tagged: true, RsvdULP: [5]byte{0x40}, STag: 0x1234, TO: 16384}, []wantSeg{{false, 16384, 1486}, {true, 17870, 562}}, msg)
}

// A worked example: an RDMA Write of 8192 octets in 2048-octet payloads,
// from TO 0x1000.
func TestSegmentWorkedTaggedExample(t *testing.T) {
	r := &recorder{mulpdu: 2048 + TaggedHeaderLen}
	s := NewSender(r, 3, 0, nil)
	msg := pattern(8192)
	if err := s.SendTagged(0x40, 0x1234, 0x1000, [][]byte{msg[:100], msg[100:5000], msg[5000:]}); err != nil {
		t.Fatal(err)
	}
	checkSegs(t, r, Header{Tagged: true, RsvdULP: [5]byte{0x40}, STag: 0x1234, TO: 0x1000}, []wantSeg{{false, 0x1000, 2048}, {false, 0x1800, 2048}, {false, 0x2000, 2048}, {true, 0x2800, 2048}}, msg)
}

// A worked Send: 6000 octets in 2048-octet payloads with
// MSN 47, so 46 messages go first (the first MSN is one, RFC 5041 §4.3).
func TestSegmentWorkedUntaggedExample(t *testing.T) {
	r := &recorder{mulpdu: 2048 + UntaggedHeaderLen}
	s := NewSender(r, 3, 0, nil)
	for i := 0; i < 46; i++ {
		if _, err := s.SendUntagged([5]byte{0x43}, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.segs = nil
	msg := pattern(6000)
	msn, err := s.SendUntagged([5]byte{0x43}, 0, [][]byte{msg})
	if err != nil || msn != 47 {
		t.Fatalf("MSN %d, %v", msn, err)
	}
	checkSegs(t, r, Header{RsvdULP: [5]byte{0x43}, QN: 0, MSN: 47}, []wantSeg{{false, 0, 2048}, {false, 2048, 2048}, {true, 4096, 1904}}, msg)
}

// TestSegmentFieldsRepeat: messages of many segments whose every header
// field is set, so that a field changed from one segment to the next
// shows. A tagged message whose TO crosses 2^32 (the TO advances by the
// payload in 64 bits), its last segment exactly full; an untagged one
// with all five RsvdULP octets (RDMAP's control byte and Invalidate STag,
// RFC 5040 §4.1), on queue 2, whose MSN is 2 after a message on that
// queue and one on another. checkSegs says what each segment must carry.
func TestSegmentFieldsRepeat(t *testing.T) {
	const mulpdu = 64
	segs := func(first uint64, n, max int) []wantSeg {
		var w []wantSeg
		for off := 0; off < n; off += max {
			w = append(w, wantSeg{off+max >= n, first + uint64(off), min(max, n-off)})
		}
		return w
	}

	r := &recorder{mulpdu: mulpdu}
	s := NewSender(r, 3, 0, nil)
	msg := pattern(6 * (mulpdu - TaggedHeaderLen))
	const to = 1<<32 - 100
	if err := s.SendTagged(0x42, 0x89abcdef, to, [][]byte{msg[:7], msg[7:]}); err != nil {
		t.Fatal(err)
	}
	checkSegs(t, r, Header{Tagged: true, RsvdULP: [5]byte{0x42}, STag: 0x89abcdef, TO: to}, segs(to, len(msg), mulpdu-TaggedHeaderLen), msg)

	for _, qn := range []uint32{2, 0} {
		if _, err := s.SendUntagged([5]byte{0x43}, qn, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.segs = nil
	msg = pattern(7*(mulpdu-UntaggedHeaderLen) - 3)
	rsvd := [5]byte{0x44, 0x12, 0x34, 0x56, 0x78}
	msn, err := s.SendUntagged(rsvd, 2, [][]byte{msg[:100], nil, msg[100:]})
	if err != nil || msn != 2 {
		t.Fatalf("SendUntagged = MSN %d, %v; want MSN 2", msn, err)
	}
	checkSegs(t, r, Header{RsvdULP: rsvd, QN: 2, MSN: 2}, segs(0, len(msg), mulpdu-UntaggedHeaderLen), msg)
}

// "A zero-length DDP Message is allowed and MUST consume exactly one DDP
// Segment." (RFC 5041 §5.2)
func TestSegmentZeroLength(t *testing.T) {
	r := &recorder{mulpdu: 100}
	s := NewSender(r, 3, 0, nil)
	if err := s.SendTagged(0x40, 7, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendUntagged([5]byte{0x43}, 0, [][]byte{{}, {}}); err != nil {
		t.Fatal(err)
	}
	if len(r.segs) != 2 || len(r.segs[0]) != TaggedHeaderLen || len(r.segs[1]) != UntaggedHeaderLen {
		t.Fatalf("segments %x", r.segs)
	}
	for _, seg := range r.segs {
		if !Control(seg[0]).Last() {
			t.Fatal("zero-length segment without L")
		}
	}
}

func TestMSNPerQueueAndWrap(t *testing.T) {
	r := &recorder{mulpdu: 100}
	s := NewSender(r, 3, 0, nil)
	for qn, want := range []uint32{1, 1, 1} {
		if msn, _ := s.SendUntagged([5]byte{}, uint32(qn), nil); msn != want {
			t.Fatalf("QN %d first MSN %d", qn, msn)
		}
	}
	s.msn[0] = 0xffffffff
	if msn, _ := s.SendUntagged([5]byte{}, 0, nil); msn != 0xffffffff {
		t.Fatal(msn)
	}
	// "The MSN value MUST wrap to 0 after a value of 0xFFFFFFFF."
	if msn, _ := s.SendUntagged([5]byte{}, 0, nil); msn != 0 {
		t.Fatalf("after 0xffffffff came MSN %d", msn)
	}
	if _, err := s.SendUntagged([5]byte{}, 3, nil); err == nil {
		t.Fatal("QN 3 accepted on a 3-queue stream")
	}
}

func TestSendErrors(t *testing.T) {
	s := NewSender(&recorder{mulpdu: TaggedHeaderLen}, 3, 0, nil)
	if err := s.SendTagged(0, 1, 0, [][]byte{{1}}); err == nil {
		t.Fatal("MULPDU with no room for payload accepted")
	}
	s = NewSender(&recorder{mulpdu: 100}, 3, 0, nil)
	if err := s.SendTagged(0, 1, ^uint64(0), [][]byte{{1, 2}}); err != ErrTOWrap {
		t.Fatalf("TO wrap: %v", err)
	}
	if err := s.SendTagged(0, 1, ^uint64(0), [][]byte{{1}}); err != nil {
		t.Fatalf("last octet at TO 2^64-1: %v", err)
	}
}

type nopLLP struct{ mulpdu int }

func (n nopLLP) MULPDU() int                           { return n.mulpdu }
func (nopLLP) WriteSegment(_ []byte, _ [][]byte) error { return nil }
func (nopLLP) Flush() error                            { return nil }

func TestSendAllocs(t *testing.T) {
	s := NewSender(nopLLP{1500}, 3, 0, nil)
	msg := [][]byte{pattern(30000), pattern(1000)}
	allocs := testing.AllocsPerRun(100, func() {
		s.SendTagged(0x40, 1, 0, msg)
		s.SendUntagged([5]byte{0x43}, 0, msg)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per message", allocs)
	}
}

func BenchmarkSendTagged(b *testing.B) {
	for _, size := range []int{64, 4096, 65536} {
		b.Run(sizeName(size), func(b *testing.B) {
			s := NewSender(nopLLP{1500}, 3, 0, nil)
			msg := [][]byte{pattern(size)}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				s.SendTagged(0x40, 1, 0, msg)
			}
		})
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1024 && n%1024 == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// TestSendNow: a message of one segment goes through WriteNow with the
// header SendUntagged would give it; a longer one, or one the LLP
// refuses, is not sent and uses no MSN.
func TestSendNow(t *testing.T) {
	r := &recorder{mulpdu: 100}
	s := NewSender(r, 4, 0, nil)
	if ok, err := s.SendUntaggedNow([5]byte{0x4b}, 3, [][]byte{pattern(12)}); !ok || err != nil {
		t.Fatalf("one segment: %v %v", ok, err)
	}
	if ok, err := s.SendUntaggedNow([5]byte{0x4b}, 3, [][]byte{pattern(100)}); ok || err != nil {
		t.Fatalf("two segments: %v %v", ok, err)
	}
	r.busy = true
	if ok, err := s.SendUntaggedNow([5]byte{0x4b}, 3, [][]byte{pattern(12)}); ok || err != nil {
		t.Fatalf("refused: %v %v", ok, err)
	}
	if ok, err := s.SendTaggedNow(0x41, 7, 0x100, [][]byte{pattern(8)}); ok || err != nil {
		t.Fatalf("refused tagged: %v %v", ok, err)
	}
	r.busy = false
	if _, err := s.SendUntagged([5]byte{0x4b}, 3, [][]byte{pattern(12)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SendTaggedNow(0x41, 7, 0x100, [][]byte{pattern(8)}); !ok || err != nil {
		t.Fatalf("tagged: %v %v", ok, err)
	}
	if len(r.segs) != 3 {
		t.Fatalf("%d segments, want 3", len(r.segs))
	}
	// An LLP that is no NowWriter takes nothing at once.
	if ok, err := NewSender(nopLLP{100}, 4, 0, nil).SendUntaggedNow([5]byte{0x4b}, 3, nil); ok || err != nil {
		t.Fatalf("no NowWriter: %v %v", ok, err)
	}
	for i, want := range []uint32{1, 2} {
		h, _, err := ParseHeader(r.segs[i])
		if err != nil {
			t.Fatal(err)
		}
		if h.Tagged || h.QN != 3 || h.MSN != want || h.MO != 0 || !h.Last {
			t.Errorf("segment %d: %+v, want QN 3 MSN %d, last", i, h, want)
		}
	}
	h, _, err := ParseHeader(r.segs[2])
	if err != nil {
		t.Fatal(err)
	}
	if !h.Tagged || h.STag != 7 || h.TO != 0x100 || !h.Last || h.RsvdULP[0] != 0x41 {
		t.Errorf("tagged segment: %+v", h)
	}
}

// TestSegmentSentBeforeLLP checks that a sent segment is observed before
// the LLP has it: the peer may answer, and this end's reader report the
// answer, while the sender is still inside WriteSegment, and an observer
// must not see the answer to a Request before the Request.
func TestSegmentSentBeforeLLP(t *testing.T) {
	var seen []uint64 // the segments observed, by their TO
	r := &recorder{mulpdu: 1500}
	s := NewSender(&observedLLP{recorder: r, seen: &seen, t: t}, 3, 0, trace.Func(func(e trace.Event) {
		if e.Kind == trace.SegmentSent {
			seen = append(seen, e.TO)
		}
	}))
	if err := s.SendTagged(0x40, 7, 16384, [][]byte{pattern(2048)}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("%d segments observed, want 2", len(seen))
	}
}

// observedLLP checks, as each segment arrives, that the observer has
// already seen it.
type observedLLP struct {
	*recorder
	seen *[]uint64
	t    *testing.T
}

func (o *observedLLP) WriteSegment(hdr []byte, payload [][]byte) error {
	h, _, err := ParseHeader(hdr)
	if err != nil {
		o.t.Fatal(err)
	}
	if n := len(*o.seen); n == 0 || (*o.seen)[n-1] != h.TO {
		o.t.Errorf("the LLP has the segment at TO %d before the observer saw it (observed %v)", h.TO, *o.seen)
	}
	return o.recorder.WriteSegment(hdr, payload)
}
