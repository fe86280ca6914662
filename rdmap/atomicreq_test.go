package rdmap

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// RFC 7306 Figure 4, field by field: Reserved (28 bits) and AOpCode, the
// Request Identifier, the Remote STag, the Remote Tagged Offset, Add or
// Swap Data and Mask, Compare Data and Mask, big-endian.
var goldenAtomicRequest = AtomicRequest{Op: CmpSwap, ReqID: 0x01020304, STag: 0x11223344, TO: 0x0102030405060708,
	AddSwapData: 0xa1a2a3a4a5a6a7a8, AddSwapMask: 0xb1b2b3b4b5b6b7b8, CompareData: 0xc1c2c3c4c5c6c7c8, CompareMask: 0xd1d2d3d4d5d6d7d8}

const goldenAtomicRequestWire = "00000002 01020304 11223344 0102030405060708 a1a2a3a4a5a6a7a8 b1b2b3b4b5b6b7b8 c1c2c3c4c5c6c7c8 d1d2d3d4d5d6d7d8"

func TestAtomicRequestGolden(t *testing.T) {
	want := unhex(t, goldenAtomicRequestWire)
	if len(want) != AtomicRequestLen || goldenAtomicRequest.Len() != AtomicRequestLen {
		t.Fatalf("%d octets; RFC 7306 §4: 52", len(want))
	}
	if got := goldenAtomicRequest.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("Append = % x", got)
	}
	r, n, err := ParseAtomicRequest(want)
	if err != nil || n != AtomicRequestLen || r != goldenAtomicRequest {
		t.Fatalf("Parse = %+v %d %v", r, n, err)
	}
	// "Reserved (Not Used): 28 bits. This field is set to zero on
	// transmit, ignored on receive."
	dirty := bytes.Clone(want)
	dirty[0], dirty[1], dirty[2], dirty[3] = 0xff, 0xff, 0xff, 0xf2
	if r, _, err := ParseAtomicRequest(dirty); err != nil || r != goldenAtomicRequest {
		t.Fatalf("reserved bits not ignored: %+v %v", r, err)
	}
	// Figure 5's FetchAdd is AOpCode 0000b.
	fa := AtomicRequest{Op: FetchAdd, AddSwapData: 5, CompareMask: ^uint64(0)}
	if b := fa.Append(nil); !bytes.Equal(b[:4], []byte{0, 0, 0, 0}) || b[27] != 5 {
		t.Fatalf("FetchAdd % x", b)
	}
	for i := 0; i < len(want); i++ {
		if _, _, err := ParseAtomicRequest(want[:i]); err == nil {
			t.Fatalf("accepted a %d-octet prefix", i)
		}
	}
	if !FetchAdd.Supported() || !CmpSwap.Supported() || AtomicOp(1).Supported() || AtomicOp(3).Supported() {
		t.Fatal("Supported: Figure 5 has 0000b and 0010b")
	}
}

// fetchAddRFC is RFC 7306 §5.1.1's pseudocode, line by line.
func fetchAddRFC(orig, add, mask uint64) uint64 {
	bitLocation := uint64(1)
	carry := uint64(0)
	remote := uint64(0)
	for bit := 0; bit <= 63; bit++ {
		if bit != 0 {
			bitLocation <<= 1
		}
		val1 := (orig & bitLocation) >> bit
		val2 := (add & bitLocation) >> bit
		sum := carry + val1 + val2
		carry = (sum & 2) >> 1
		sum &= 1
		if sum != 0 {
			remote |= bitLocation
		}
		if carry != 0 && mask&bitLocation == 0 {
			carry = 1
		} else {
			carry = 0
		}
	}
	return remote
}

// cmpSwapRFC is §5.1.2's pseudocode.
func cmpSwapRFC(orig, cmp, cmpMask, swap, swapMask uint64) uint64 {
	if (cmp^orig)&cmpMask == 0 {
		return orig&^swapMask | swap&swapMask
	}
	return orig
}

