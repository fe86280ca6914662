package pcapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// TCP flag bits, in the order of the TCP header's flags octet.
const (
	FlagFIN uint8 = 1 << iota
	FlagSYN
	FlagRST
	FlagPSH
	FlagACK
	FlagURG
	FlagECE
	FlagCWR
)

// Segment is a decoded TCP segment.
type Segment struct {
	Time     time.Time
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	Flags    uint8
	Window   uint16
	// Payload aliases the packet's data.
	Payload []byte
}

func (s Segment) String() string {
	return fmt.Sprintf("%v > %v seq %d ack %d flags %#02x len %d", s.Src, s.Dst, s.Seq, s.Ack, s.Flags, len(s.Payload))
}

// ErrNotTCP is returned by DecodeTCP for a packet that is well formed as
// far as it was decoded but does not carry a TCP segment: ARP, UDP, an IP
// fragment, an unknown link type and so on.
var ErrNotTCP = errors.New("pcapfile: not a TCP segment")

// ErrNotIP is returned by DecodeIP for a packet that is well formed as far
// as it was decoded but is no whole IP packet: ARP, an IP fragment, an
// IPv6 jumbogram, an unknown link type and so on.
var ErrNotIP = errors.New("pcapfile: not an unfragmented IP packet")

// EtherTypes.
const (
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	etherVLAN = 0x8100
	etherQinQ = 0x88a8
)

// IP protocol numbers.
const (
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
	ProtoSCTP uint8 = 132
)

// IPPacket is a decoded IPv4 or IPv6 packet.
type IPPacket struct {
	Src, Dst netip.Addr
	// Proto is the protocol of the payload: for IPv6, the Next Header
	// after the hop-by-hop, routing and destination options headers.
	Proto uint8
	// Payload aliases the packet's data; it is cut to the datagram's
	// length (Ethernet pads short frames).
	Payload []byte
}

// DecodeIP decodes the link and IP headers of a packet. Packets that are
// no whole IP packet give ErrNotIP; malformed ones an error wrapping
// ErrFormat. IP fragments are not reassembled (ErrNotIP).
func DecodeIP(lt LinkType, data []byte) (IPPacket, error) {
	var p IPPacket
	b, etype, err := linkPayload(lt, data)
	if err != nil {
		return p, err
	}
	switch etype {
	case etherIPv4:
		err = ipv4(b, &p)
	case etherIPv6:
		err = ipv6(b, &p)
	default:
		err = ErrNotIP
	}
	return p, err
}

// DecodeTCP decodes the link, IP and TCP headers of a packet. Packets that
// are not TCP give ErrNotTCP; malformed ones an error wrapping ErrFormat.
// IP fragments are not reassembled (ErrNotTCP).
func DecodeTCP(lt LinkType, data []byte) (Segment, error) {
	var s Segment
	ip, err := DecodeIP(lt, data)
	if err == ErrNotIP || err == nil && ip.Proto != ProtoTCP {
		return s, ErrNotTCP
	}
	if err != nil {
		return s, err
	}
	b := ip.Payload
	if len(b) < 20 {
		return s, formatError("TCP header of %d octets", len(b))
	}
	off := int(b[12]>>4) * 4
	if off < 20 || off > len(b) {
		return s, formatError("TCP data offset %d", off)
	}
	s.Src = netip.AddrPortFrom(ip.Src, binary.BigEndian.Uint16(b[0:2]))
	s.Dst = netip.AddrPortFrom(ip.Dst, binary.BigEndian.Uint16(b[2:4]))
	s.Seq = binary.BigEndian.Uint32(b[4:8])
	s.Ack = binary.BigEndian.Uint32(b[8:12])
	s.Flags = b[13]
	s.Window = binary.BigEndian.Uint16(b[14:16])
	s.Payload = b[off:]
	return s, nil
}

// linkPayload strips the link-layer header and returns the network layer
// and its EtherType.
func linkPayload(lt LinkType, b []byte) ([]byte, uint16, error) {
	switch lt {
	case LinkEthernet:
		if len(b) < 14 {
			return nil, 0, formatError("Ethernet frame of %d octets", len(b))
		}
		et := binary.BigEndian.Uint16(b[12:14])
		b = b[14:]
		for et == etherVLAN || et == etherQinQ {
			if len(b) < 4 {
				return nil, 0, formatError("VLAN tag truncated")
			}
			et = binary.BigEndian.Uint16(b[2:4])
			b = b[4:]
		}
		return b, et, nil
	case LinkSLL:
		if len(b) < 16 {
			return nil, 0, formatError("Linux cooked header of %d octets", len(b))
		}
		return b[16:], binary.BigEndian.Uint16(b[14:16]), nil
	case LinkSLL2:
		if len(b) < 20 {
			return nil, 0, formatError("Linux cooked v2 header of %d octets", len(b))
		}
		return b[20:], binary.BigEndian.Uint16(b[0:2]), nil
	case LinkNull, LinkLoop:
		if len(b) < 4 {
			return nil, 0, formatError("loopback header of %d octets", len(b))
		}
		af := binary.LittleEndian.Uint32(b[0:4])
		if lt == LinkLoop || af > 0xffff {
			af = binary.BigEndian.Uint32(b[0:4])
		}
		switch af {
		case 2:
			return b[4:], etherIPv4, nil
		case 10, 24, 28, 30: // AF_INET6 on Linux, BSDs, macOS
			return b[4:], etherIPv6, nil
		}
		return nil, 0, ErrNotIP
	case LinkRaw:
		if len(b) < 1 {
			return nil, 0, formatError("empty raw packet")
		}
		switch b[0] >> 4 {
		case 4:
			return b, etherIPv4, nil
		case 6:
			return b, etherIPv6, nil
		}
		return nil, 0, formatError("raw packet of IP version %d", b[0]>>4)
	case LinkIPv4:
		return b, etherIPv4, nil
	case LinkIPv6:
		return b, etherIPv6, nil
	}
	return nil, 0, ErrNotIP
}

// ipv4 decodes an IPv4 header into p, with its payload cut to the
// datagram's Total Length.
func ipv4(b []byte, p *IPPacket) error {
	if len(b) < 20 || b[0]>>4 != 4 {
		return formatError("IPv4 header")
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if ihl < 20 || total < ihl || total > len(b) {
		return formatError("IPv4 header length %d, total length %d, %d octets captured", ihl, total, len(b))
	}
	if frag := binary.BigEndian.Uint16(b[6:8]); frag&0x3fff != 0 {
		return ErrNotIP // a fragment: more fragments or an offset
	}
	p.Src = netip.AddrFrom4([4]byte(b[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.Proto, p.Payload = b[9], b[ihl:total]
	return nil
}

// ipv6 decodes an IPv6 header and the extension headers before the upper
// layer into p.
func ipv6(b []byte, p *IPPacket) error {
	if len(b) < 40 || b[0]>>4 != 6 {
		return formatError("IPv6 header")
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if 40+plen > len(b) {
		return formatError("IPv6 payload length %d, %d octets captured", plen, len(b)-40)
	}
	if plen == 0 {
		return ErrNotIP // jumbogram or nothing
	}
	p.Src = netip.AddrFrom16([16]byte(b[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	next := b[6]
	b = b[40 : 40+plen]
	for {
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(b) < 8 {
				return formatError("IPv6 extension header truncated")
			}
			l := 8 + int(b[1])*8
			if l > len(b) {
				return formatError("IPv6 extension header of %d octets", l)
			}
			next = b[0]
			b = b[l:]
		case 44: // fragment
			return ErrNotIP
		default:
			p.Proto, p.Payload = next, b
			return nil
		}
	}
}
