package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"
)

type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

const realCapture = "testdata/siw-rping-mpa-rev1.pcap"

func readCapture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(realCapture)
	if err != nil {
		t.Skipf("capture not available: %v", err)
	}
	return b
}

func TestRealCapture(t *testing.T) {
	b := readCapture(t)
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var pkts []Packet
	var segs []Segment
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.LinkType != LinkEthernet {
			t.Fatalf("link type %v", p.LinkType)
		}
		s, err := DecodeTCP(p.LinkType, p.Data)
		if err != nil {
			t.Fatalf("packet %d: %v", len(pkts)+1, err)
		}
		pkts = append(pkts, p)
		segs = append(segs, s)
	}
	if len(pkts) != 15 {
		t.Fatalf("%d packets, want 15", len(pkts))
	}
	// tshark: "1 0.000000 10.10.1.1 → 10.10.1.2 TCP 74 42742 → 9999 [SYN]"
	client := netip.MustParseAddrPort("10.10.1.1:42742")
	server := netip.MustParseAddrPort("10.10.1.2:9999")
	if segs[0].Src != client || segs[0].Dst != server || segs[0].Flags != FlagSYN || segs[0].Seq != 0x688ff453 {
		t.Fatalf("first segment %v", segs[0])
	}
	if d := pkts[3].Time.Sub(pkts[0].Time); d != 1491*time.Microsecond {
		t.Fatalf("packet 4 at +%v, tshark says 0.001491", d)
	}
	// Packet 14 is a 60-octet frame (Ethernet padding) carrying a RST:
	// the IPv4 Total Length cuts the padding away.
	if segs[13].Flags&FlagRST == 0 || len(segs[13].Payload) != 0 {
		t.Fatalf("packet 14 %v", segs[13])
	}

	streams, err := ReadStreams(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(streams) != 2 {
		t.Fatalf("%d streams", len(streams))
	}
	c2s := Lookup(streams, Flow{Src: client, Dst: server})
	s2c := Lookup(streams, Flow{Src: server, Dst: client})
	if c2s == nil || s2c == nil {
		t.Fatal("streams missing")
	}
	// Request (20) + four Sends of 40 octets; Reply (20) + a Read Request
	// FPDU of 52 (ULPDU_Length 46).
	if len(c2s.Data) != 180 || len(s2c.Data) != 72 {
		t.Fatalf("stream lengths %d, %d", len(c2s.Data), len(s2c.Data))
	}
	if string(c2s.Data[:16]) != "MPA ID Req Frame" || string(s2c.Data[:16]) != "MPA ID Rep Frame" {
		t.Fatal("streams do not start with the MPA frames")
	}
	if !c2s.SYN || c2s.ISN != 0x688ff453 || !s2c.SYN || !s2c.FIN || !s2c.RST || c2s.FIN {
		t.Fatalf("flags: %+v %+v", c2s, s2c)
	}
	if got := c2s.TimeAt(20); !got.Equal(pkts[7].Time) {
		t.Fatalf("TimeAt(20) = %v, want packet 8's %v", got, pkts[7].Time)
	}
}

// pcap in the other byte order and with microsecond timestamps.
func TestPcapByteOrders(t *testing.T) {
	frame := ethTCP(t)
	when := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	for _, bo := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, nano := range []bool{false, true} {
			var b []byte
			magic := uint32(pcapMagicMicro)
			frac := uint32(123456)
			if nano {
				magic, frac = pcapMagicNano, 123456000
			}
			b = bo.AppendUint32(b, magic)
			b = bo.AppendUint16(b, 2)
			b = bo.AppendUint16(b, 4)
			b = bo.AppendUint32(b, 0)
			b = bo.AppendUint32(b, 0)
			b = bo.AppendUint32(b, 65535)
			b = bo.AppendUint32(b, 1)
			b = bo.AppendUint32(b, uint32(when.Unix()))
			b = bo.AppendUint32(b, frac)
			b = bo.AppendUint32(b, uint32(len(frame)))
			b = bo.AppendUint32(b, uint32(len(frame)))
			b = append(b, frame...)
			r, err := NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			p, err := r.Next()
			if err != nil || !bytes.Equal(p.Data, frame) || !p.Time.Equal(when) || p.LinkType != LinkEthernet {
				t.Fatalf("%v nano=%v: %+v %v", bo, nano, p, err)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatal(err)
			}
			// Every truncation is an error, never a panic.
			for i := range len(b) {
				r, err := NewReader(bytes.NewReader(b[:i]))
				if err != nil {
					continue
				}
				if _, err := r.Next(); err == nil || (i > 24 && err == io.EOF) {
					t.Fatalf("prefix %d: %v", i, err)
				}
			}
		}
	}
}

// ngBlock builds a pcapng block.
func ngBlock(bo byteOrder, typ uint32, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	var b []byte
	b = bo.AppendUint32(b, typ)
	b = bo.AppendUint32(b, uint32(12+len(body)))
	b = append(b, body...)
	return bo.AppendUint32(b, uint32(12+len(body)))
}

