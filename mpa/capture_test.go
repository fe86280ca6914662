package mpa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/iwarpgo/iwarp/internal/pcapfile"
	"github.com/iwarpgo/iwarp/term"
)

const sivCapture = "testdata/siw-rping-mpa-rev1.pcap"

// A real session: a user-space iWARP client against Linux siw's rping
// server, MPA Rev 1 with CRCs and Markers off.
func TestCaptureSiwRping(t *testing.T) {
	f, err := os.Open(sivCapture)
	if err != nil {
		t.Skipf("capture not available: %v", err)
	}
	defer f.Close()
	streams, err := pcapfile.ReadStreams(f)
	if err != nil {
		t.Fatal(err)
	}
	// Find the MPA startup in both directions by its keys.
	var reqStream, repStream *pcapfile.Stream
	for _, s := range streams {
		if bytes.HasPrefix(s.Data, []byte(RequestKey)) {
			reqStream = s
			repStream = pcapfile.Lookup(streams, s.Flow.Reverse())
		}
	}
	if reqStream == nil || repStream == nil {
		t.Fatal("no MPA Request Frame in the capture")
	}
	req, n, err := ParseFrame(reqStream.Data)
	if err != nil || req.Reply || n != 20 {
		t.Fatalf("Request: %v %d %v", req, n, err)
	}
	rep, m, err := ParseFrame(repStream.Data)
	if err != nil || !rep.Reply || m != 20 {
		t.Fatalf("Reply: %v %d %v", rep, m, err)
	}
	t.Logf("%v / %v", req, rep)
	if req.Rev != 1 || rep.Rev != 1 || req.CRC || rep.CRC || req.Markers || rep.Markers || rep.Reject || len(req.PrivateData)+len(rep.PrivateData) != 0 {
		t.Fatalf("unexpected negotiation: %v %v", req, rep)
	}
	fromInit, fromResp := Negotiate(&req, &rep)
	if fromInit != (Options{}) || fromResp != (Options{}) {
		t.Fatalf("Negotiate: %+v %+v", fromInit, fromResp)
	}

	type ulpdu struct {
		b   []byte
		crc []byte
	}
	readFPDUs := func(data []byte, o Options) []ulpdu {
		t.Helper()
		var out []ulpdu
		r := NewReader(bytes.NewReader(data), o)
		for {
			u, err := r.Next()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatalf("FPDU %d: %v", len(out), err)
			}
			end := r.Offset() - CRCLen
			out = append(out, ulpdu{b: bytes.Clone(u), crc: data[end : end+4]})
		}
	}
	fromClient := readFPDUs(reqStream.Data[n:], fromInit)
	fromServer := readFPDUs(repStream.Data[m:], fromResp)
	if len(fromClient) != 4 || len(fromServer) != 1 {
		t.Fatalf("%d and %d FPDUs, tshark shows 4 and 1", len(fromClient), len(fromServer))
	}
	for i, u := range append(fromClient, fromServer...) {
		ddp, rdmap := u.b[0], u.b[1]
		// DDP control: T L Rsvd(4) DV(2), DV = 1 (RFC 5041 §4.2);
		// RDMAP control: RV(2) Rsv(2) Opcode(4), RV = 1 (RFC 5040 §4.1).
		if ddp&0x03 != 1 || rdmap>>6 != 1 {
			t.Errorf("ULPDU %d: DDP control %#02x, RDMAP control %#02x", i, ddp, rdmap)
		}
		if ddp&0x80 != 0 || ddp&0x40 == 0 {
			t.Errorf("ULPDU %d: want untagged, last: %#02x", i, ddp)
		}
		// CRCs are off: siw sends zeros in the CRC field.
		if !bytes.Equal(u.crc, []byte{0, 0, 0, 0}) {
			t.Errorf("ULPDU %d: CRC field %x", i, u.crc)
		}
	}
	for i, u := range fromClient {
		// Send (opcode 3), QN 0, MSN 1, 2, 3, 4, MO 0, 16 octets.
		qn := binary.BigEndian.Uint32(u.b[6:10])
		msn := binary.BigEndian.Uint32(u.b[10:14])
		mo := binary.BigEndian.Uint32(u.b[14:18])
		if u.b[1]&0x0f != 3 || qn != 0 || msn != uint32(i+1) || mo != 0 || len(u.b) != 18+16 {
			t.Errorf("Send %d: opcode %d QN %d MSN %d MO %d len %d", i, u.b[1]&0x0f, qn, msn, mo, len(u.b))
		}
	}
	rr := fromServer[0].b
	// Read Request (opcode 1): QN 1, MSN 1, MO 0, then 28 octets: sink
	// STag, sink TO, RDMA Read Message Size, source STag, source TO.
	if rr[1]&0x0f != 1 || binary.BigEndian.Uint32(rr[6:10]) != 1 || binary.BigEndian.Uint32(rr[10:14]) != 1 || len(rr) != 18+28 {
		t.Errorf("Read Request: %x", rr)
	}
	if size := binary.BigEndian.Uint32(rr[30:34]); size != 64 {
		t.Errorf("RDMA Read Message Size %d", size)
	}

	// With CRCs wrongly on, the zero CRC fields fail: the check is real.
	r := NewReader(bytes.NewReader(reqStream.Data[n:]), Options{CRC: true})
	if _, err := r.Next(); !errors.Is(err, term.MPACRCError) {
		t.Fatalf("CRC on: %v", err)
	}
}
