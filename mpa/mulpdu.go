package mpa

// MinMULPDU and MaxMULPDU bound the MULPDU: "The range of MULPDU values
// MUST be between 128 octets and 64768 octets, inclusive." (RFC 5044 §3),
// and "the MPA on TCP sender MUST NOT shrink the MULPDU below 128 octets"
// (§4.5). 64768 is what fits an IP datagram with the largest IP and TCP
// headers and options and MPA's worst-case overhead, rounded down to 128
// octets (§3): a Reader still accepts any ULPDU_Length up to MaxULPDU.
const (
	MinMULPDU = 128
	MaxMULPDU = 64768
)

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
// 128 octets") and never above MaxMULPDU (RFC 5044 §3). EMSS is "the
// smaller of the TCP maximum segment size (MSS) ... and the current path
// Maximum Transmission Unit (MTU)" (RFC 5044 §2); a caller that cannot learn it uses the MTU less the expected IP
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
	return max(MinMULPDU, min(m, MaxMULPDU))
}
