package wire

import (
	"errors"
	"testing"
)

func TestMULPDUForMTU(t *testing.T) {
	tests := []struct {
		mtu  uint32
		want int
	}{
		{1191, 1160 - 2 - 16}, // pion's default: 1191-28 = 1163, rounded to 1160
		{1200, 1172 - 2 - 16},
		{8000, 7972 - 2 - 16},
		{MinMTU, MinMULPDU},
		{MinMTU - 4, MinMULPDU}, // clamped: §9's 516-byte floor
		{0, MinMULPDU},
		{20, MinMULPDU},
	}
	for _, tt := range tests {
		if got := MULPDUForMTU(tt.mtu); got != tt.want {
			t.Errorf("MULPDUForMTU(%d) = %d, want %d", tt.mtu, got, tt.want)
		}
	}
	// At any MTU from MinMTU on, a segment of MULPDU bytes with its DDP-SSN
	// and a SACK fits in one packet with one DATA chunk.
	for mtu := uint32(MinMTU); mtu < 9000; mtu++ {
		m := MULPDUForMTU(mtu)
		if sctpCommonHeaderLen+sctpDataHeaderLen+SSNLen+m+sctpSACKMinLen > int(mtu) {
			t.Fatalf("mtu %d: MULPDU %d does not fit", mtu, m)
		}
	}
}

func TestCheckSegmentSize(t *testing.T) {
	if err := CheckSegmentSize(1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := CheckSegmentSize(1001, 1000); !errors.Is(err, ErrSegmentTooLarge) {
		t.Fatalf("err = %v", err)
	}
}
