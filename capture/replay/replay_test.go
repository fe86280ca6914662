package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// captures is where the bundled captures live: the page offers them.
const captures = "../../web/static/captures"

func decodeFile(t testing.TB, name string) *Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(captures, name))
	if err != nil {
		t.Fatal(err)
	}
	m, warn, err := Decode(b)
	if err != nil || warn != "" {
		t.Fatalf("%s: %v %q", name, err, warn)
	}
	checkModel(t, m)
	return m
}

// event returns the event of iwarp dump's record n.
func event(t *testing.T, m *Model, n int) *Event {
	t.Helper()
	for i := range m.Events {
		if m.Events[i].Rec.N == n {
			return &m.Events[i]
		}
	}
	t.Fatalf("no record %d", n)
	return nil
}

func TestSiwTerminate(t *testing.T) {
	m := decodeFile(t, "siw-terminate.pcap")
	// Ten segments; nine messages delivered: siw refused the Send its
	// Terminate names.
	if len(m.Conns) != 1 || len(m.Streams) != 2 || m.Segments != 10 || m.Delivered != 9 {
		t.Fatalf("conns %d streams %d segments %d delivered %d", len(m.Conns), len(m.Streams), m.Segments, m.Delivered)
	}
	c := m.Conns[0]
	if c.Initiator != "10.0.2.2:40000" || c.Request == nil || c.Reply == nil || c.Request.Rev != 2 || !c.CRC ||
		c.MarkersToInitiator || c.MarkersToResponder || c.Reply.IRD != 1 || c.Reply.ORD != 1 {
		t.Fatalf("conn %+v request %+v reply %+v", c, c.Request, c.Reply)
	}
	// Record 5, the Read Response, answers record 4, the Read Request,
	// and lands in the requester's sink at its TO.
	resp, req := event(t, m, 5), event(t, m, 4)
	if resp.Answers != req.I {
		t.Errorf("Read Response answers %d, want %d", resp.Answers, req.I)
	}
	buf := m.Buffers[resp.Buffer-1]
	if !buf.Tagged || buf.STag != 0xd1e06500 || buf.Base != 0x55a24348af30 || buf.Len != 64 || buf.Owner != "10.0.2.15:7174" || resp.Offset != 0 {
		t.Errorf("Read Response into %+v at %d", buf, resp.Offset)
	}
	// Record 12, siw's Terminate, names record 11, the Send to MSN 4.
	tm := event(t, m, 12)
	th := tm.Terminated
	if th == nil || !th.Siw || th.Layer != 1 || th.EType != 2 || th.ECode != 2 || th.Tagged || th.QN != 0 || th.MSN != 4 || th.MO != 0 {
		t.Fatalf("Terminate's header %+v", th)
	}
	if !strings.Contains(th.Name, "Invalid Message Sequence Number") {
		t.Errorf("Terminate's name %q", th.Name)
	}
	if tm.Answers != event(t, m, 11).I {
		t.Errorf("Terminate names %d, want record 11's event", tm.Answers)
	}
}

