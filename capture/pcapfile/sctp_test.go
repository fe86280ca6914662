package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// sctpPacket is an SCTP packet from port 5000 to 5001 with a DATA chunk
// (stream 1, PPID 16, "hello", begin and end, padded) and a SACK-like
// chunk of type 3 without value padding.
func sctpPacket() []byte {
	b := []byte{0x13, 0x88, 0x13, 0x89, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0}
	b = append(b, SCTPData, 0x03, 0, 21) // DATA, B and E, length 16+5
	b = binary.BigEndian.AppendUint32(b, 7)
	b = append(b, 0, 1, 0, 2) // stream 1, SSN 2
	b = binary.BigEndian.AppendUint32(b, 16)
	b = append(b, "hello"...)
	b = append(b, 0, 0, 0) // padding
	b = append(b, 3, 0, 0, 6, 0xaa, 0xbb)
	return b
}

// ipPacket is an IP packet from src to dst of protocol proto.
func ipPacket(src, dst string, proto uint8, payload []byte) []byte {
	b := AppendIPHeader(nil, netip.MustParseAddr(src), netip.MustParseAddr(dst), proto, 1, len(payload))
	return append(b, payload...)
}

func TestDecodeSCTP(t *testing.T) {
	sctp := sctpPacket()
	v4 := ipPacket("192.0.2.1", "192.0.2.2", ProtoSCTP, sctp)
	v6 := ipPacket("2001:db8::1", "2001:db8::2", ProtoSCTP, sctp)
	// IPv6 with a hop-by-hop options header before SCTP.
	v6ext := bytes.Clone(v6[:40])
	binary.BigEndian.PutUint16(v6ext[4:], uint16(8+len(sctp)))
	v6ext[6] = 0
	v6ext = append(v6ext, ProtoSCTP, 0, 1, 4, 0, 0, 0, 0)
	v6ext = append(v6ext, sctp...)
	eth := append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}, v4...)
	upper := AppendExportedPDU(nil, ExportedPDU{Proto: "sctp", Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"), Payload: sctp})
	bare := AppendExportedPDU(nil, ExportedPDU{Payload: sctp}) // no tags: 0.0.0.0

	for _, tc := range []struct {
		name     string
		lt       LinkType
		b        []byte
		src, dst string
	}{
		{"IPv4", LinkRaw, v4, "192.0.2.1:5000", "192.0.2.2:5001"},
		{"Ethernet", LinkEthernet, eth, "192.0.2.1:5000", "192.0.2.2:5001"},
		{"IPv6", LinkIPv6, v6, "[2001:db8::1]:5000", "[2001:db8::2]:5001"},
		{"IPv6 hop-by-hop", LinkRaw, v6ext, "[2001:db8::1]:5000", "[2001:db8::2]:5001"},
		{"upper PDU", LinkUpperPDU, upper, "[2001:db8::1]:5000", "[2001:db8::2]:5001"},
		{"upper PDU without tags", LinkUpperPDU, bare, "0.0.0.0:5000", "0.0.0.0:5001"},
	} {
		p, err := DecodeSCTP(tc.lt, tc.b)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if p.Src.String() != tc.src || p.Dst.String() != tc.dst || p.VerificationTag != 0xdeadbeef || len(p.Chunks) != 2 {
			t.Errorf("%s: %+v", tc.name, p)
			continue
		}
		d, ok := p.Chunks[0].Data()
		if !ok || d.TSN != 7 || d.Stream != 1 || d.SSN != 2 || d.PPID != 16 || !d.Begin || !d.End || d.Unordered || string(d.Data) != "hello" {
			t.Errorf("%s: DATA chunk %+v", tc.name, d)
		}
		if c := p.Chunks[1]; c.Type != 3 || !bytes.Equal(c.Value, []byte{0xaa, 0xbb}) {
			t.Errorf("%s: second chunk %+v", tc.name, c)
		}
		if _, ok := p.Chunks[1].Data(); ok {
			t.Errorf("%s: a chunk of type 3 reads as DATA", tc.name)
		}
	}

	// Not SCTP.
	tcp := bytes.Clone(v4)
	tcp[9] = ProtoTCP
	frag := bytes.Clone(v4)
	frag[6] = 0x20 // MF
	other := AppendExportedPDU(nil, ExportedPDU{Proto: "udp"})
	for name, c := range map[string]struct {
		lt LinkType
		b  []byte
	}{"TCP": {LinkRaw, tcp}, "fragment": {LinkRaw, frag}, "udp PDU": {LinkUpperPDU, other}, "unknown link": {LinkType(147), v4}} {
		if _, err := DecodeSCTP(c.lt, c.b); err != ErrNotSCTP {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Malformed: a short common header; a chunk longer than the packet
	// (the chunk before it is kept).
	short := ipPacket("192.0.2.1", "192.0.2.2", ProtoSCTP, sctp[:11])
	if _, err := DecodeSCTP(LinkRaw, short); !errors.Is(err, ErrFormat) {
		t.Errorf("short header: %v", err)
	}
	long := bytes.Clone(sctp)
	long[len(long)-3] = 9
	p, err := DecodeSCTP(LinkRaw, ipPacket("192.0.2.1", "192.0.2.2", ProtoSCTP, long))
	if !errors.Is(err, ErrFormat) || len(p.Chunks) != 1 {
		t.Errorf("chunk too long: %v, %d chunks", err, len(p.Chunks))
	}
	for i := range len(upper) - len(sctp) {
		if _, err := DecodeSCTP(LinkUpperPDU, upper[:i]); !errors.Is(err, ErrFormat) {
			t.Errorf("upper PDU cut at %d: %v", i, err)
		}
	}
}

func TestDecodeIP(t *testing.T) {
	src, dst := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	b := ipPacket(src.String(), dst.String(), ProtoUDP, []byte("datagram"))
	b = append(b, 0, 0, 0) // link-layer padding
	p, err := DecodeIP(LinkRaw, b)
	if err != nil || p.Src != src || p.Dst != dst || p.Proto != ProtoUDP || string(p.Payload) != "datagram" {
		t.Fatalf("%+v %v", p, err)
	}
	if checksum(0, b[:20]) != 0xffff {
		t.Error("IPv4 header checksum")
	}
	arp := append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x06}, b...)
	if _, err := DecodeIP(LinkEthernet, arp); err != ErrNotIP {
		t.Errorf("ARP: %v", err)
	}
}

func FuzzDecodeSCTP(f *testing.F) {
	f.Add(uint16(LinkRaw), ipPacket("192.0.2.1", "192.0.2.2", ProtoSCTP, sctpPacket()))
	f.Add(uint16(LinkUpperPDU), append([]byte{0, 0, 0, 0}, sctpPacket()...))
	f.Add(uint16(LinkRaw), ipPacket("192.0.2.1", "192.0.2.2", ProtoUDP, udpDatagram(SCTPTunnelingPort, 40000, sctpPacket())))
	f.Fuzz(func(t *testing.T, lt uint16, b []byte) {
		p, _ := DecodeSCTP(LinkType(lt), b)
		n := 0
		for _, c := range p.Chunks {
			n += 4 + len(c.Value)
			if d, ok := c.Data(); ok && len(d.Data)+12 != len(c.Value) {
				t.Fatal("DATA chunk's data does not fit its value")
			}
		}
		if n > len(b) {
			t.Fatal("chunks longer than the packet")
		}
		a := NewSCTPAssembler()
		for range 2 {
			for _, m := range a.Add(time.Time{}, p) {
				if len(m.Data) > len(b) {
					t.Fatal("a message longer than its chunks")
				}
			}
		}
	})
}

// TestSCTPAssembler: fragments joined per direction and stream, a
// retransmitted chunk dropped, TSNs afresh after an INIT.
func TestSCTPAssembler(t *testing.T) {
	a, b := netip.MustParseAddrPort("192.0.2.1:5000"), netip.MustParseAddrPort("192.0.2.2:5000")
	data := func(tsn uint32, stream uint16, flags uint8, s string) SCTPChunk {
		v := binary.BigEndian.AppendUint32(nil, tsn)
		v = binary.BigEndian.AppendUint16(v, stream)
		v = append(v, 0, 0, 0, 0, 0, 16)
		return SCTPChunk{Type: SCTPData, Flags: flags, Value: append(v, s...)}
	}
	const begin, end = 2, 1
	asm := NewSCTPAssembler()
	var got []string
	add := func(src, dst netip.AddrPort, chunks ...SCTPChunk) {
		for _, m := range asm.Add(time.Time{}, SCTPPacket{Src: src, Dst: dst, Chunks: chunks}) {
			got = append(got, fmt.Sprintf("%v/%d:%s", m.Src, m.Stream, m.Data))
		}
	}
	add(a, b, data(10, 1, begin, "he"), data(11, 2, begin|end, "one"))
	add(b, a, data(10, 1, begin|end, "other way, same TSN"))
	add(a, b, data(12, 1, 0, "ll"), data(11, 2, begin|end, "one"))      // TSN 11 again
	add(a, b, data(12, 1, 0, "ll"), data(13, 1, end, "o"))              // TSN 12 again
	add(a, b, data(20, 3, 0, "no start"), data(21, 3, end, "no start")) // first fragment missing
	add(b, a, SCTPChunk{Type: 1})                                       // INIT
	add(a, b, data(11, 2, begin|end, "new association"))
	want := []string{
		"192.0.2.1:5000/2:one",
		"192.0.2.2:5000/1:other way, same TSN",
		"192.0.2.1:5000/1:hello",
		"192.0.2.1:5000/2:new association",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("messages\n%q\nwant\n%q", got, want)
	}
}