func ngFile(bo byteOrder, frame []byte, ts uint64, tsresol byte) []byte {
	var shb []byte
	shb = bo.AppendUint32(shb, ngBOM)
	shb = bo.AppendUint16(shb, 1)
	shb = bo.AppendUint16(shb, 0)
	shb = bo.AppendUint64(shb, ^uint64(0))
	var idb []byte
	idb = bo.AppendUint16(idb, uint16(LinkEthernet))
	idb = bo.AppendUint16(idb, 0)
	idb = bo.AppendUint32(idb, 262144)
	if tsresol != 0 {
		idb = bo.AppendUint16(idb, 2) // if_name, skipped
		idb = bo.AppendUint16(idb, 2)
		idb = append(idb, 'l', 'o', 0, 0)
		idb = bo.AppendUint16(idb, 9)
		idb = bo.AppendUint16(idb, 1)
		idb = append(idb, tsresol, 0, 0, 0)
		idb = bo.AppendUint32(idb, 0) // opt_endofopt
	}
	var epb []byte
	epb = bo.AppendUint32(epb, 0)
	epb = bo.AppendUint32(epb, uint32(ts>>32))
	epb = bo.AppendUint32(epb, uint32(ts))
	epb = bo.AppendUint32(epb, uint32(len(frame)))
	epb = bo.AppendUint32(epb, uint32(len(frame)))
	epb = append(epb, frame...)
	var spb []byte
	spb = bo.AppendUint32(spb, uint32(len(frame)))
	spb = append(spb, frame...)
	var b []byte
	b = append(b, ngBlock(bo, ngSHB, shb)...)
	b = append(b, ngBlock(bo, ngIDB, idb)...)
	b = append(b, ngBlock(bo, 4, []byte{0, 0, 0, 0})...) // a Name Resolution Block, skipped
	b = append(b, ngBlock(bo, ngEPB, epb)...)
	b = append(b, ngBlock(bo, ngSPB, spb)...)
	return b
}

func TestPcapNG(t *testing.T) {
	frame := ethTCP(t)
	when := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	cases := []struct {
		tsresol byte
		ts      uint64
		want    time.Time
	}{
		{0, uint64(when.UnixMicro()), when.Truncate(time.Microsecond)},
		{9, uint64(when.UnixNano()), when},
		{0x80 | 20, uint64(when.Unix())<<20 | 1<<19, time.Unix(when.Unix(), 5e8).UTC()},
	}
	for _, bo := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, tc := range cases {
			b := ngFile(bo, frame, tc.ts, tc.tsresol)
			// Two sections, the second in the other byte order.
			other := byteOrder(binary.BigEndian)
			if bo == binary.BigEndian {
				other = binary.LittleEndian
			}
			b = append(b, ngFile(other, frame, 0, 0)...)
			r, err := NewReader(bytes.NewReader(b))
			if err != nil || !r.IsPcapNG() {
				t.Fatal(err)
			}
			for i := range 4 {
				p, err := r.Next()
				if err != nil || !bytes.Equal(p.Data, frame) || p.LinkType != LinkEthernet {
					t.Fatalf("%v %d: packet %d: %v", bo, tc.tsresol, i, err)
				}
				if i == 0 && !p.Time.Equal(tc.want) {
					t.Fatalf("%v tsresol %#x: time %v, want %v", bo, tc.tsresol, p.Time, tc.want)
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatal(err)
			}
			for i := range len(b) / 2 {
				r, err := NewReader(bytes.NewReader(b[:i]))
				if err != nil {
					continue
				}
				for {
					if _, err := r.Next(); err != nil {
						break
					}
				}
			}
		}
	}
}

func TestReaderRejects(t *testing.T) {
	bad := [][]byte{
		nil,
		[]byte("not a capture file"),
		// pcap record claiming 1 GiB.
		func() []byte {
			var b []byte
			le := binary.LittleEndian
			b = le.AppendUint32(b, pcapMagicMicro)
			b = le.AppendUint16(b, 2)
			b = le.AppendUint16(b, 4)
			b = append(b, make([]byte, 12)...)
			b = le.AppendUint32(b, 1)
			b = append(b, make([]byte, 8)...)
			b = le.AppendUint32(b, 1<<30)
			return le.AppendUint32(b, 1<<30)
		}(),
		// pcapng block claiming 1 GiB.
		append(ngFile(binary.LittleEndian, nil, 0, 0)[:28+20], 6, 0, 0, 0, 0, 0, 0, 0x40),
		// EPB on an interface never declared.
		func() []byte {
			b := ngFile(binary.LittleEndian, []byte{1, 2, 3, 4}, 0, 0)
			binary.LittleEndian.PutUint32(b[28+20+16+8:], 7)
			return b
		}(),
	}
	for i, b := range bad {
		r, err := NewReader(bytes.NewReader(b))
		if err == nil {
			for err == nil {
				_, err = r.Next()
			}
		}
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%d: %v", i, err)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add(ngFile(binary.LittleEndian, make([]byte, 60), 5, 9))
	f.Add(ngFile(binary.BigEndian, make([]byte, 3), 5, 0x83))
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, LinkEthernet)
	w.WritePacket(time.Unix(1, 2), make([]byte, 54))
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		for range 1000 {
			p, err := r.Next()
			if err != nil {
				return
			}
			if len(p.Data) > MaxPacket {
				t.Fatalf("packet of %d octets", len(p.Data))
			}
			if p.OrigLen < 0 || p.Interface < 0 {
				t.Fatalf("original length %d, interface %d", p.OrigLen, p.Interface)
			}
			DecodeTCP(p.LinkType, p.Data)
		}
	})
}
