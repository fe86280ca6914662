package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// siwCapture is a real capture of Linux siw terminating a connection.
const siwCapture = "../cmd/iwarp/testdata/siw-terminate.pcap"

// untagged is an untagged DDP Segment of RDMAP opcode op.
func untagged(op rdmap.Opcode, qn, msn uint32, last bool, body []byte) []byte {
	h := ddp.Header{Last: last, DV: ddp.Version, RsvdULP: [5]byte{byte(rdmap.MakeControl(op))}, QN: qn, MSN: msn}
	return append(h.Append(nil), body...)
}

// tagged is a tagged DDP Segment (an RDMA Write).
func tagged(stag uint32, to uint64, body []byte) []byte {
	h := ddp.Header{Tagged: true, Last: true, DV: ddp.Version, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpWrite))}, STag: stag, TO: to}
	return append(h.Append(nil), body...)
}

// mpaTraffic is one MPA connection's two byte streams: the startup frames
// (the responder asks for Markers, both for CRCs), then FPDUs.
func mpaTraffic(t testing.TB) (client, server []byte) {
	client = (&mpa.Frame{Rev: 1, CRC: true}).Append(nil)
	server = (&mpa.Frame{Reply: true, Rev: 1, CRC: true, Markers: true}).Append(nil)
	fromInit, fromResp := mpa.Negotiate(&mpa.Frame{Rev: 1, CRC: true}, &mpa.Frame{Reply: true, Rev: 1, CRC: true, Markers: true})
	var cpos, spos uint64
	add := func(b []byte, pos *uint64, o mpa.Options, ulpdu []byte) []byte {
		n := len(b)
		b, err := mpa.AppendFPDU(b, *pos, o, ulpdu)
		if err != nil {
			t.Fatal(err)
		}
		*pos += uint64(len(b) - n)
		return b
	}
	client = add(client, &cpos, fromInit, tagged(0x1234, 0x10, bytes.Repeat([]byte{1}, 1500)))
	client = add(client, &cpos, fromInit, untagged(rdmap.OpSend, 0, 1, true, []byte("hello")))
	server = add(server, &spos, fromResp, untagged(rdmap.OpSend, 0, 1, true, []byte("advertisement")))
	server = add(server, &spos, fromResp, untagged(rdmap.OpTerminate, 2, 1, true, []byte{0x21, 0x02, 0x03, 0}))
	return client, server
}

var (
	clientAddr = &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 40000}
	serverAddr = &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 4791}
)

