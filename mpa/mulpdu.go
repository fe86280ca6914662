package mpa

// MinMULPDU is the floor of MULPDU: "If this occurs, the MPA on TCP sender
// MUST NOT shrink the MULPDU below 128 octets" (RFC 5044 §4.5).
const MinMULPDU = 128

// MULPDU returns the largest ULPDU that fits in one FPDU in a TCP segment
// of emss octets (RFC 5044 §4.5). With Markers:
//
//	"MULPDU = EMSS - (6 + 4 * Ceiling(EMSS / 512) + EMSS mod 4)"
//
// and without:
//
//	"MULPDU = EMSS - (6 + EMSS mod 4)"
//
// The result is never below MinMULPDU ("MUST NOT shrink the MULPDU below
// 128 octets") and never above MaxULPDU, the largest value ULPDU_Length
// can hold. EMSS is "the smaller of the TCP maximum segment size (MSS)
// ... and the current path Maximum Transmission Unit (MTU)" (RFC 5044
// §2); a caller that cannot learn it uses the MTU less the expected IP
// and TCP header sizes (§5.1).
func MULPDU(emss int, markers bool) int {
	if emss < 0 {
		emss = 0
	}
	overhead := 6 + emss%4
	if markers {
		overhead += 4 * ((emss + MarkerInterval - 1) / MarkerInterval)
	}
	m := emss - overhead
	return max(MinMULPDU, min(m, MaxULPDU))
}
