package sctpddp

import (
	"bytes"
	"errors"
	"testing"
)

func TestEnhancedDataGolden(t *testing.T) {
	tests := []struct {
		name string
		wire []byte
		d    EnhancedData
	}{
		// A=1, B=0, IRD=16 | C=0, D=1, ORD=8: 0x8010 0x4008.
		{"p2p read RTR", []byte{0x80, 0x10, 0x40, 0x08}, EnhancedData{IRD: 16, ORD: 8, PeerToPeer: true, RTRRead: true}},
		// All flags and both fields all-ones (no negotiation).
		{"all ones", []byte{0xFF, 0xFF, 0xFF, 0xFF}, EnhancedData{IRD: 0x3FFF, ORD: 0x3FFF, PeerToPeer: true, RTRSend: true, RTRWrite: true, RTRRead: true}},
		// Client-server: A=0, IRD=1, ORD=2.
		{"client-server", []byte{0x00, 0x01, 0x00, 0x02}, EnhancedData{IRD: 1, ORD: 2}},
		// A=1 B=1 C=1, IRD=0 ORD=0.
		{"send and write RTR", []byte{0xC0, 0x00, 0x80, 0x00}, EnhancedData{PeerToPeer: true, RTRSend: true, RTRWrite: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.d.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tt.d.Append(nil); !bytes.Equal(got, tt.wire) {
				t.Fatalf("Append = % x, want % x", got, tt.wire)
			}
			got, n, err := ParseEnhancedData(tt.wire)
			if err != nil || n != 4 || got != tt.d {
				t.Fatalf("Parse = %+v, %d, %v", got, n, err)
			}
			for i := 0; i < len(tt.wire); i++ {
				if _, _, err := ParseEnhancedData(tt.wire[:i]); !errors.Is(err, ErrTruncated) {
					t.Fatalf("prefix %d: %v", i, err)
				}
			}
		})
	}
}

// TestEnhancedDataIgnoresRTRFlagsWithoutA: "On reception, if Control Flag
// A is set to 0, then Control Flags B, C, and D MUST be ignored." (RFC 6581
// §9.2)
func TestEnhancedDataIgnoresRTRFlagsWithoutA(t *testing.T) {
	d, _, err := ParseEnhancedData([]byte{0x40, 0x05, 0xC0, 0x06})
	if err != nil {
		t.Fatal(err)
	}
	want := EnhancedData{IRD: 5, ORD: 6}
	if d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
}

func TestEnhancedDataValidate(t *testing.T) {
	bad := []EnhancedData{
		{IRD: 0x4000},
		{ORD: 0xFFFF},
		{RTRSend: true},
		{RTRWrite: true},
		{RTRRead: true},
	}
	for _, d := range bad {
		if err := d.Validate(); !errors.Is(err, ErrInvalidIRDORD) {
			t.Errorf("%+v: err = %v", d, err)
		}
	}
}

func FuzzParseEnhancedData(f *testing.F) {
	f.Add([]byte{0x80, 0x10, 0x40, 0x08})
	f.Add([]byte{0x7F, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, n, err := ParseEnhancedData(b)
		if err != nil {
			return
		}
		if n != 4 {
			t.Fatalf("n = %d", n)
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("parsed value invalid: %v", err)
		}
		enc := d.Append(nil)
		d2, _, err := ParseEnhancedData(enc)
		if err != nil || d2 != d {
			t.Fatalf("round trip: %+v -> % x -> %+v %v", d, enc, d2, err)
		}
		// Bytes survive unless A=0 hid set B/C/D bits.
		if d.PeerToPeer && !bytes.Equal(enc, b[:4]) {
			t.Fatalf("re-encoding % x differs from % x", enc, b[:4])
		}
	})
}