// recordTCP records the streams through a Recorder, the client's in
// chunks of chunk octets (its startup frame before Bind, as a dialing
// client traces it), and returns the file.
func recordTCP(t testing.TB, client, server []byte, chunk int) string {
	path := filepath.Join(t.TempDir(), "tcp.pcap")
	r, err := NewRecorder(path, TCP)
	if err != nil {
		t.Fatal(err)
	}
	c := r.TCPConn()
	n := 0
	if len(client) >= mpa.FrameHeaderLen {
		n = mpa.FrameHeaderLen
	}
	c.Trace(true, client[:n])
	c.Bind(clientAddr, serverAddr)
	c.Trace(false, server)
	for b := client[n:]; len(b) > 0; {
		k := min(chunk, len(b))
		c.Trace(true, b[:k])
		b = b[k:]
	}
	c.Close()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func decodeFile(t testing.TB, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// A recorded MPA connection decodes: its frames, FPDUs (Markers and CRCs
// as negotiated) and messages; each frame and FPDU is a TCP segment of
// its own however the octets were traced.
func TestRecorderTCP(t *testing.T) {
	client, server := mpaTraffic(t)
	for _, chunk := range []int{1, 7, 1 << 20} {
		path := recordTCP(t, client, server, chunk)
		var kinds, ops []string
		for i, r := range decodeFile(t, path) {
			if r.N != i+1 || r.Transport != "tcp" || r.Conn != 1 {
				t.Errorf("record %+v", r)
			}
			kinds = append(kinds, r.Kind)
			if r.Kind == KindFPDU {
				ops = append(ops, r.Op)
				if r.CRC != CRCGood {
					t.Errorf("chunks of %d: FPDU %d: CRC %s", chunk, r.N, r.CRC)
				}
			}
			if r.Terminate != nil && !strings.Contains(r.Note, "Linux siw's Terminate header") {
				t.Errorf("Terminate's note: %s", r.Note)
			}
		}
		if got := strings.Join(kinds, ","); got != "mpa_request,mpa_reply,fpdu,fpdu,fpdu,fpdu" {
			t.Errorf("chunks of %d: %s", chunk, got)
		}
		if got := strings.Join(ops, ","); got != "Send,Terminate,RDMA Write,Send" {
			t.Errorf("chunks of %d: %s", chunk, got)
		}
		// One segment per frame and FPDU.
		f, _ := os.Open(path)
		pr, err := pcapfile.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var lens []int
		for {
			p, err := pr.Next()
			if err != nil {
				break
			}
			if s, err := pcapfile.DecodeTCP(p.LinkType, p.Data); err == nil && len(s.Payload) > 0 {
				lens = append(lens, len(s.Payload))
			}
		}
		f.Close()
		if len(lens) != 6 {
			t.Errorf("chunks of %d: data segments of %v, want the 2 frames and 4 FPDUs", chunk, lens)
		}
	}
}

// The capture is readable while it is recorded: each packet reaches the
// file within pcapfile.FlushDelay.
func TestRecorderLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.pcap")
	r, err := NewRecorder(path, TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	client, server := mpaTraffic(t)
	c := r.TCPConn()
	c.Bind(clientAddr, serverAddr)
	c.Trace(true, client)
	c.Trace(false, server)
	var recs []Record
	if !waitfor.Until(5*time.Second, func() bool {
		f, oerr := os.Open(path)
		if oerr != nil {
			t.Fatal(oerr)
		}
		recs, err = Decode(f)
		f.Close()
		return err == nil && len(recs) == 6
	}) {
		t.Fatalf("the capture being recorded: %d records, %v", len(recs), err)
	}
}

// tsn numbers the DATA chunks of sctpData.
var tsn atomic.Uint32

// sctpData is an SCTP packet from port 5000 to 5000 with one DATA chunk
// (TSN the next of tsn) of the PPID carrying msg, flags B and E as begin
// and end.
func sctpData(stream uint16, ppid uint32, begin, end bool, msg []byte) []byte {
	b := []byte{0x13, 0x88, 0x13, 0x88, 1, 2, 3, 4, 0, 0, 0, 0}
	flags := byte(0)
	if begin {
		flags |= 2
	}
	if end {
		flags |= 1
	}
	b = append(b, pcapfile.SCTPData, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(16+len(msg)))
	b = binary.BigEndian.AppendUint32(b, tsn.Add(1))
	b = binary.BigEndian.AppendUint16(b, stream)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint32(b, ppid)
	b = append(b, msg...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// sessionControl is a DDP Stream Session Control message (RFC 5043
// §5.2.3): DDP-SSN, Function Code, Private Data.
func sessionControl(ssn, function uint16, private []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, ssn)
	b = binary.BigEndian.AppendUint16(b, function)
	return append(b, private...)
}

// segmentChunk is a DDP Segment Chunk (RFC 5043 §5.2.2): DDP-SSN, then
// the DDP Segment.
func segmentChunk(ssn uint16, seg []byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, ssn), seg...)
}

// recordSCTP records an association's packets on loopback and returns
// the file.
func recordSCTP(t testing.TB, packets [][]byte) string {
	path := filepath.Join(t.TempDir(), "sctp.pcap")
	r, err := NewRecorder(path, SCTP)
	if err != nil {
		t.Fatal(err)
	}
	r.SetLocal(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4792})
	peer := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
	for i, p := range packets {
		r.SCTPTrace(peer, i%2 == 0, p)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// DDP over SCTP: session control and DDP Segments, one put back together
// from two DATA chunks, each way of one association; a retransmitted
// chunk counts once.
func TestRecorderSCTP(t *testing.T) {
	send := segmentChunk(1, untagged(rdmap.OpSend, 0, 1, true, []byte("over SCTP")))
	initiate := sctpData(1, 17, true, true, sessionControl(0, 1, []byte("hi")))
	path := recordSCTP(t, [][]byte{
		initiate,
		sctpData(1, 17, true, true, sessionControl(0, 2, nil)),
		sctpData(1, 16, true, false, send[:5]),
		sctpData(1, 53, true, true, []byte("not DDP")),
		initiate, // outbound again: retransmitted
		sctpData(1, 53, true, true, []byte("not DDP")),
		sctpData(1, 16, false, true, send[5:]),
	})
	recs := decodeFile(t, path)
	if len(recs) != 3 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	want := []struct{ kind, src, fn string }{
		{KindSessionControl, "127.0.0.2:5000", "DDP Stream Session Initiate"},
		{KindSessionControl, "127.0.0.1:5000", "DDP Stream Session Accept"},
		{KindSegment, "127.0.0.2:5000", ""},
	}
	for i, r := range recs {
		w := want[i]
		if r.Kind != w.kind || r.Src != w.src || r.Function != w.fn || r.Conn != 1 || r.Transport != "sctp" || *r.SCTPStream != 1 {
			t.Errorf("record %d: %+v", i+1, r)
		}
	}
	if r := recs[2]; r.Op != "Send" || *r.PayloadLen != 9 || *r.DDPSSN != 1 || r.Len != len(send) {
		t.Errorf("the Send: %+v", r)
	}
}

func TestDumpDecodeErrors(t *testing.T) {
	if _, err := Decode(strings.NewReader("not a capture")); err == nil || !strings.Contains(err.Error(), "not a valid pcap") {
		t.Errorf("junk: %v", err)
	}
	b, err := os.ReadFile(siwCapture)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(bytes.NewReader(b[:len(b)-7])); err == nil || !strings.Contains(err.Error(), "truncated capture") {
		t.Errorf("truncated: %v", err)
	}
	path := recordSCTP(t, [][]byte{sctpData(1, 53, true, true, []byte("not DDP"))})
	f, _ := os.Open(path)
	defer f.Close()
	if _, err := Decode(f); !errors.Is(err, ErrNotIWARP) {
		t.Errorf("no DDP: %v", err)
	}
}

// FuzzDumpDecode: Decode never panics, whatever the file.
func FuzzDumpDecode(f *testing.F) {
	if b, err := os.ReadFile(siwCapture); err == nil {
		f.Add(b)
	}
	client, server := mpaTraffic(f)
	for _, p := range []string{
		recordTCP(f, client, server, 1<<20),
		recordSCTP(f, [][]byte{sctpData(1, 17, true, true, sessionControl(0, 5, []byte{0, 4, 0, 4}))}),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := Decode(bytes.NewReader(b))
		if err == nil && len(recs) == 0 {
			t.Fatal("no records and no error")
		}
	})
}

// FuzzDumpDecodeTraffic: arbitrary MPA byte streams and SCTP messages,
// recorded as a capture, decode without a panic; the recorder passes on
// every octet traced.
func FuzzDumpDecodeTraffic(f *testing.F) {
	client, server := mpaTraffic(f)
	f.Add(client, server, segmentChunk(1, untagged(rdmap.OpReadRequest, 1, 1, true, make([]byte, 28))), uint8(0), 7)
	f.Add(client, server, sessionControl(0, 6, []byte{0, 4, 0, 4}), uint8(1), 1)
	f.Add([]byte(mpa.RequestKey), []byte(mpa.ReplyKey), []byte{}, uint8(2), 3)
	f.Fuzz(func(t *testing.T, client, server, msg []byte, ppid uint8, chunk int) {
		if chunk <= 0 {
			chunk = 1
		}
		path := recordTCP(t, client, server, chunk)
		streams, err := func() ([]*pcapfile.Stream, error) {
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return pcapfile.ReadStreams(f)
		}()
		if err != nil {
			t.Fatal(err)
		}
		var up, down []byte
		for _, s := range streams {
			if s.Flow.Src.Port() == uint16(clientAddr.Port) {
				up = s.Data
			} else {
				down = s.Data
			}
		}
		if !bytes.Equal(up, client) || !bytes.Equal(down, server) {
			t.Fatalf("recorded %d and %d octets, traced %d and %d", len(up), len(down), len(client), len(server))
		}
		file, _ := os.Open(path)
		Decode(file)
		file.Close()

		p := uint32(16 + ppid%2)
		half := len(msg) / 2
		path = recordSCTP(t, [][]byte{
			sctpData(1, p, true, true, msg),
			sctpData(2, p, true, false, msg[:half]),
			sctpData(2, p, false, true, msg[half:]),
		})
		file, _ = os.Open(path)
		Decode(file)
		file.Close()
	})
}
