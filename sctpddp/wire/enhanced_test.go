package wire

import (
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
)

// The codec is ddp's (ddp/enhanced_test.go); here, what this package adds:
// a short input is ErrTruncated, and invalid data in an Enhanced message
// is ErrInvalidIRDORD.
func TestParseEnhancedDataTruncated(t *testing.T) {
	wire := []byte{0x80, 0x10, 0x40, 0x08}
	if d, n, err := ParseEnhancedData(wire); err != nil || n != 4 || d != (EnhancedData{PeerToPeer: true, ReadRTR: true, IRD: 16, ORD: 8}) {
		t.Fatalf("Parse = %+v, %d, %v", d, n, err)
	}
	for i := range len(wire) {
		if _, n, err := ParseEnhancedData(wire[:i]); n != 0 || !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix %d: %d, %v", i, n, err)
		}
	}
}

func TestEnhancedDataValidate(t *testing.T) {
	for _, d := range []EnhancedData{{IRD: 0x4000}, {ORD: 0xFFFF}, {SendRTR: true}, {WriteRTR: true}, {ReadRTR: true}} {
		m := SessionControl{Function: FunctionEnhancedInitiate, Enhanced: d}
		if err := m.Validate(); !errors.Is(err, ErrInvalidIRDORD) || !errors.Is(err, ddp.ErrEnhancedData) {
			t.Errorf("%+v in an Enhanced Initiate: err = %v", d, err)
		}
	}
}