func TestSendPlacedBeforeDelivered(t *testing.T) {
	m := decodeFile(t, "perf-send-tcp-markers.pcap")
	c := m.Conns[0]
	// The initiator asked for Markers (its Request's M bit): the FPDUs
	// sent to it carry them (RFC 5044 §7.1.1).
	if !c.Request.Markers || !c.MarkersToInitiator || c.MarkersToResponder || !c.CRC {
		t.Fatalf("conn %+v", c)
	}
	if e := event(t, m, 3); !e.RTR || e.Rec.Op != "RDMA Write" {
		t.Errorf("record 3 %+v: want the zero-length Write RTR", e)
	}
	first, second, last := event(t, m, 8), event(t, m, 9), event(t, m, 10)
	if first.Buffer == 0 || first.Buffer != second.Buffer || second.Buffer != last.Buffer || second.Offset != 32744 || last.Offset != 65488 {
		t.Fatalf("segments of the 70000-octet Send: %+v %+v %+v", first, second, last)
	}
	if len(first.Delivered) != 0 || len(second.Delivered) != 0 {
		t.Errorf("delivered before its last segment: %v %v", first.Delivered, second.Delivered)
	}
	if want := []int{first.I, second.I, last.I}; !equalInts(last.Delivered, want) {
		t.Errorf("the last segment delivers %v, want %v", last.Delivered, want)
	}
	s := m.Snapshot(second.I+1, []int{first.Buffer})[0]
	if s.Cells != strings.Repeat("p", MaxShown) {
		t.Errorf("after two segments the cells are %q", s.Cells[:16])
	}
	if !bytes.Equal(s.Data, first.Payload()[:MaxShown]) {
		t.Errorf("placed octets differ from the first segment's")
	}
	if s := m.Snapshot(last.I+1, []int{first.Buffer})[0]; s.Cells != strings.Repeat("d", MaxShown) {
		t.Errorf("after the last segment the cells are %q", s.Cells[:16])
	}
	if b := m.Buffers[first.Buffer-1]; b.Len != 70000 || b.Shown != MaxShown {
		t.Errorf("buffer %+v", b)
	}
}

func TestAtomicAnswers(t *testing.T) {
	m := decodeFile(t, "perf-atomic-tcp.pcap")
	for _, p := range [][2]int{{10, 8}, {11, 9}} {
		if a, q := event(t, m, p[0]), event(t, m, p[1]); a.Answers != q.I {
			t.Errorf("Atomic Response %d answers %d, want %d", p[0], a.Answers, q.I)
		}
	}
}

func TestSCTPCaptures(t *testing.T) {
	m := decodeFile(t, "rping-sctp.pcap")
	if len(m.Conns) != 1 || m.Conns[0].Transport != "sctp" || len(m.Streams) != 2 {
		t.Fatalf("conns %+v streams %+v", m.Conns, m.Streams)
	}
	// Record 3 is the first Segment after the Initiate (DDP-SSN 0).
	if e := event(t, m, 3); e.Seq != 1 || !equalInts(e.Delivered, []int{e.I}) {
		t.Errorf("record 3: seq %d delivered %v", e.Seq, e.Delivered)
	}
	if resp, req := event(t, m, 12), event(t, m, 11); resp.Answers != req.I {
		t.Errorf("Read Response answers %d, want %d", resp.Answers, req.I)
	}
}

// TestPlacedBytes checks every bundled capture's pictures against the
// records: each buffer's kept octets are those the last segment to land
// on them carried, and every cell of a delivered message is delivered.
func TestPlacedBytes(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(captures, "*.pcap"))
	if len(names) < 5 {
		t.Fatalf("%d bundled captures", len(names))
	}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			m := decodeFile(t, filepath.Base(name))
			want := map[int][]byte{}
			var ids []int
			for _, b := range m.Buffers {
				want[b.ID] = make([]byte, b.Shown)
				ids = append(ids, b.ID)
			}
			for i := range m.Events {
				e := &m.Events[i]
				if e.Kind != EventSegment || e.Buffer == 0 || len(e.Payload()) == 0 {
					continue
				}
				b := m.Buffers[e.Buffer-1]
				off := uint64(e.Rec.DDP.MO)
				if b.Tagged {
					off = e.Rec.DDP.TO - b.Base
				}
				if off < uint64(b.Shown) {
					copy(want[b.ID][off:], e.Payload())
				}
			}
			for _, s := range m.Snapshot(len(m.Events), ids) {
				if !bytes.Equal(s.Data, want[s.ID]) {
					t.Errorf("buffer %d: %q, want %q", s.ID, s.Data, want[s.ID])
				}
				if strings.ContainsAny(s.Cells, "p") {
					t.Errorf("buffer %d: cells placed but never delivered: %s", s.ID, s.Cells)
				}
			}
		})
	}
}

