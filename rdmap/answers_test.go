package rdmap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// A message that answers something is matched to what it answers when it
// is delivered, not only when its segments are placed. Over an unordered
// LLP (a Window above one) a peer that answers one RDMA Read with two Read
// Responses, the later one first, has both placed into the Read's Data
// Sink buffer; the first delivered completes the Read, and the second,
// which answers nothing, gets RDMAP's Unexpected OpCode (0x0/0x2/0x06)
// with its DDP header. Nothing after it is placed, and the queue pair
// flushes instead of failing.
func TestReadResponseAnsweredTwice(t *testing.T) {
	s, peer := rawSide(t, QPConfig{Window: 8})
	sink := s.reg(t, 16, LocalWrite)
	mustPost(t, s.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: sink, Length: 16}, RemoteSTag: 0x1234}))
	peer.segsFrom(t, 1)
	resp := byte(MakeControl(OpReadResponse))
	second := taggedSeg(resp, sink.STag(), 0, bytes.Repeat([]byte{2}, 16))
	if err := s.qp.Stream().Receive(1, second); err != nil {
		t.Fatalf("the second Response, placed first: %v", err)
	}
	if err := s.qp.Stream().Receive(0, taggedSeg(resp, sink.STag(), 0, bytes.Repeat([]byte{1}, 16))); err != nil {
		t.Fatalf("the first Response: %v", err)
	}
	if c := wait(t, s.scq); c.WRID != 1 || c.Status != StatusSuccess {
		t.Fatalf("the Read: %+v", c)
	}
	peer.checkTerminate(t, second, term.RDMAPUnexpectedOpcode)
	if err := s.qp.Stream().Receive(2, taggedSeg(resp, sink.STag(), 0, bytes.Repeat([]byte{3}, 16))); !errors.Is(err, ddp.ErrStopped) {
		t.Fatalf("a Response after the Terminate: %v, want ErrStopped", err)
	}
	if bytes.Contains(sink.Bytes(), []byte{3}) {
		t.Fatal("a Response after the Terminate was placed")
	}
	if st := s.qp.State(); st != StateTerminating && st != StateClosed {
		t.Fatalf("state %v", st)
	}
}

// A Read Response delivered for the oldest outstanding Read must be that
// Read's: the same Data Sink STag, Tagged Offset and length (RFC 5040
// §5.2.2's MAY, which this queue pair does), or the tagged buffer error
// of RFC 5041 §7.2 follows. Two Reads name two sinks; a Response placed
// in the second's sink is delivered where the first's was due.
func TestReadResponseMatchesOldestRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  func(one, two *MemoryRegion) []byte
		want *term.Error
	}{
		{"the second Read's STag", func(one, two *MemoryRegion) []byte {
			return taggedSeg(byte(MakeControl(OpReadResponse)), two.STag(), 0, make([]byte, 16))
		}, term.DDPInvalidSTag},
		{"short", func(one, two *MemoryRegion) []byte {
			return taggedSeg(byte(MakeControl(OpReadResponse)), one.STag(), 0, make([]byte, 8))
		}, term.DDPBaseBounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, peer := rawSide(t, QPConfig{Window: 8})
			one, two := s.reg(t, 16, LocalWrite), s.reg(t, 16, LocalWrite)
			mustPost(t, s.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: one, Length: 16}, RemoteSTag: 0x1234}))
			mustPost(t, s.qp.PostRead(ReadWR{ID: 2, Local: SGE{MR: two, Length: 16}, RemoteSTag: 0x1234}))
			peer.segsFrom(t, 2)
			seg := tc.seg(one, two)
			if err := s.qp.Stream().Receive(0, seg); err != nil {
				t.Fatal(err)
			}
			peer.checkTerminate(t, seg, tc.want)
			for id := uint64(1); id <= 2; id++ {
				if c := wait(t, s.scq); c.WRID != id || c.Status == StatusSuccess {
					t.Fatalf("Read %d: %+v", id, c)
				}
			}
		})
	}
}

