package ddp

import (
	"bytes"
	"errors"
	"testing"
)

// Golden octets of RFC 6581 §9: A|B|IRD(14) C|D|ORD(14), network byte
// order.
func TestEnhancedDataGolden(t *testing.T) {
	tests := []struct {
		name string
		wire []byte
		e    EnhancedData
	}{
		{"client-server", []byte{0x00, 0x01, 0x00, 0x02}, EnhancedData{IRD: 1, ORD: 2}},
		{"p2p send RTR", []byte{0xC0, 0x10, 0x00, 0x08}, EnhancedData{PeerToPeer: true, SendRTR: true, IRD: 16, ORD: 8}},
		{"p2p write RTR", []byte{0x80, 0x00, 0x80, 0x00}, EnhancedData{PeerToPeer: true, WriteRTR: true}},
		{"p2p read RTR", []byte{0x80, 0x10, 0x40, 0x08}, EnhancedData{PeerToPeer: true, ReadRTR: true, IRD: 16, ORD: 8}},
		{"14-bit fields", []byte{0x92, 0x34, 0x45, 0x67}, EnhancedData{PeerToPeer: true, ReadRTR: true, IRD: 0x1234, ORD: 0x0567}},
		{"all ones", []byte{0xFF, 0xFF, 0xFF, 0xFF}, EnhancedData{PeerToPeer: true, SendRTR: true, WriteRTR: true, ReadRTR: true, IRD: IRDORDNoNegotiation, ORD: IRDORDNoNegotiation}},
		{"no negotiation", []byte{0x3F, 0xFF, 0x3F, 0xFF}, EnhancedData{IRD: IRDORDNoNegotiation, ORD: IRDORDNoNegotiation}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.e.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tt.e.Append(nil); !bytes.Equal(got, tt.wire) || tt.e.Len() != len(got) {
				t.Fatalf("Append = % x, want % x", got, tt.wire)
			}
			got, ok := ParseEnhancedData(append(tt.wire, 0x99))
			if !ok || got != tt.e {
				t.Fatalf("Parse = %+v, %v", got, ok)
			}
			for i := range len(tt.wire) {
				if _, ok := ParseEnhancedData(tt.wire[:i]); ok {
					t.Fatalf("prefix of %d octets parsed", i)
				}
			}
		})
	}
}

// "If Control Flag A is set to 0, then Control Flags B, C, and D MUST
// also be set to 0. On reception, if Control Flag A is set to 0, then
// Control Flags B, C, and D MUST be ignored." (RFC 6581 §9.2)
func TestEnhancedDataFlagsWithoutA(t *testing.T) {
	e, ok := ParseEnhancedData([]byte{0x40, 0x05, 0xC0, 0x06})
	if !ok || e != (EnhancedData{IRD: 5, ORD: 6}) || e.AnyRTR() {
		t.Fatalf("got %v", e)
	}
	x := EnhancedData{SendRTR: true, WriteRTR: true, ReadRTR: true, IRD: 0xffff, ORD: 0x4001}
	if got := x.Append(nil); !bytes.Equal(got, []byte{0x3f, 0xff, 0x00, 0x01}) {
		t.Fatalf("Append without A: % x", got)
	}
	for _, bad := range []EnhancedData{{IRD: 0x4000}, {ORD: 0xFFFF}, {SendRTR: true}, {WriteRTR: true}, {ReadRTR: true}} {
		if err := bad.Validate(); !errors.Is(err, ErrEnhancedData) {
			t.Errorf("%v: Validate = %v", bad, err)
		}
	}
}

func FuzzParseEnhancedData(f *testing.F) {
	f.Add([]byte{0x80, 0x10, 0x40, 0x08})
	f.Add([]byte{0x7F, 0xFF, 0xFF, 0xFF})
	f.Add([]byte{0x40, 0x05, 0xC0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, ok := ParseEnhancedData(b)
		if !ok {
			if len(b) >= EnhancedDataLen {
				t.Fatalf("% x not parsed", b)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("parsed value invalid: %v", err)
		}
		enc := e.Append(nil)
		if e2, ok := ParseEnhancedData(enc); !ok || e2 != e {
			t.Fatalf("round trip: %v -> % x -> %v", e, enc, e2)
		}
		// The octets survive unless A=0 hid set B, C or D bits.
		if e.PeerToPeer && !bytes.Equal(enc, b[:4]) {
			t.Fatalf("re-encoding % x differs from % x", enc, b[:4])
		}
	})
}