// A segment that a Terminate names was refused by its receiver, which
// validates a segment before placing it (RFC 5041 §7.1): the replay places
// nothing of it and delivers nothing, and says why.
func TestTerminatedSegmentNotPlaced(t *testing.T) {
	for _, c := range []struct {
		file      string
		term, seg int // record numbers
	}{
		{"sends-tcp.pcap", 11, 10},   // a Write to an invalidated STag
		{"siw-terminate.pcap", 0, 0}, // siw's Terminate: found below
	} {
		m := decodeFile(t, c.file)
		var term *Event
		for i := range m.Events {
			if e := &m.Events[i]; e.Terminated != nil && (c.term == 0 || e.Rec.N == c.term) {
				term = e
			}
		}
		if term == nil || term.Answers < 0 {
			t.Fatalf("%s: no Terminate naming a segment", c.file)
		}
		seg := &m.Events[term.Answers]
		if c.seg != 0 && seg.Rec.N != c.seg {
			t.Errorf("%s: the Terminate names record %d, want %d", c.file, seg.Rec.N, c.seg)
		}
		if !seg.Refused || seg.Buffer != 0 || len(seg.Delivered) != 0 || !strings.Contains(seg.Why, "refused") {
			t.Errorf("%s: the refused segment #%d lands in buffer %d, delivers %v, why %q", c.file, seg.Rec.N, seg.Buffer, seg.Delivered, seg.Why)
		}
	}
}

// TestOutOfOrder plays DDP Segments that arrive out of DDP-SSN order, as
// SCTP's unordered delivery hands them over: each is placed at once,
// each message delivered only when it and all before it are complete.
func TestOutOfOrder(t *testing.T) {
	send := func(msn, mo uint32, last bool) ddp.Header {
		return ddp.Header{Last: last, DV: ddp.Version, RsvdULP: [5]byte{byte(rdmap.OpSend)}, MSN: msn, MO: mo}
	}
	initiate := sctpSeg(0, ddp.Header{}, "")
	initiate.Kind, initiate.DDP, initiate.Function = capture.KindSessionControl, nil, "DDP Stream Session Initiate"
	recs := []capture.Record{
		initiate,
		sctpSeg(2, send(1, 4, true), "efgh"),  // message 1, second segment
		sctpSeg(3, send(2, 0, true), "WXYZ"),  // message 2
		sctpSeg(1, send(1, 0, false), "abcd"), // message 1, first segment
		sctpSeg(4, ddp.Header{Tagged: true, Last: true, DV: ddp.Version, STag: 7, TO: 0x100}, "1234"), // a Write
	}
	m := Build(recs)
	checkModel(t, m)
	if m.Events[0].Kind != EventControl || m.Events[0].Seq != 0 {
		t.Fatalf("the Initiate: %+v", m.Events[0])
	}
	if len(m.Events[1].Delivered) != 0 || len(m.Events[2].Delivered) != 0 {
		t.Fatalf("delivered before the first segment arrived: %v %v", m.Events[1].Delivered, m.Events[2].Delivered)
	}
	if got := m.Events[3].Delivered; !equalInts(got, []int{3, 1, 2}) {
		t.Errorf("the missing segment delivers %v, want [3 1 2]", got)
	}
	if m.Events[1].Message != 3 || m.Events[2].Message != 2 {
		t.Errorf("messages %d %d", m.Events[1].Message, m.Events[2].Message)
	}
	if got := m.Events[4].Delivered; !equalInts(got, []int{4}) {
		t.Errorf("the Write delivers %v", got)
	}
	s := m.Snapshot(len(m.Events), []int{m.Events[1].Buffer})[0]
	if string(s.Data) != "abcdefgh" || s.Cells != "dddddddd" {
		t.Errorf("receive buffer %q %q", s.Data, s.Cells)
	}
	if s := m.Snapshot(2, []int{m.Events[1].Buffer})[0]; s.Cells != "....pppp" {
		t.Errorf("after the first arrival: %q", s.Cells)
	}
}

