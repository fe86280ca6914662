package pcapfile

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"time"
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
// link types DecodeIP knows, in UDP as RFC 6951 encapsulates it (a
// datagram whose SCTP checksum is right), or in LinkUpperPDU records whose
// protocol is "sctp" (or not given). Packets that are not SCTP give ErrNotSCTP;
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
		if err == nil && ip.Proto == ProtoUDP {
			// RFC 6951: SCTP over UDP.
			if ip.Payload = sctpInUDP(ip.Payload); ip.Payload != nil {
				ip.Proto = ProtoSCTP
			}
		}
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

// SCTP chunk types that start an association.
const (
	sctpInit    uint8 = 1
	sctpInitAck uint8 = 2
)

// SCTPMessage is a user message of an SCTP association.
type SCTPMessage struct {
	Time     time.Time // of the packet that completed it
	Src, Dst netip.AddrPort
	Stream   uint16
	PPID     uint32 // its last fragment's
	// Data is the message. For a message of one chunk it aliases the
	// packet's data.
	Data []byte
}

// SCTPAssembler puts the user messages of SCTP packets back together:
// the fragments of a message (the B and E flags of DATA chunks) joined in
// the order they come, per direction and stream, and DATA chunks
// retransmitted (a TSN seen before in that direction) dropped. An INIT or
// INIT ACK between two ends starts their TSNs afresh. Unordered messages
// fragmented across others of their stream and I-DATA are beyond it.
type SCTPAssembler struct {
	tsns  map[sctpDir]map[uint32]bool
	frags map[sctpStream][]byte
}

type sctpDir struct{ src, dst netip.AddrPort }

type sctpStream struct {
	sctpDir
	stream uint16
}

// NewSCTPAssembler returns an empty SCTPAssembler.
func NewSCTPAssembler() *SCTPAssembler {
	return &SCTPAssembler{tsns: map[sctpDir]map[uint32]bool{}, frags: map[sctpStream][]byte{}}
}

// Add takes the chunks of one packet, captured at t, and returns the
// messages they complete.
func (a *SCTPAssembler) Add(t time.Time, p SCTPPacket) []SCTPMessage {
	dir := sctpDir{p.Src, p.Dst}
	var out []SCTPMessage
	for _, c := range p.Chunks {
		if c.Type == sctpInit || c.Type == sctpInitAck {
			delete(a.tsns, dir)
			delete(a.tsns, sctpDir{p.Dst, p.Src})
			continue
		}
		d, ok := c.Data()
		if !ok {
			continue
		}
		seen := a.tsns[dir]
		if seen == nil {
			seen = map[uint32]bool{}
			a.tsns[dir] = seen
		}
		if seen[d.TSN] {
			continue // a retransmission
		}
		seen[d.TSN] = true
		k := sctpStream{dir, d.Stream}
		msg := SCTPMessage{Time: t, Src: p.Src, Dst: p.Dst, Stream: d.Stream, PPID: d.PPID}
		switch {
		case d.Begin && d.End:
			msg.Data = d.Data
		case d.Begin:
			a.frags[k] = append([]byte(nil), d.Data...)
			continue
		default:
			prev, ok := a.frags[k]
			if !ok {
				continue // its first fragment is not in the capture
			}
			prev = append(prev, d.Data...)
			if !d.End {
				a.frags[k] = prev
				continue
			}
			delete(a.frags, k)
			msg.Data = prev
		}
		out = append(out, msg)
	}
	return out
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

// The tags of exported PDUs (Wireshark's exported_pdu.h).
const (
	tagEnd     = 0  // EXP_PDU_TAG_END_OF_OPT
	tagProto   = 12 // EXP_PDU_TAG_DISSECTOR_NAME (formerly PROTO_NAME)
	tagIPv4Src = 20 // EXP_PDU_TAG_IPV4_SRC
	tagIPv4Dst = 21
	tagIPv6Src = 22
	tagIPv6Dst = 23
)

// AppendExportedPDU appends e as a LinkUpperPDU record: its protocol and
// addresses (when valid) as tags, then the PDU.
func AppendExportedPDU(b []byte, e ExportedPDU) []byte {
	tag := func(typ uint16, v []byte) {
		b = binary.BigEndian.AppendUint16(b, typ)
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
	}
	if e.Proto != "" {
		name := []byte(e.Proto)
		for len(name)%4 != 0 {
			name = append(name, 0)
		}
		tag(tagProto, name)
	}
	for i, a := range []netip.Addr{e.Src, e.Dst} {
		switch {
		case a.Is4():
			tag(tagIPv4Src+uint16(i), a.AsSlice())
		case a.Is6():
			tag(tagIPv6Src+uint16(i), a.AsSlice())
		}
	}
	tag(tagEnd, nil)
	return append(b, e.Payload...)
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
		case tagEnd:
			e.Payload = b
			return e, nil
		case tagProto:
			e.Proto = strings.TrimRight(string(v), "\x00")
		case tagIPv4Src, tagIPv4Dst, tagIPv6Src, tagIPv6Dst:
			a, ok := netip.AddrFromSlice(v)
			if !ok || a.Is4() != (tag <= tagIPv4Dst) {
				break
			}
			if tag == tagIPv4Src || tag == tagIPv6Src {
				e.Src = a
			} else {
				e.Dst = a
			}
		}
	}
}
