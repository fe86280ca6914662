package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

// ethTCP is an Ethernet/IPv4/TCP frame with 5 octets of payload and 6
// octets of Ethernet padding after the IP datagram.
func ethTCP(t testing.TB) []byte {
	t.Helper()
	b := []byte{
		2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
		0x45, 0, 0, 45, 0, 1, 0x40, 0, 64, 6, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2, // IPv4, total 45
		0x30, 0x39, 0x27, 0x0f, 0, 0, 0, 100, 0, 0, 0, 200, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0, // TCP
		'h', 'e', 'l', 'l', 'o',
		0, 0, 0, 0, 0, 0, // padding
	}
	return b
}

func TestDecodeTCP(t *testing.T) {
	frame := ethTCP(t)
	s, err := DecodeTCP(LinkEthernet, frame)
	if err != nil {
		t.Fatal(err)
	}
	want := Segment{
		Src: netip.MustParseAddrPort("192.0.2.1:12345"), Dst: netip.MustParseAddrPort("192.0.2.2:9999"),
		Seq: 100, Ack: 200, Flags: FlagPSH | FlagACK, Window: 0xffff,
	}
	if s.Src != want.Src || s.Dst != want.Dst || s.Seq != want.Seq || s.Ack != want.Ack || s.Flags != want.Flags || s.Window != want.Window || string(s.Payload) != "hello" {
		t.Fatalf("got %v", s)
	}
	ip := frame[14 : 14+45]

	// The same datagram over the other link types.
	vlan := append(append(append([]byte{}, frame[:12]...), 0x81, 0x00, 0, 5, 0x81, 0x00, 0, 6, 0x08, 0x00), ip...)
	sll := append(append(make([]byte, 14), 0x08, 0x00), ip...)
	sll2 := append(append([]byte{0x08, 0x00}, make([]byte, 18)...), ip...)
	null := append([]byte{2, 0, 0, 0}, ip...)
	loop := append([]byte{0, 0, 0, 2}, ip...)
	for _, tc := range []struct {
		lt LinkType
		b  []byte
	}{{LinkEthernet, vlan}, {LinkSLL, sll}, {LinkSLL2, sll2}, {LinkNull, null}, {LinkLoop, loop}, {LinkRaw, ip}, {LinkIPv4, ip}} {
		s, err := DecodeTCP(tc.lt, tc.b)
		if err != nil || string(s.Payload) != "hello" || s.Src != want.Src {
			t.Errorf("%v: %v %v", tc.lt, s, err)
		}
		for i := range len(tc.b) {
			if _, err := DecodeTCP(tc.lt, tc.b[:i]); err == nil {
				t.Errorf("%v: prefix %d accepted", tc.lt, i)
			}
		}
	}

	// IPv6 with a destination options header before TCP.
	tcp := ip[20:]
	v6 := []byte{0x60, 0, 0, 0, 0, 0, 60, 64}
	binary.BigEndian.PutUint16(v6[4:], uint16(8+len(tcp)))
	v6 = append(v6, netip.MustParseAddr("2001:db8::1").AsSlice()...)
	v6 = append(v6, netip.MustParseAddr("2001:db8::2").AsSlice()...)
	v6 = append(v6, 6, 0, 1, 4, 0, 0, 0, 0) // next TCP, 8 octets, PadN
	v6 = append(v6, tcp...)
	s, err = DecodeTCP(LinkIPv6, v6)
	if err != nil || string(s.Payload) != "hello" || s.Src != netip.MustParseAddrPort("[2001:db8::1]:12345") {
		t.Fatalf("IPv6: %v %v", s, err)
	}
	if s, err := DecodeTCP(LinkNull, append([]byte{30, 0, 0, 0}, v6...)); err != nil || s.Dst.Port() != 9999 {
		t.Fatalf("NULL IPv6: %v", err)
	}

	// Not TCP.
	udp := bytes.Clone(frame)
	udp[14+9] = 17
	frag := bytes.Clone(frame)
	frag[14+6] = 0x20 // MF
	arp := bytes.Clone(frame)
	arp[12], arp[13] = 0x08, 0x06
	for i, b := range [][]byte{udp, frag, arp} {
		if _, err := DecodeTCP(LinkEthernet, b); err != ErrNotTCP {
			t.Errorf("%d: %v", i, err)
		}
	}
	if _, err := DecodeTCP(LinkType(147), frame); err != ErrNotTCP {
		t.Error(err)
	}
	// Malformed.
	bad := bytes.Clone(frame)
	bad[14+20+12] = 0x40 // TCP data offset 16 < 20
	if _, err := DecodeTCP(LinkEthernet, bad); !errors.Is(err, ErrFormat) {
		t.Error(err)
	}
}

func FuzzDecodeTCP(f *testing.F) {
	f.Add(uint16(LinkEthernet), ethTCP(f))
	f.Add(uint16(LinkRaw), ethTCP(f)[14:])
	f.Fuzz(func(t *testing.T, lt uint16, b []byte) {
		s, err := DecodeTCP(LinkType(lt), b)
		if err == nil && len(s.Payload) > len(b) {
			t.Fatal("payload longer than the packet")
		}
	})
}