func checkApply(t *testing.T, orig, a, am, c, cm uint64) {
	t.Helper()
	fa := AtomicRequest{Op: FetchAdd, AddSwapData: a, AddSwapMask: am}
	if got, w := fa.Apply(orig); !w || got != fetchAddRFC(orig, a, am) {
		t.Fatalf("FetchAdd(%#x + %#x, mask %#x) = %#x, the RFC's pseudocode %#x", orig, a, am, got, fetchAddRFC(orig, a, am))
	}
	cs := AtomicRequest{Op: CmpSwap, AddSwapData: a, AddSwapMask: am, CompareData: c, CompareMask: cm}
	got, w := cs.Apply(orig)
	if got != cmpSwapRFC(orig, c, cm, a, am) || w != ((c^orig)&cm == 0) {
		t.Fatalf("CmpSwap(%#x) = %#x %v, the RFC's pseudocode %#x", orig, got, w, cmpSwapRFC(orig, c, cm, a, am))
	}
}

// Apply computes what RFC 7306's pseudocode does: the masked FetchAdd's
// fields, and CmpSwap's masked compare and swap.
func TestAtomicApply(t *testing.T) {
	// "The setting of the Add Mask field to 0x0000000000000000 results in
	// Atomic Add of 64-bit Original Remote Data Value and 64-bit "Add
	// Data"."
	fa := AtomicRequest{Op: FetchAdd, AddSwapData: 1}
	if v, _ := fa.Apply(^uint64(0)); v != 0 {
		t.Fatalf("unmasked add wraps to %#x", v)
	}
	// Two 32-bit fields (mask bits 31 and 63): the low field's carry is
	// discarded, the high field is untouched by it.
	fa = AtomicRequest{Op: FetchAdd, AddSwapData: 0x00000001_00000001, AddSwapMask: 0x80000000_80000000}
	if v, _ := fa.Apply(0x00000005_ffffffff); v != 0x00000006_00000000 {
		t.Fatalf("two 32-bit fields: %#x", v)
	}
	// Eight 8-bit counters.
	fa = AtomicRequest{Op: FetchAdd, AddSwapData: 0x0101010101010101, AddSwapMask: 0x8080808080808080}
	if v, _ := fa.Apply(0xff00ff00ff00ff00); v != 0x0001000100010001 {
		t.Fatalf("byte counters: %#x", v)
	}
	// CmpSwap that fails writes nothing.
	cs := AtomicRequest{Op: CmpSwap, AddSwapData: 9, AddSwapMask: ^uint64(0), CompareData: 1, CompareMask: ^uint64(0)}
	if v, w := cs.Apply(2); w || v != 2 {
		t.Fatalf("failed compare: %#x %v", v, w)
	}
	if v, w := cs.Apply(1); !w || v != 9 {
		t.Fatalf("compare and swap: %#x %v", v, w)
	}
	rng := rand.New(rand.NewPCG(7306, 1))
	for i := 0; i < 100000; i++ {
		checkApply(t, rng.Uint64(), rng.Uint64(), rng.Uint64()&rng.Uint64(), rng.Uint64(), rng.Uint64())
	}
}

func FuzzAtomicApply(f *testing.F) {
	f.Add(uint64(0), uint64(1), uint64(0), uint64(0), uint64(0))
	f.Add(^uint64(0), uint64(1), uint64(0x8000000080000000), uint64(5), ^uint64(0))
	f.Fuzz(func(t *testing.T, orig, a, am, c, cm uint64) { checkApply(t, orig, a, am, c, cm) })
}

// FuzzParseAtomicRequest: any input either is refused (too short) or
// parses to a header whose Append gives back the input's first 52 octets
// with the Reserved bits zero.
func FuzzParseAtomicRequest(f *testing.F) {
	f.Add(goldenAtomicRequest.Append(nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := ParseAtomicRequest(b)
		if err != nil {
			if len(b) >= AtomicRequestLen {
				t.Fatalf("refused %d octets: %v", len(b), err)
			}
			return
		}
		if n != AtomicRequestLen {
			t.Fatalf("consumed %d", n)
		}
		want := bytes.Clone(b[:AtomicRequestLen])
		want[0], want[1], want[2], want[3] = 0, 0, 0, want[3]&0x0f
		if got := r.Append(nil); !bytes.Equal(got, want) {
			t.Fatalf("round trip % x, want % x", got, want)
		}
	})
}
