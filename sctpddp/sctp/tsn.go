package sctp

// TSN is a Transmission Sequence Number. "All arithmetic dealing with
// Transmission Sequence Numbers MUST be performed modulo 2^32" and
// comparisons use Serial Number Arithmetic with SERIAL_BITS = 32 (RFC
// 9260 §1.6, RFC 1982): a is before b when b - a, modulo 2^32, lies in
// [1, 2^31). Two TSNs 2^31 apart are not ordered; an endpoint never has
// them outstanding at once ("An endpoint SHOULD NOT transmit a DATA chunk
// with a TSN that is more than 2^31 - 1 above the beginning TSN of its
// current send window").
type TSN uint32

// Before reports whether a comes before b.
func (a TSN) Before(b TSN) bool { d := uint32(b - a); return d != 0 && d < 1<<31 }

// AtOrBefore reports whether a is b or comes before it (RFC 9260's "<=").
func (a TSN) AtOrBefore(b TSN) bool { return a == b || a.Before(b) }

// After reports whether a comes after b.
func (a TSN) After(b TSN) bool { return b.Before(a) }

// Next returns the TSN after a: "the next TSN a DATA chunk MUST use after
// transmitting TSN = 2^32 - 1 is TSN = 0".
func (a TSN) Next() TSN { return a + 1 }

// Since returns how many TSNs lie from b up to a (a - b modulo 2^32); the
// caller knows that b is at or before a.
func (a TSN) Since(b TSN) uint32 { return uint32(a - b) }

// SSN is a Stream Sequence Number: "Any arithmetic done on Stream Sequence
// Numbers SHOULD use Serial Number Arithmetic, as defined in [RFC1982],
// where SERIAL_BITS = 16" (§1.6).
type SSN uint16

// Before reports whether a comes before b.
func (a SSN) Before(b SSN) bool { d := uint16(b - a); return d != 0 && d < 1<<15 }
