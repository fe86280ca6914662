package wire

import "fmt"

// Sizes used to derive the MULPDU from the SCTP MTU.
const (
	sctpCommonHeaderLen = 12 // RFC 4960 §3.1
	sctpDataHeaderLen   = 16 // RFC 4960 §3.3.1 (DATA; I-DATA is not used)
	sctpSACKMinLen      = 16 // RFC 4960 §3.3.4, a SACK without gap blocks
)

// MinMULPDU is the smallest maximum DDP Segment size RFC 5043 §9 allows:
// "This should be the largest value that can be supported without use of
// IP or SCTP fragmentation, or 516 bytes, whichever is larger. A minimum of
// 516 bytes is required to allow a DDP Stream Session Control Message with
// 512 bytes of Private Data."
const MinMULPDU = 516

// MULPDUForMTU returns the maximum DDP Segment size (the MULPDU this
// adaptation reports to DDP) for an SCTP MTU of mtu bytes, the largest SCTP
// packet handed to the layer below (DTLS here).
//
// RFC 5043 §9: "As a Lower Layer Protocol (LLP) for DDP, the SCTP adaptation
// layer MUST inform the DDP layer of the maximum DDP Segment size that will
// be supported." The result is the DATA chunk user data that fits one
// packet (mtu minus the common header and the DATA chunk header, rounded
// down to 4 as pion/sctp does), minus the DDP-SSN, minus room for one SACK
// chunk: "The SCTP adaptation layer SHOULD set the maximum DDP Segment size
// below the theoretical maximum in order to allow bundling of Control
// Chunks in the same SCTP packet." It is never below MinMULPDU; below an
// MTU of MinMTU a 516-byte segment needs SCTP fragmentation, which §9
// allows only "unless the alternative is IP fragmentation".
func MULPDUForMTU(mtu uint32) int {
	if mtu < sctpCommonHeaderLen+sctpDataHeaderLen {
		return MinMULPDU
	}
	payload := int(mtu) - sctpCommonHeaderLen - sctpDataHeaderLen
	payload -= payload % 4
	m := payload - SSNLen - sctpSACKMinLen
	if m < MinMULPDU {
		return MinMULPDU
	}
	return m
}

// MinMTU is the smallest SCTP MTU at which MULPDUForMTU needs no SCTP
// fragmentation: 516 + 2 + 16 + 12 + 16.
const MinMTU = MinMULPDU + SSNLen + sctpSACKMinLen + sctpCommonHeaderLen + sctpDataHeaderLen

// CheckSegmentSize enforces RFC 5043 §9: "The SCTP adaptation layer MUST
// reject DDP Segments that are larger than the maximum size specified."
// segLen is the length of the DDP Segment (without the DDP-SSN).
func CheckSegmentSize(segLen, mulpdu int) error {
	if segLen > mulpdu {
		return fmt.Errorf("%w: %d > %d", ErrSegmentTooLarge, segLen, mulpdu)
	}
	return nil
}
