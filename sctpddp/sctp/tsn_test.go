package sctp

import "testing"

// RFC 1982 §3.2's comparisons with SERIAL_BITS = 32 and 16, across the
// wrap: 2^32 - 1 is before 0, the next TSN after it is 0 (RFC 9260 §1.6),
// and values half the space apart are not ordered either way.
func TestSerialArithmetic(t *testing.T) {
	for _, tc := range []struct {
		a, b   TSN
		before bool
	}{
		{0, 1, true}, {1, 0, false}, {0xffffffff, 0, true}, {0, 0xffffffff, false},
		{5, 5, false}, {0, 1<<31 - 1, true}, {0, 1 << 31, false}, {1 << 31, 0, false},
		{0xfffffff0, 0x10, true},
	} {
		if got := tc.a.Before(tc.b); got != tc.before {
			t.Errorf("%d.Before(%d) = %v", tc.a, tc.b, got)
		}
		if got := tc.b.After(tc.a); got != tc.before {
			t.Errorf("%d.After(%d) = %v", tc.b, tc.a, got)
		}
		if got := tc.a.AtOrBefore(tc.b); got != (tc.before || tc.a == tc.b) {
			t.Errorf("%d.AtOrBefore(%d) = %v", tc.a, tc.b, got)
		}
	}
	if TSN(0xffffffff).Next() != 0 || TSN(0x10).Since(0xfffffff0) != 0x20 {
		t.Fatal("wrap")
	}
	if !SSN(0xffff).Before(0) || SSN(0).Before(1<<15) || !SSN(0).Before(1<<15-1) {
		t.Fatal("SSN")
	}
}