// The Atomic twin: two Atomic Responses for one Atomic Request, the later
// MSN first. The second delivered answers nothing: Unexpected OpCode, not
// a silent drop that would leave its queue 3 buffer unposted.
func TestAtomicResponseAnsweredTwice(t *testing.T) {
	s, peer := rawSide(t, QPConfig{AtomicORD: 2, Window: 8})
	res := s.reg(t, 8, LocalWrite)
	mustPost(t, s.qp.PostAtomic(AtomicWR{ID: 1, Op: FetchAdd, Add: 1, Local: SGE{MR: res, Length: 8}, RemoteSTag: 0x1234}))
	segs := peer.segsFrom(t, 1)
	_, hl, _ := ddp.ParseHeader(segs[0])
	req, _, err := ParseAtomicRequest(segs[0][hl:])
	if err != nil {
		t.Fatal(err)
	}
	resp := func(msn uint32, v uint64) []byte {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse))}, QN: QNAtomicResp, MSN: msn}
		return (&AtomicResponse{OrigReqID: req.ReqID, OrigValue: v}).Append(h.Append(nil))
	}
	second := resp(2, 0x22)
	if err := s.qp.Stream().Receive(1, second); err != nil {
		t.Fatalf("the second Response, placed first: %v", err)
	}
	if err := s.qp.Stream().Receive(0, resp(1, 0x11)); err != nil {
		t.Fatalf("the first Response: %v", err)
	}
	if c := wait(t, s.scq); c.WRID != 1 || c.Status != StatusSuccess || word(res, 0) != 0x11 {
		t.Fatalf("the Atomic: %+v, original value %#x", c, word(res, 0))
	}
	peer.checkTerminate(t, second, term.RDMAPUnexpectedOpcode)
}

// A Read Response or Atomic Response that nobody asked for is refused
// where it is placed, before a byte of it lands.
func TestResponsesNobodyAskedFor(t *testing.T) {
	t.Run("Read Response", func(t *testing.T) {
		s, peer := rawSide(t, QPConfig{Window: 8})
		sink := s.reg(t, 16, LocalWrite)
		seg := taggedSeg(byte(MakeControl(OpReadResponse)), sink.STag(), 0, bytes.Repeat([]byte{9}, 16))
		peer.send(t, seg)
		peer.checkTerminate(t, seg, term.RDMAPUnexpectedOpcode)
		if !bytes.Equal(sink.Bytes(), make([]byte, 16)) {
			t.Fatal("placed")
		}
	})
	t.Run("Atomic Response", func(t *testing.T) {
		_, peer := rawSide(t, QPConfig{Window: 8})
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse))}, QN: QNAtomicResp, MSN: 1}
		seg := (&AtomicResponse{OrigReqID: 7, OrigValue: 1}).Append(h.Append(nil))
		peer.send(t, seg)
		peer.checkTerminate(t, seg, term.RDMAPUnexpectedOpcode)
	})
}

// BindWindow refuses a region that has been deregistered: its memory is
// the program's again, and a window onto it would give the peer access.
func TestBindWindowOnDeadRegion(t *testing.T) {
	s, _ := rawSide(t, QPConfig{})
	mr := s.reg(t, 64, RemoteWrite)
	if err := mr.Deregister(); err != nil {
		t.Fatal(err)
	}
	if w, err := mr.BindWindow(0, 16, RemoteWrite); !errors.Is(err, ErrInvalidSTag) {
		t.Fatalf("BindWindow on a deregistered region: %v, %v", w, err)
	}
	if w, err := s.qp.BindWindow(mr, 0, 16, RemoteWrite); !errors.Is(err, ErrInvalidSTag) {
		t.Fatalf("QueuePair.BindWindow on a deregistered region: %v, %v", w, err)
	}
}

// The device's STag bookkeeping is bounded by its registration limit:
// registering and deregistering far more regions than MaxSTags leaves it
// remembering no more keys than that.
func TestSTagBookkeepingBounded(t *testing.T) {
	dev := NewDevice(DeviceConfig{MaxSTags: 64})
	pd := dev.NewProtectionDomain()
	for range 10000 {
		mr, err := pd.RegisterMemory(make([]byte, 8), 0, RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		if err := mr.Deregister(); err != nil {
			t.Fatal(err)
		}
	}
	dev.mu.RLock()
	defer dev.mu.RUnlock()
	if len(dev.keys) > 64 || len(dev.freed) > 64 || len(dev.stags) != 0 {
		t.Fatalf("%d keys, %d freed, %d STags remembered; the limit is 64", len(dev.keys), len(dev.freed), len(dev.stags))
	}
}

// An index used again after being freed gets another key than its last:
// a peer holding the old STag cannot reach the new region.
func TestSTagKeyRotates(t *testing.T) {
	dev := NewDevice(DeviceConfig{MaxSTags: 4})
	dev.fixedIndex = 0x42
	pd := dev.NewProtectionDomain()
	last := uint32(0)
	for range 600 {
		mr, err := pd.RegisterMemory(make([]byte, 8), 0, RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		if mr.STag() == last {
			t.Fatalf("STag %#08x handed out twice in a row", last)
		}
		last = mr.STag()
		mr.Deregister()
	}
}
