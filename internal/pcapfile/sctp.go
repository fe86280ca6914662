package pcapfile

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
)

// ErrNotSCTP is returned by DecodeSCTP for a packet that is well formed as
// far as it was decoded but does not carry an SCTP packet.
var ErrNotSCTP = errors.New("pcapfile: not an SCTP packet")

// SCTPPacket is a decoded SCTP packet (RFC 9260 §3).
type SCTPPacket struct {
	Src, Dst        netip.AddrPort
	VerificationTag uint32
	// Chunks are the packet's chunks, up to a malformed one.
	Chunks []SCTPChunk
}

// SCTPChunk is one chunk of an SCTP packet.
type SCTPChunk struct {
	Type, Flags uint8
	// Value is what follows the chunk header, without the padding. It
	// aliases the packet's data.
	Value []byte
}

// SCTPData is the chunk type of DATA chunks.
const SCTPData uint8 = 0

// DataChunk is a DATA chunk's fields (RFC 9260 §3.3.1).
type DataChunk struct {
	TSN                   uint32
	Stream, SSN           uint16
	PPID                  uint32
	Unordered, Begin, End bool
	Data                  []byte // aliases the packet's data
}

// Data returns the fields of a DATA chunk; ok is false for other chunks
// and for a DATA chunk too short for its header.
func (c SCTPChunk) Data() (d DataChunk, ok bool) {
	v := c.Value
	if c.Type != SCTPData || len(v) < 12 {
		return d, false
	}
	return DataChunk{
		TSN:       binary.BigEndian.Uint32(v[0:4]),
		Stream:    binary.BigEndian.Uint16(v[4:6]),
		SSN:       binary.BigEndian.Uint16(v[6:8]),
		PPID:      binary.BigEndian.Uint32(v[8:12]),
		Unordered: c.Flags&4 != 0,
		Begin:     c.Flags&2 != 0,
		End:       c.Flags&1 != 0,
		Data:      v[12:],
	}, true
}

// DecodeSCTP decodes an SCTP packet: in IPv4 or IPv6 (protocol 132) on the
// link types DecodeIP knows, or in LinkUpperPDU records whose protocol is
// "sctp" (or not given). Packets that are not SCTP give ErrNotSCTP;
// malformed ones an error wrapping ErrFormat. A malformed chunk gives an
// error too, with the chunks before it in Chunks.
func DecodeSCTP(lt LinkType, data []byte) (SCTPPacket, error) {
	var p SCTPPacket
	var src, dst netip.Addr
	var b []byte
	if lt == LinkUpperPDU {
		e, err := DecodeExportedPDU(data)
		if err != nil {
			return p, err
		}
		if e.Proto != "" && e.Proto != "sctp" {
			return p, ErrNotSCTP
		}
		src, dst, b = e.Src, e.Dst, e.Payload
	} else {
		ip, err := DecodeIP(lt, data)
		if err == ErrNotIP || err == nil && ip.Proto != ProtoSCTP {
			return p, ErrNotSCTP
		}
		if err != nil {
			return p, err
		}
		src, dst, b = ip.Src, ip.Dst, ip.Payload
	}
	if len(b) < 12 {
		return p, formatError("SCTP common header of %d octets", len(b))
	}
	p.Src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(b[0:2]))
	p.Dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(b[2:4]))
	p.VerificationTag = binary.BigEndian.Uint32(b[4:8])
	for b = b[12:]; len(b) >= 4; {
		n := int(binary.BigEndian.Uint16(b[2:4]))
		if n < 4 || n > len(b) {
			return p, formatError("SCTP chunk length %d, %d octets left", n, len(b))
		}
		p.Chunks = append(p.Chunks, SCTPChunk{Type: b[0], Flags: b[1], Value: b[4:n]})
		b = b[min((n+3)&^3, len(b)):] // the last chunk's padding may be left out
	}
	return p, nil
}

// ExportedPDU is a record of Wireshark's "Export PDUs to File"
// (LinkUpperPDU): the PDU of a protocol, with what the tags say of it.
type ExportedPDU struct {
	// Proto is the dissector's name (EXP_PDU_TAG_DISSECTOR_NAME), "" if
	// no tag gives it.
	Proto string
	// Src and Dst are the addresses of the IPv4 or IPv6 tags; 0.0.0.0
	// when there are none.
	Src, Dst netip.Addr
	Payload  []byte // aliases the record's data
}

// DecodeExportedPDU decodes a LinkUpperPDU record: tags (type and length,
// big-endian, then the value) up to the end-of-options tag, then the PDU.
func DecodeExportedPDU(b []byte) (ExportedPDU, error) {
	e := ExportedPDU{Src: netip.IPv4Unspecified(), Dst: netip.IPv4Unspecified()}
	for {
		if len(b) < 4 {
			return ExportedPDU{}, formatError("exported PDU's tags truncated")
		}
		tag, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+n {
			return ExportedPDU{}, formatError("exported PDU's tag %d of %d octets, %d left", tag, n, len(b)-4)
		}
		v := b[4 : 4+n]
		b = b[4+n:]
		switch tag {
		case 0: // EXP_PDU_TAG_END_OF_OPT
			e.Payload = b
			return e, nil
		case 12: // EXP_PDU_TAG_DISSECTOR_NAME (formerly PROTO_NAME)
			e.Proto = strings.TrimRight(string(v), "\x00")
		case 20, 21: // EXP_PDU_TAG_IPV4_SRC, _DST
			if n == 4 {
				if tag == 20 {
					e.Src = netip.AddrFrom4([4]byte(v))
				} else {
					e.Dst = netip.AddrFrom4([4]byte(v))
				}
			}
		case 22, 23: // EXP_PDU_TAG_IPV6_SRC, _DST
			if n == 16 {
				if tag == 22 {
					e.Src = netip.AddrFrom16([16]byte(v))
				} else {
					e.Dst = netip.AddrFrom16([16]byte(v))
				}
			}
		}
	}
}
