package rdmap

import (
	"bytes"
	"testing"
)

// RFC 7306 Figure 6: the Original Request Identifier, then the Original
// Remote Data Value, big-endian.
var goldenAtomicResponse = AtomicResponse{OrigReqID: 0x01020304, OrigValue: 0xa1a2a3a4a5a6a7a8}

const goldenAtomicResponseWire = "01020304 a1a2a3a4a5a6a7a8"

func TestAtomicResponseGolden(t *testing.T) {
	want := unhex(t, goldenAtomicResponseWire)
	if len(want) != AtomicResponseLen || goldenAtomicResponse.Len() != AtomicResponseLen {
		t.Fatalf("%d octets; Figure 6 draws 12", len(want))
	}
	if got := goldenAtomicResponse.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("Append = % x", got)
	}
	r, n, err := ParseAtomicResponse(want)
	if err != nil || n != AtomicResponseLen || r != goldenAtomicResponse {
		t.Fatalf("Parse = %+v %d %v", r, n, err)
	}
	for i := 0; i < len(want); i++ {
		if _, _, err := ParseAtomicResponse(want[:i]); err == nil {
			t.Fatalf("accepted a %d-octet prefix", i)
		}
	}
}

func FuzzParseAtomicResponse(f *testing.F) {
	f.Add(goldenAtomicResponse.Append(nil))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := ParseAtomicResponse(b)
		if err != nil {
			if len(b) >= AtomicResponseLen {
				t.Fatalf("refused %d octets: %v", len(b), err)
			}
			return
		}
		if got := r.Append(nil); n != AtomicResponseLen || !bytes.Equal(got, b[:n]) {
			t.Fatalf("round trip % x (%d), want % x", got, n, b[:AtomicResponseLen])
		}
	})
}