func TestBadInput(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(captures, "siw-terminate.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	// Every cut of the file: the records before the cut stay, with a
	// warning, or there are none and an error says why.
	full := 12
	shorter := false
	for n := len(b) - 1; n > 0; n-- {
		m, warn, err := Decode(b[:n])
		if err != nil {
			continue
		}
		checkModel(t, m)
		if len(m.Events) > full {
			t.Fatalf("cut at %d: %d events", n, len(m.Events))
		}
		// A cut between two packets leaves a shorter capture, whole.
		if warn != "" && !strings.Contains(warn, "truncated") {
			t.Fatalf("cut at %d: warning %q", n, warn)
		}
		shorter = shorter || len(m.Events) < full
	}
	if !shorter {
		t.Error("no cut lost a record")
	}
	if _, _, err := Decode([]byte("random bytes, not a capture")); err == nil || !strings.Contains(err.Error(), "not a valid pcap") {
		t.Errorf("random bytes: %v", err)
	}
	// The file header and the MPA Request's packet only: no iWARP.
	if _, _, err := Decode(b[:24]); !errors.Is(err, capture.ErrNotIWARP) {
		t.Errorf("no packets: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// udpCapture is a pcap of raw IPv4 packets carrying UDP datagrams.
func udpCapture(t *testing.T, payloads ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcapfile.NewWriter(&buf, pcapfile.LinkRaw)
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	for i, p := range payloads {
		pkt := pcapfile.AppendIPHeader(nil, a, b, pcapfile.ProtoUDP, uint16(i), 8+len(p))
		pkt = binary.BigEndian.AppendUint16(pkt, 4000)
		pkt = binary.BigEndian.AppendUint16(pkt, 4001)
		pkt = binary.BigEndian.AppendUint16(pkt, uint16(8+len(p)))
		pkt = append(pkt, 0, 0)
		if err := w.WritePacket(time.Unix(int64(i), 0), append(pkt, p...)); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestNotIWARP(t *testing.T) {
	plain := udpCapture(t, []byte("hello, not iWARP, not DTLS either"))
	if _, _, err := Decode(plain); !errors.Is(err, capture.ErrNotIWARP) {
		t.Errorf("UDP without DTLS: %v", err)
	}
	// A DTLS 1.2 application_data record (type 23, version 0xfefd).
	rec := append([]byte{23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 7, 0, 16}, bytes.Repeat([]byte{0xaa}, 16)...)
	_, _, err := Decode(udpCapture(t, []byte("first"), rec))
	if !errors.Is(err, ErrEncrypted) || !strings.Contains(err.Error(), "--pcap") || !strings.Contains(err.Error(), "--keylog") {
		t.Errorf("DTLS: %v", err)
	}
}

// TestSCTPOverUDP replays a DDP Segment in SCTP over UDP (RFC 6951), as
// an SCTP stack that encapsulates sends it: an RDMA Write lands.
func TestSCTPOverUDP(t *testing.T) {
	h := ddp.Header{Tagged: true, Last: true, DV: ddp.Version, RsvdULP: [5]byte{byte(rdmap.OpWrite)}, STag: 7, TO: 0x100}
	data := append([]byte{0, 1}, append(h.Append(nil), "abcd"...)...) // DDP-SSN 1, the segment
	sctp := []byte{0x13, 0x88, 0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 0}
	sctp = append(sctp, 0, 0x07) // DATA: unordered, beginning and end
	sctp = binary.BigEndian.AppendUint16(sctp, uint16(16+len(data)))
	sctp = binary.BigEndian.AppendUint32(sctp, 1)  // TSN
	sctp = append(sctp, 0, 1, 0, 0)                // stream 1, SSN 0
	sctp = binary.BigEndian.AppendUint32(sctp, 16) // PPID: DDP Segment
	sctp = append(sctp, data...)
	for len(sctp)%4 != 0 {
		sctp = append(sctp, 0)
	}
	binary.LittleEndian.PutUint32(sctp[8:], crc32.Checksum(sctp, crc32.MakeTable(crc32.Castagnoli)))
	m, warn, err := Decode(udpCapture(t, sctp))
	if err != nil || warn != "" {
		t.Fatal(err, warn)
	}
	checkModel(t, m)
	if len(m.Events) != 1 || m.Events[0].Rec.Transport != "sctp" || m.Events[0].Buffer == 0 {
		t.Fatalf("events %+v", m.Events)
	}
	s := m.Snapshot(1, []int{m.Events[0].Buffer})[0]
	if string(s.Data) != "abcd" || s.Cells != "dddd" {
		t.Errorf("buffer %q %q", s.Data, s.Cells)
	}
}

// TestTCPReorderedAndRetransmitted replays a capture whose TCP segments
// arrive out of order and twice, as a capture on a lossy path shows them: the streams are put back together as iwarp dump
// does, and every stream plays the same segments, placed and delivered
// the same way, as from the clean capture.
func TestTCPReorderedAndRetransmitted(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(captures, "rping-tcp.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := pcapfile.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var pkts []pcapfile.Packet
	var lt pcapfile.LinkType
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		lt = p.LinkType
		p.Data = bytes.Clone(p.Data)
		pkts = append(pkts, p)
	}
	var data []int // packets that carry TCP payload
	for i, p := range pkts {
		if s, err := pcapfile.DecodeTCP(p.LinkType, p.Data); err == nil && len(s.Payload) > 0 {
			data = append(data, i)
		}
	}
	if len(data) < 6 {
		t.Fatalf("%d data packets", len(data))
	}
	// Swap two data packets, send another twice.
	i, j := data[3], data[4]
	si, _ := pcapfile.DecodeTCP(lt, pkts[i].Data)
	sj, _ := pcapfile.DecodeTCP(lt, pkts[j].Data)
	if si.Src == sj.Src && si.Seq == sj.Seq {
		t.Fatal("the two packets swapped are the same segment")
	}
	pkts[i], pkts[j] = pkts[j], pkts[i]
	pkts = append(pkts[:data[5]+1], pkts[data[5]:]...)
	var buf bytes.Buffer
	w, err := pcapfile.NewWriter(&buf, lt)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		if err := w.WritePacket(p.Time, p.Data); err != nil {
			t.Fatal(err)
		}
	}
	clean := decodeFile(t, "rping-tcp.pcap")
	m, warn, err := Decode(buf.Bytes())
	if err != nil || warn != "" {
		t.Fatal(err, warn)
	}
	checkModel(t, m)
	if got, want := streamsPlayed(m), streamsPlayed(clean); got != want {
		t.Errorf("reordered and retransmitted:\n%s\nclean:\n%s", got, want)
	}
}

// streamsPlayed lists each stream's segments with where they land and
// how many segments each delivers.
func streamsPlayed(m *Model) string {
	var s strings.Builder
	for _, st := range m.Streams {
		fmt.Fprintf(&s, "stream %s > %s:", st.Src, st.Dst)
		for i := range m.Events {
			e := &m.Events[i]
			if e.Stream != st.ID || e.Kind != EventSegment {
				continue
			}
			d := e.Rec.DDP
			fmt.Fprintf(&s, " [%s %v %d/%d/%d/%d/%d @%d+%d d%d]", e.Rec.Op, d.Last, d.STag, d.TO, d.QN, d.MSN, d.MO, e.Offset, len(e.payload), len(e.Delivered))
		}
		s.WriteString("\n")
	}
	return s.String()
}

// TestSnaplenCut replays a capture taken with a snaplen that cut one
// FPDU's packet short: the records before it play, the octets missing
// are an error record, and the model counts it.
func TestSnaplenCut(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(captures, "siw-terminate.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	// Walk the pcap records (16-octet headers after the 24-octet file
	// header) and cut the packet that carries the Read Response (the
	// largest) to 60 octets, its original length kept.
	le := binary.LittleEndian
	if m := le.Uint32(b); m != 0xa1b2c3d4 && m != 0xa1b23c4d { // microseconds, nanoseconds
		t.Fatalf("not a little-endian pcap: % x", b[:4])
	}
	out := append([]byte(nil), b[:24]...)
	cut := false
	for off := 24; off+16 <= len(b); {
		incl := int(le.Uint32(b[off+8:]))
		hdr := append([]byte(nil), b[off:off+16]...)
		pkt := b[off+16 : off+16+incl]
		if !cut && incl > 120 {
			le.PutUint32(hdr[8:], 60)
			pkt = pkt[:60]
			cut = true
		}
		out = append(append(out, hdr...), pkt...)
		off += 16 + incl
	}
	if !cut {
		t.Fatal("no packet to cut")
	}
	m, warn, err := Decode(out)
	if err != nil || warn != "" {
		t.Fatal(err, warn)
	}
	checkModel(t, m)
	if m.Errors == 0 || m.Segments == 0 {
		t.Fatalf("%d errors, %d segments", m.Errors, m.Segments)
	}
	var notes []string
	for _, e := range m.Events {
		if e.Kind == EventError {
			notes = append(notes, e.Rec.Note)
		}
	}
	if !strings.Contains(strings.Join(notes, " "), "misses") {
		t.Errorf("error notes %q", notes)
	}
}

// TestIPv6Markers replays MPA over TCP over IPv6 with Markers in the
// initiator's FPDUs (the Reply's M bit) and CRCs: every Write lands
// whole, the Markers stripped (RFC 5044 §4.3).
func TestIPv6Markers(t *testing.T) {
	var buf bytes.Buffer
	w, err := pcapfile.NewWriter(&buf, pcapfile.LinkEthernet)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := pcapfile.NewConnWriter(w, netip.MustParseAddrPort("[2001:db8::1]:40000"), netip.MustParseAddrPort("[2001:db8::2]:4791"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	req := mpa.Frame{Rev: 1, CRC: true}
	rep := mpa.Frame{Reply: true, Rev: 1, CRC: true, Markers: true}
	if err := cw.Open(t0); err != nil {
		t.Fatal(err)
	}
	if err := cw.Write(t0, true, req.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if err := cw.Write(t0, false, rep.Append(nil)); err != nil {
		t.Fatal(err)
	}
	o := mpa.Options{CRC: true, Markers: true}
	var stream []byte
	const n, size = 20, 100
	for i := 0; i < n; i++ {
		h := ddp.Header{Tagged: true, Last: true, DV: ddp.Version, RsvdULP: [5]byte{byte(rdmap.OpWrite)}, STag: 0x42, TO: 0x1000 + uint64(i*size)}
		payload := bytes.Repeat([]byte{byte('a' + i)}, size)
		stream, err = mpa.AppendFPDU(stream, uint64(len(stream)), o, append(h.Append(nil), payload...))
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Write(t0.Add(time.Millisecond), true, stream); err != nil {
		t.Fatal(err)
	}
	m, warn, err := Decode(buf.Bytes())
	if err != nil || warn != "" {
		t.Fatal(err, warn)
	}
	checkModel(t, m)
	c := m.Conns[0]
	if c.Initiator != "[2001:db8::1]:40000" || !c.MarkersToResponder || c.MarkersToInitiator || m.Segments != n || m.Delivered != n || m.Errors != 0 {
		t.Fatalf("conn %+v, %d segments, %d delivered, %d errors", c, m.Segments, m.Delivered, m.Errors)
	}
	id := m.Events[len(m.Events)-1].Buffer
	s := m.Snapshot(len(m.Events), []int{id})[0]
	for i := 0; i < MaxShown; i++ {
		if want := byte('a' + i/size); s.Data[i] != want {
			t.Fatalf("octet %d is %q, want %q", i, s.Data[i], want)
		}
	}
}
