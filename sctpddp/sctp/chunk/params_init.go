package chunk

import (
	"encoding/binary"
	"slices"
)

// IPv4Address is the IPv4 Address parameter (RFC 9260 §3.3.2.1.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Type = 5            |          Length = 8           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         IPv4 Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// netip.AddrFrom4(p.Addr) gives the address as a netip.Addr.
type IPv4Address struct {
	Addr [4]byte
}

// Len returns the bytes Append adds.
func (p IPv4Address) Len() int { return 8 }

// Append appends the parameter to b.
func (p IPv4Address) Append(b []byte) []byte {
	return appendParam(b, ParamIPv4Address, p.Addr[:])
}

// ParseIPv4Address parses the IPv4 Address parameter at the start of b.
func ParseIPv4Address(b []byte) (IPv4Address, int, error) {
	p, n, err := parseParamOf(b, ParamIPv4Address)
	if err != nil {
		return IPv4Address{}, 0, err
	}
	return IPv4Address{Addr: [4]byte(p.Value())}, n, nil
}

// IPv6Address is the IPv6 Address parameter (RFC 9260 §3.3.2.1.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Type = 6            |          Length = 20          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	|                         IPv6 Address                          |
//	|                                                               |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "A sender MUST NOT use an IPv4-mapped IPv6 address [RFC4291] but SHOULD
// instead use an IPv4 Address parameter": that is the association's to
// check; the codec carries any 16 bytes.
type IPv6Address struct {
	Addr [16]byte
}

// Len returns the bytes Append adds.
func (p IPv6Address) Len() int { return 20 }

// Append appends the parameter to b.
func (p IPv6Address) Append(b []byte) []byte {
	return appendParam(b, ParamIPv6Address, p.Addr[:])
}

// ParseIPv6Address parses the IPv6 Address parameter at the start of b.
func ParseIPv6Address(b []byte) (IPv6Address, int, error) {
	p, n, err := parseParamOf(b, ParamIPv6Address)
	if err != nil {
		return IPv6Address{}, 0, err
	}
	return IPv6Address{Addr: [16]byte(p.Value())}, n, nil
}

// CookiePreservative is the Cookie Preservative parameter (RFC 9260
// §3.3.2.1.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Type = 9            |          Length = 8           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Suggested Cookie Life-Span Increment (msec.)          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type CookiePreservative struct {
	LifeSpanIncrement uint32 // Suggested Cookie Life-Span Increment, in milliseconds
}

// Len returns the bytes Append adds.
func (p CookiePreservative) Len() int { return 8 }

// Append appends the parameter to b.
func (p CookiePreservative) Append(b []byte) []byte {
	return appendParamUint32(b, ParamCookiePreservative, p.LifeSpanIncrement)
}

// ParseCookiePreservative parses the Cookie Preservative parameter at the
// start of b.
func ParseCookiePreservative(b []byte) (CookiePreservative, int, error) {
	p, n, err := parseParamOf(b, ParamCookiePreservative)
	if err != nil {
		return CookiePreservative{}, 0, err
	}
	return CookiePreservative{LifeSpanIncrement: binary.BigEndian.Uint32(p.Value())}, n, nil
}

// SupportedAddressTypes is the Supported Address Types parameter (RFC 9260
// §3.3.2.1.5):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Type = 12           |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Address Type #1        |        Address Type #2        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            ......                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-++-+-+-+-+-+-+-+-+-+-+-+-+-+-++-+-+-+
//
// The Host Name Address type "MUST NOT be used when sending this parameter
// and MUST be ignored when receiving this parameter": the association skips
// it when it reads Types.
type SupportedAddressTypes struct {
	Types ParamTypeList
}

// Len returns the bytes Append adds, padding included.
func (p SupportedAddressTypes) Len() int { return padLen(paramHeaderLen + len(p.Types)) }

// Append appends the parameter and its padding to b.
func (p SupportedAddressTypes) Append(b []byte) []byte {
	return appendParam(b, ParamSupportedAddressTypes, p.Types)
}

// ParseSupportedAddressTypes parses the Supported Address Types parameter at
// the start of b. Types aliases b.
func ParseSupportedAddressTypes(b []byte) (SupportedAddressTypes, int, error) {
	p, n, err := parseParamOf(b, ParamSupportedAddressTypes)
	if err != nil {
		return SupportedAddressTypes{}, 0, err
	}
	return SupportedAddressTypes{Types: ParamTypeList(p.Value())}, n, nil
}

// ParamTypeList is a list of 16-bit parameter types in wire form, as the
// Supported Address Types parameter and the Missing Mandatory Parameter
// error cause carry them. Parsing yields a view of the packet; building
// appends to a list the caller may reuse.
type ParamTypeList []byte

// Len returns the number of types in the list.
func (l ParamTypeList) Len() int { return len(l) / 2 }

// At returns the i-th type.
func (l ParamTypeList) At(i int) ParamType {
	return ParamType(binary.BigEndian.Uint16(l[2*i:]))
}

// Contains reports whether t is in the list.
func (l ParamTypeList) Contains(t ParamType) bool {
	for i := range l.Len() {
		if l.At(i) == t {
			return true
		}
	}
	return false
}

