package mpa

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// The codec is ddp's (ddp/enhanced_test.go); these golden octets check it
// through this package's names, and that a short input is an invalid MPA
// frame.
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
		{EnhancedData{PeerToPeer: true, SendRTR: true, WriteRTR: true, ReadRTR: true, IRD: ddp.IRDORDNoNegotiation, ORD: ddp.IRDORDNoNegotiation}, []byte{0xff, 0xff, 0xff, 0xff}},
		{EnhancedData{IRD: ddp.IRDORDNoNegotiation, ORD: ddp.IRDORDNoNegotiation}, []byte{0x3f, 0xff, 0x3f, 0xff}},
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
