package rdmap

import (
	"encoding/binary"
	"testing"

	"github.com/iwarpgo/iwarp/internal/llptest"
)

// word reads the 64-bit word at off of a region in the machine's byte
// order, which Atomic Operations use (RFC 7306 §5.1.1: "performed in the
// endian format of the target memory").
func word(mr *MemoryRegion, off int) uint64 { return binary.NativeEndian.Uint64(mr.Bytes()[off:]) }

func setWord(mr *MemoryRegion, off int, v uint64) { binary.NativeEndian.PutUint64(mr.Bytes()[off:], v) }

// FetchAdd and CmpSwap, plain and masked: the peer's word changes as RFC
// 7306 §5.1 says, the original value lands in the local SGE, and the
// completions say which operation and 8 octets.
func TestAtomicOperations(t *testing.T) {
	for _, reorder := range []int{0, 4} {
		a, b := newPair(t, pairOpts{pipe: llptest.Options{Reorder: reorder, Seed: 9}})
		target := b.reg(t, 64, RemoteAtomic)
		res := a.reg(t, 64, LocalWrite)
		setWord(target, 8, 100)
		type step struct {
			wr       AtomicWR
			op       WorkOp
			orig     uint64
			newValue uint64
		}
		steps := []step{
			{AtomicWR{Op: FetchAdd, Add: 5}, WorkFetchAdd, 100, 105},
			{AtomicWR{Op: FetchAdd, Add: ^uint64(0)}, WorkFetchAdd, 105, 104}, // adding -1
			{AtomicWR{Op: CmpSwap, Compare: 1, Swap: 7}, WorkCompSwap, 104, 104},
			{AtomicWR{Op: CmpSwap, Compare: 104, Swap: 7}, WorkCompSwap, 104, 7},
			// Masked: two 32-bit fields; the low one overflows without
			// carrying into the high one.
			{AtomicWR{Op: FetchAdd, Add: 0x00000001_fffffffa, AddMask: 0x80000000_80000000, Masked: true}, WorkFetchAdd, 7, 0x00000001_00000001},
			// Masked CmpSwap: compare the high half only, swap the low half only.
			{AtomicWR{Op: CmpSwap, Compare: 0x00000001_12345678, CompareMask: 0xffffffff_00000000,
				Swap: 0xdddddddd_0000abcd, SwapMask: 0x00000000_ffffffff, Masked: true}, WorkCompSwap, 0x00000001_00000001, 0x00000001_0000abcd},
			// A masked compare that fails.
			{AtomicWR{Op: CmpSwap, Compare: 0, CompareMask: 1, Swap: 0, SwapMask: ^uint64(0), Masked: true}, WorkCompSwap, 0x00000001_0000abcd, 0x00000001_0000abcd},
		}
		for i, s := range steps {
			wr := s.wr
			wr.ID, wr.Local, wr.RemoteSTag, wr.RemoteTO = uint64(i), SGE{MR: res, Offset: 16, Length: 8}, target.STag(), 8
			mustPost(t, a.qp.PostAtomic(wr))
			c := wait(t, a.scq)
			if c.WRID != uint64(i) || c.Op != s.op || c.Status != StatusSuccess || c.ByteLen != 8 {
				t.Fatalf("step %d: completion %+v", i, c)
			}
			if got := word(res, 16); got != s.orig {
				t.Fatalf("step %d: original value %#x, want %#x", i, got, s.orig)
			}
			// The Response was delivered after the responder changed the
			// word; the pipe orders that.
			if got := word(target, 8); got != s.newValue {
				t.Fatalf("step %d: remote value %#x, want %#x", i, got, s.newValue)
			}
		}
		// Nothing reached the responder's ULP (RFC 7306 §5.2.1 item 3).
		if n := b.rcq.Poll(make([]Completion, 4)) + b.scq.Poll(make([]Completion, 4)); n != 0 {
			t.Fatalf("the responder got %d completions", n)
		}
	}
}