// AppendType appends t to the list.
func (l ParamTypeList) AppendType(t ParamType) ParamTypeList {
	return binary.BigEndian.AppendUint16(l, uint16(t))
}

// SupportedExtensions is the Supported Extensions parameter (RFC 5061
// §4.2.7):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Parameter Type = 0x8008   |      Parameter Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| CHUNK TYPE 1  |  CHUNK TYPE 2 |  CHUNK TYPE 3 |  CHUNK TYPE 4 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                             ....                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| CHUNK TYPE N  |      PAD      |      PAD      |      PAD      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "The sender MUST support both the sending and the receiving of any chunk
// types listed within the Supported Extensions Parameter." RFC 8260 §2.2.1
// negotiates I-DATA by listing it here, RFC 6525 does RE-CONFIG likewise.
type SupportedExtensions struct {
	ChunkTypes []byte // one Chunk Type per byte
}

// Len returns the bytes Append adds, padding included.
func (p SupportedExtensions) Len() int { return padLen(paramHeaderLen + len(p.ChunkTypes)) }

// Append appends the parameter and its padding to b ("the length MUST NOT
// include any padding").
func (p SupportedExtensions) Append(b []byte) []byte {
	return appendParam(b, ParamSupportedExtensions, p.ChunkTypes)
}

// Has reports whether chunk type t is listed.
func (p SupportedExtensions) Has(t Type) bool { return slices.Contains(p.ChunkTypes, byte(t)) }

// ParseSupportedExtensions parses the Supported Extensions parameter at the
// start of b. ChunkTypes aliases b.
func ParseSupportedExtensions(b []byte) (SupportedExtensions, int, error) {
	p, n, err := parseParamOf(b, ParamSupportedExtensions)
	if err != nil {
		return SupportedExtensions{}, 0, err
	}
	return SupportedExtensions{ChunkTypes: p.Value()}, n, nil
}

// AdaptationCodePointDDP is the Adaptation Code Point RFC 5043 assigns to
// the DDP/SCTP adaptation layer (§5.1: "The following value has been
// assigned for DDP. DDP - 0x00000001"; §12: "This document defines a new
// SCTP Adaptation Layer Indication codepoint for DDP (0x00000001)"). §11.1:
// "a DDP/SCTP adaptation layer MUST include an adaptation layer indication
// in its INIT or INIT-ACK".
const AdaptationCodePointDDP uint32 = 0x00000001

// AdaptationLayerIndication is the Adaptation Layer Indication parameter
// (RFC 5061 §4.2.6):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Type =0xC006           |    Length = 8                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Adaptation Code point                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// RFC 5043 §5.1 draws the same parameter with "Length = Variable"; its
// value is the one 32-bit code point all the same, and this package takes
// RFC 5061's Length = 8.
type AdaptationLayerIndication struct {
	AdaptationCodePoint uint32
}

// Len returns the bytes Append adds.
func (p AdaptationLayerIndication) Len() int { return 8 }

// Append appends the parameter to b.
func (p AdaptationLayerIndication) Append(b []byte) []byte {
	return appendParamUint32(b, ParamAdaptationLayerIndication, p.AdaptationCodePoint)
}

// ParseAdaptationLayerIndication parses the Adaptation Layer Indication
// parameter at the start of b.
func ParseAdaptationLayerIndication(b []byte) (AdaptationLayerIndication, int, error) {
	p, n, err := parseParamOf(b, ParamAdaptationLayerIndication)
	if err != nil {
		return AdaptationLayerIndication{}, 0, err
	}
	return AdaptationLayerIndication{AdaptationCodePoint: binary.BigEndian.Uint32(p.Value())}, n, nil
}

// EDMIDDTLS is the Error Detection Method Identifier for SCTP over DTLS
// (RFC 9653; the value pion/sctp sends).
const EDMIDDTLS uint32 = 1

// ZeroChecksumAcceptable is the Zero Checksum Acceptable parameter of RFC
// 9653, by which an endpoint says it accepts packets whose Checksum is 0
// because another method (EDMID) detects errors, DTLS for EDMIDDTLS:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Type = 0x8001        |          Length = 8           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Error Detection Method Identifier (EDMID)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type ZeroChecksumAcceptable struct {
	EDMID uint32 // Error Detection Method Identifier
}

// Len returns the bytes Append adds.
func (p ZeroChecksumAcceptable) Len() int { return 8 }

// Append appends the parameter to b.
func (p ZeroChecksumAcceptable) Append(b []byte) []byte {
	return appendParamUint32(b, ParamZeroChecksumAcceptable, p.EDMID)
}

// ParseZeroChecksumAcceptable parses the Zero Checksum Acceptable parameter
// at the start of b.
func ParseZeroChecksumAcceptable(b []byte) (ZeroChecksumAcceptable, int, error) {
	p, n, err := parseParamOf(b, ParamZeroChecksumAcceptable)
	if err != nil {
		return ZeroChecksumAcceptable{}, 0, err
	}
	return ZeroChecksumAcceptable{EDMID: binary.BigEndian.Uint32(p.Value())}, n, nil
}
