package mpa

import "testing"

func TestMULPDU(t *testing.T) {
	cases := []struct {
		emss    int
		markers bool
		want    int
	}{
		{1460, false, 1454},               // 1460 - (6 + 0)
		{1460, true, 1460 - (6 + 4*3)},    // ceil(1460/512) = 3
		{1448, false, 1442},               // 1448 - 6 (timestamps on)
		{1448, true, 1448 - (6 + 4*3)},    //
		{1461, false, 1461 - (6 + 1)},     // EMSS mod 4 = 1
		{1463, true, 1463 - (6 + 12 + 3)}, //
		{512, true, 512 - (6 + 4)},        // exactly one interval
		{513, true, 513 - (6 + 8 + 1)},    //
		{8948, false, 8942},               // jumbo frames
		{65483, false, MaxMULPDU},         // loopback MSS: 65474, above §3's range
		{100, false, 128},                 // "MUST NOT shrink the MULPDU below 128 octets"
		{0, true, 128},
		{-5, false, 128},
		{64772, false, 64772 - 6},   // 64766: in range
		{64776, false, MaxMULPDU},   // 64770: above §3's range
		{65484, true, MaxMULPDU},    // with Markers: 64966
		{1 << 20, false, MaxMULPDU}, // "MUST be between 128 octets and 64768 octets, inclusive" (§3)
	}
	for _, tc := range cases {
		if got := MULPDU(tc.emss, tc.markers); got != tc.want {
			t.Errorf("MULPDU(%d, %v) = %d, want %d", tc.emss, tc.markers, got, tc.want)
		}
	}
	// The FPDU of a MULPDU-sized ULPDU fits in EMSS wherever it starts.
	for emss := 128; emss <= 9000; emss += 7 {
		for _, markers := range []bool{false, true} {
			m := MULPDU(emss, markers)
			if m == MinMULPDU {
				continue
			}
			for pos := uint64(0); pos < 512; pos += 4 {
				if n := WireLen(m, pos, markers); n > emss {
					t.Fatalf("EMSS %d markers %v pos %d: FPDU %d octets", emss, markers, pos, n)
				}
			}
		}
	}
}

func TestEMSS(t *testing.T) {
	a, _ := tcpPair(t)
	emss, err := EMSS(a)
	if err != nil {
		t.Skipf("EMSS: %v", err)
	}
	// Whatever the kernel picked, it is a real MSS.
	if emss < 536 || emss > 65495 {
		t.Fatalf("EMSS %d", emss)
	}
	t.Logf("loopback EMSS %d: MULPDU %d, with Markers %d", emss, MULPDU(emss, false), MULPDU(emss, true))
}
