package mpa

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

func TestEnhancedDataGolden(t *testing.T) {
	cases := []struct {
		e    EnhancedData
		wire []byte
	}{
		// A|B|IRD(14) C|D|ORD(14), network byte order (RFC 6581 §9).
		{EnhancedData{IRD: 1, ORD: 2}, []byte{0x00, 0x01, 0x00, 0x02}},
		{EnhancedData{PeerToPeer: true, SendRTR: true, IRD: 16, ORD: 8}, []byte{0xC0, 0x10, 0x00, 0x08}},
		{EnhancedData{PeerToPeer: true, WriteRTR: true, IRD: 0, ORD: 0}, []byte{0x80, 0x00, 0x80, 0x00}},
		{EnhancedData{PeerToPeer: true, ReadRTR: true, IRD: 0x1234, ORD: 0x0567}, []byte{0x92, 0x34, 0x45, 0x67}},
		{EnhancedData{PeerToPeer: true, SendRTR: true, WriteRTR: true, ReadRTR: true, IRD: IRDORDAuto, ORD: IRDORDAuto}, []byte{0xff, 0xff, 0xff, 0xff}},
		{EnhancedData{IRD: IRDORDAuto, ORD: IRDORDAuto}, []byte{0x3f, 0xff, 0x3f, 0xff}},
	}
	for _, tc := range cases {
		got := tc.e.Append(nil)
		if !bytes.Equal(got, tc.wire) || tc.e.Len() != len(got) {
			t.Errorf("%v: Append %x, want %x", tc.e, got, tc.wire)
		}
		e, n, err := ParseEnhancedData(append(tc.wire, 0x99))
		if err != nil || n != 4 || e != tc.e {
			t.Errorf("%x: ParseEnhancedData %v %d %v", tc.wire, e, n, err)
		}
		for i := range len(tc.wire) {
			if _, n, err := ParseEnhancedData(tc.wire[:i]); n != 0 || !errors.Is(err, term.MPAInvalidFrame) {
				t.Errorf("prefix %d: %d %v", i, n, err)
			}
		}
	}
}

func TestEnhancedDataFlagsIgnoredWithoutA(t *testing.T) {
	// "If Control Flag A is set to 0, then Control Flags B, C, and D MUST
	// also be set to 0. On reception, if Control Flag A is set to 0, then
	// Control Flags B, C, and D MUST be ignored." (RFC 6581 §9.2)
	e, _, err := ParseEnhancedData([]byte{0x40, 0x05, 0xC0, 0x06})
	if err != nil || e != (EnhancedData{IRD: 5, ORD: 6}) || e.AnyRTR() {
		t.Fatalf("got %v %v", e, err)
	}
	x := EnhancedData{SendRTR: true, WriteRTR: true, ReadRTR: true, IRD: 0xffff, ORD: 0x4001}
	if got := x.Append(nil); !bytes.Equal(got, []byte{0x3f, 0xff, 0x00, 0x01}) {
		t.Fatalf("Append without A: %x", got)
	}
}

func FuzzParseEnhancedData(f *testing.F) {
	f.Add([]byte{0xC0, 0x10, 0x00, 0x08})
	f.Add([]byte{0x40, 0x05, 0xC0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := ParseEnhancedData(b)
		if err != nil {
			if len(b) >= 4 || n != 0 {
				t.Fatalf("%x: %v", b, err)
			}
			return
		}
		enc := e.Append(nil)
		e2, _, err := ParseEnhancedData(enc)
		if err != nil || e2 != e {
			t.Fatalf("round trip %v -> %x -> %v", e, enc, e2)
		}
		if e.IRD > MaxIRDORD || e.ORD > MaxIRDORD {
			t.Fatalf("IRD/ORD beyond 14 bits: %v", e)
		}
	})
}
