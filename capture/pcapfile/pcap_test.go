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

// realCapture is the project's capture of its rping client against Linux
// siw's rping server (cmd/iwarp/internal/rping's interop test records it): one TCP
// connection, nanosecond timestamps, Ethernet.
const realCapture = "../../cmd/iwarp/testdata/siw-terminate.pcap"

func readCapture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(realCapture)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRealCapture(t *testing.T) {
	b := readCapture(t)
	// A little-endian pcap header with the nanosecond magic, version 2.4,
	// snaplen 262144, link type 1 (Ethernet).
	if want := []byte{0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0}; !bytes.Equal(b[:24], want) {
		t.Fatalf("file header %x", b[:24])
	}
	r, err := NewReader(bytes.NewReader(b))
	if err != nil || r.IsPcapNG() {
		t.Fatalf("NewReader: %v, pcapng %v", err, r != nil && r.IsPcapNG())
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
		if p.LinkType != LinkEthernet || p.OrigLen != len(p.Data) {
			t.Fatalf("packet %d: link type %v, %d of %d octets", len(pkts)+1, p.LinkType, len(p.Data), p.OrigLen)
		}
		// Data is valid until the next call of Next.
		p.Data = bytes.Clone(p.Data)
		s, err := DecodeTCP(p.LinkType, p.Data)
		if err != nil {
			t.Fatalf("packet %d: %v", len(pkts)+1, err)
		}
		pkts = append(pkts, p)
		segs = append(segs, s)
	}
	// tshark -T fields -e frame.len -e ip.src -e tcp.seq_raw -e
	// tcp.ack_raw -e tcp.flags -e tcp.len -e frame.time_relative: the
	// handshake, the MPA Request and Reply, ten FPDUs each acknowledged,
	// the FINs.
	const c2s, s2c = true, false
	want := []struct {
		fromClient bool
		frameLen   int
		seq, ack   uint32
		flags      uint8
		payload    int
		since      time.Duration
	}{
		{c2s, 58, 0x10000000, 0, 0x02, 0, 0},
		{s2c, 58, 0x20000000, 0x10000001, 0x12, 0, 0},
		{c2s, 54, 0x10000001, 0x20000001, 0x10, 0, 0},
		{c2s, 78, 0x10000001, 0x20000001, 0x18, 24, 0},
		{s2c, 54, 0x20000001, 0x10000019, 0x10, 0, 0},
		{s2c, 78, 0x20000001, 0x10000019, 0x18, 24, 58777178},
		{c2s, 54, 0x10000019, 0x20000019, 0x10, 0, 58777178},
		{c2s, 94, 0x10000019, 0x20000019, 0x18, 40, 161122434},
		{s2c, 54, 0x20000019, 0x10000041, 0x10, 0, 161122434},
		{s2c, 106, 0x20000019, 0x10000041, 0x18, 52, 169822343},
		{c2s, 54, 0x10000041, 0x2000004d, 0x10, 0, 169822343},
		{c2s, 138, 0x10000041, 0x2000004d, 0x18, 84, 169953870},
		{s2c, 54, 0x2000004d, 0x10000095, 0x10, 0, 169953870},
		{s2c, 94, 0x2000004d, 0x10000095, 0x18, 40, 176917773},
		{c2s, 54, 0x10000095, 0x20000075, 0x10, 0, 176917773},
		{c2s, 94, 0x10000095, 0x20000075, 0x18, 40, 177012361},
		{s2c, 54, 0x20000075, 0x100000bd, 0x10, 0, 177012361},
		{s2c, 138, 0x20000075, 0x100000bd, 0x18, 84, 178960275},
		{c2s, 54, 0x100000bd, 0x200000c9, 0x10, 0, 178960275},
		{s2c, 94, 0x200000c9, 0x100000bd, 0x18, 40, 180185182},
		{c2s, 54, 0x100000bd, 0x200000f1, 0x10, 0, 180185182},
		{c2s, 94, 0x100000bd, 0x200000f1, 0x18, 40, 180285290},
		{s2c, 54, 0x200000f1, 0x100000e5, 0x10, 0, 180285290},
		{c2s, 94, 0x100000e5, 0x200000f1, 0x18, 40, 180313844},
		{s2c, 54, 0x200000f1, 0x1000010d, 0x10, 0, 180313844},
		{s2c, 102, 0x200000f1, 0x1000010d, 0x18, 48, 182283418},
		{c2s, 54, 0x1000010d, 0x20000121, 0x10, 0, 182283418},
		{c2s, 54, 0x1000010d, 0x20000121, 0x11, 0, 182283418},
		{s2c, 54, 0x20000121, 0x1000010e, 0x11, 0, 182283418},
		{c2s, 54, 0x1000010e, 0x20000122, 0x10, 0, 182283418},
	}
	if len(pkts) != len(want) {
		t.Fatalf("%d packets, tshark shows %d", len(pkts), len(want))
	}
	// tshark: "1 0.000000000 10.0.2.2 → 10.0.2.15 TCP 58 40000 → 7174 [SYN]",
	// at 1795541423.489158122 (frame.time_epoch).
	client := netip.MustParseAddrPort("10.0.2.2:40000")
	server := netip.MustParseAddrPort("10.0.2.15:7174")
	if t0 := time.Unix(1795541423, 489158122); !pkts[0].Time.Equal(t0) {
		t.Fatalf("packet 1 at %v, tshark says %v", pkts[0].Time, t0)
	}
	for i, w := range want {
		s, p := segs[i], pkts[i]
		src, dst := client, server
		if !w.fromClient {
			src, dst = server, client
		}
		if s.Src != src || s.Dst != dst || len(p.Data) != w.frameLen || s.Seq != w.seq || s.Ack != w.ack ||
			s.Flags != w.flags || len(s.Payload) != w.payload || s.Window != 65535 {
			t.Errorf("packet %d: %v, %d octets; tshark shows %+v", i+1, s, len(p.Data), w)
		}
		if d := p.Time.Sub(pkts[0].Time); d != w.since {
			t.Errorf("packet %d at +%v, tshark says +%v", i+1, d, w.since)
		}
	}

	// Ethernet pads a frame to 60 octets; the IPv4 Total Length cuts the
	// padding away. Packet 3 (a bare ACK of 54 octets) and packet 4 (the
	// MPA Request) padded with junk decode as they are.
	for _, i := range []int{2, 3} {
		padded := append(bytes.Clone(pkts[i].Data), 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad)
		s, err := DecodeTCP(LinkEthernet, padded)
		if err != nil || !bytes.Equal(s.Payload, segs[i].Payload) || s.Seq != segs[i].Seq || s.Flags != segs[i].Flags {
			t.Fatalf("packet %d padded: %v %v", i+1, s, err)
		}
	}

	streams, err := ReadStreams(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(streams) != 2 {
		t.Fatalf("%d streams", len(streams))
	}
	c2sStream := Lookup(streams, Flow{Src: client, Dst: server})
	s2cStream := Lookup(streams, Flow{Src: server, Dst: client})
	if c2sStream == nil || s2cStream == nil {
		t.Fatal("streams missing")
	}
	// Client: Request (20 + 4 octets of enhanced data), Sends of 40, a
	// Read Response of 84, Sends of 40 (24 + 40 + 84 + 3*40). Server:
	// Reply (24), a Read Request of 52, a Send of 40, an RDMA Write of 84,
	// a Send of 40, a Terminate of 48.
	if len(c2sStream.Data) != 268 || len(s2cStream.Data) != 288 {
		t.Fatalf("stream lengths %d, %d", len(c2sStream.Data), len(s2cStream.Data))
	}
	// Each stream is its direction's payloads in order.
	for _, st := range []*Stream{c2sStream, s2cStream} {
		var data []byte
		for _, s := range segs {
			if s.Src == st.Flow.Src {
				data = append(data, s.Payload...)
			}
		}
		if !bytes.Equal(st.Data, data) || st.Err != nil {
			t.Fatalf("%v: stream %x (%v), payloads %x", st.Flow, st.Data, st.Err, data)
		}
	}
	if string(c2sStream.Data[:16]) != "MPA ID Req Frame" || string(s2cStream.Data[:16]) != "MPA ID Rep Frame" {
		t.Fatal("streams do not start with the MPA frames")
	}
	if !c2sStream.SYN || c2sStream.ISN != 0x10000000 || !s2cStream.SYN || s2cStream.ISN != 0x20000000 ||
		!c2sStream.FIN || !s2cStream.FIN || c2sStream.RST || s2cStream.RST {
		t.Fatalf("flags: %+v %+v", c2sStream, s2cStream)
	}
	// The payload-carrying packets of each direction begin its chunks.
	for _, tc := range []struct {
		st   *Stream
		offs []int
		pkts []int // 1-based, as tshark numbers them
	}{
		{c2sStream, []int{0, 24, 64, 148, 188, 228}, []int{4, 8, 12, 16, 22, 24}},
		{s2cStream, []int{0, 24, 76, 116, 200, 240}, []int{6, 10, 14, 18, 20, 26}},
	} {
		if len(tc.st.Chunks) != len(tc.offs) {
			t.Fatalf("%v: chunks %v", tc.st.Flow, tc.st.Chunks)
		}
		for i, off := range tc.offs {
			when := pkts[tc.pkts[i]-1].Time
			if c := tc.st.Chunks[i]; c.Offset != off || !c.Time.Equal(when) {
				t.Errorf("%v: chunk %d is %+v, want offset %d at packet %d's %v", tc.st.Flow, i, c, off, tc.pkts[i], when)
			}
			if got := tc.st.TimeAt(off + 1); !got.Equal(when) {
				t.Errorf("%v: TimeAt(%d) = %v, want packet %d's %v", tc.st.Flow, off+1, got, tc.pkts[i], when)
			}
		}
	}
	if got := c2sStream.TimeAt(24); !got.Equal(pkts[7].Time) {
		t.Fatalf("TimeAt(24) = %v, want packet 8's %v", got, pkts[7].Time)
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
