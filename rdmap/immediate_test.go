package rdmap

import (
	"bytes"
	"testing"
)

// RFC 7306 Figure 7: 64 bits of Immediate Data, the whole message after
// the DDP header.
func TestImmediateDataGolden(t *testing.T) {
	want := unhex(t, "0102030405060708")
	d := ImmediateData{Data: 0x0102030405060708}
	if d.Len() != ImmediateDataLen || ImmediateDataLen != 8 {
		t.Fatal("§6.3: 8 bytes of data")
	}
	if got := d.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("Append = % x", got)
	}
	r, n, err := ParseImmediateData(want)
	if err != nil || n != 8 || r != d {
		t.Fatalf("Parse = %+v %d %v", r, n, err)
	}
	for i := 0; i < len(want); i++ {
		if _, _, err := ParseImmediateData(want[:i]); err == nil {
			t.Fatalf("accepted a %d-octet prefix", i)
		}
	}
}

func FuzzParseImmediateData(f *testing.F) {
	f.Add([]byte("immediat"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := ParseImmediateData(b)
		if err != nil {
			if len(b) >= ImmediateDataLen {
				t.Fatalf("refused %d octets: %v", len(b), err)
			}
			return
		}
		if got := r.Append(nil); n != ImmediateDataLen || !bytes.Equal(got, b[:n]) {
			t.Fatalf("round trip % x (%d), want % x", got, n, b[:8])
		}
	})
}
