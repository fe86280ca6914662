package mpa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"testing"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/term"
)

// siwCapture is a real session: the project's rping client against Linux
// siw's rping server (cmd/iwarp/internal/rping's interop test records it). MPA
// Rev 2 with CRCs on and Markers off, IRD 1 ORD 1; Sends, an RDMA Read
// Request and Response, an RDMA Write, and siw's Terminate.
const siwCapture = "../cmd/iwarp/testdata/siw-terminate.pcap"

// siwFPDU is one FPDU of siwCapture: its octets from ULPDU_Length to the
// CRC field, and the ULPDU the Reader returned for it.
type siwFPDU struct {
	raw   []byte
	ulpdu []byte
}

func TestCaptureSiwRping(t *testing.T) {
	b, err := os.ReadFile(siwCapture)
	if err != nil {
		t.Fatal(err)
	}
	streams, err := pcapfile.ReadStreams(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// Find the MPA startup in both directions by its keys.
	var reqStream, repStream *pcapfile.Stream
	for _, s := range streams {
		if bytes.HasPrefix(s.Data, []byte(RequestKey)) {
			if reqStream != nil {
				t.Fatal("two MPA Request Frames in the capture")
			}
			reqStream = s
			repStream = pcapfile.Lookup(streams, s.Flow.Reverse())
		}
	}
	if reqStream == nil || repStream == nil {
		t.Fatal("no MPA Request Frame in the capture")
	}
	if len(streams) != 2 || reqStream.Err != nil || repStream.Err != nil {
		t.Fatalf("%d streams, errors %v, %v", len(streams), reqStream.Err, repStream.Err)
	}

	// Both frames: Rev 2, C and S set (0x50), PD_Length 4, the four octets
	// of RFC 6581 §9 (00 01 00 01: flags A to D clear, IRD 1, ORD 1).
	for _, s := range []*pcapfile.Stream{reqStream, repStream} {
		reply := s == repStream
		f, n, err := ParseFrame(s.Data)
		if err != nil || f.Reply != reply || n != FrameHeaderLen+EnhancedDataLen {
			t.Fatalf("frame: %v %d %v", f, n, err)
		}
		t.Logf("%v", f)
		if f.Rev != Rev2 || !f.CRC || f.Markers || f.Reject || !f.Enhanced || f.Res != 0 {
			t.Fatalf("unexpected frame: %+v", f)
		}
		if !bytes.Equal(s.Data[KeyLen:n], []byte{0x50, 2, 0, 4, 0, 1, 0, 1}) {
			t.Fatalf("frame octets %x", s.Data[KeyLen:n])
		}
		e, ulp, ok := f.Enhancement()
		if !ok || e != (EnhancedData{IRD: 1, ORD: 1}) || len(ulp) != 0 {
			t.Fatalf("enhanced data %+v, ULP Private Data %x, %v", e, ulp, ok)
		}
		if got := f.Append(nil); !bytes.Equal(got, s.Data[:n]) {
			t.Fatalf("frame encodes as %x, the wire has %x", got, s.Data[:n])
		}
	}
	req, _, _ := ParseFrame(reqStream.Data)
	rep, _, _ := ParseFrame(repStream.Data)
	fromInit, fromResp := Negotiate(&req, &rep)
	if fromInit != (Options{CRC: true}) || fromResp != (Options{CRC: true}) {
		t.Fatalf("Negotiate: %+v %+v", fromInit, fromResp)
	}
	n, m := req.Len(), rep.Len()

	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	readFPDUs := func(data []byte, o Options) []siwFPDU {
		t.Helper()
		var out []siwFPDU
		r := NewReader(bytes.NewReader(data), o)
		for {
			start := r.Offset()
			u, err := r.Next()
			if err == io.EOF {
				if r.Offset() != uint64(len(data)) {
					t.Fatalf("EOF at %d of %d octets", r.Offset(), len(data))
				}
				return out
			}
			if err != nil {
				t.Fatalf("FPDU %d: %v", len(out), err)
			}
			raw := data[start:r.Offset()]
			// ULPDU_Length, the ULPDU, the PAD to a multiple of 4, the CRC.
			l := int(binary.BigEndian.Uint16(raw))
			pad := -(2 + l) & 3
			if len(raw) != 2+l+pad+4 || !bytes.Equal(raw[2:2+l], u) || !bytes.Equal(raw[2+l:2+l+pad], make([]byte, pad)) {
				t.Fatalf("FPDU %d: %x gave ULPDU %x", len(out), raw, u)
			}
			// RFC 5044 §4.4: the CRC32c from the first octet of
			// ULPDU_Length through the PAD (no Markers here), as iSCSI
			// computes its digests; the field carries it least significant
			// octet first.
			want := crc32.Checksum(raw[:len(raw)-4], castagnoli)
			if got := binary.LittleEndian.Uint32(raw[len(raw)-4:]); got != want {
				t.Errorf("FPDU %d: CRC field %#08x, the CRC32c is %#08x", len(out), got, want)
			}
			out = append(out, siwFPDU{raw: raw, ulpdu: bytes.Clone(u)})
		}
	}
	fromClient := readFPDUs(reqStream.Data[n:], fromInit)
	fromServer := readFPDUs(repStream.Data[m:], fromResp)
	if len(fromClient) != 5 || len(fromServer) != 5 {
		t.Fatalf("%d and %d FPDUs, tshark shows 5 and 5", len(fromClient), len(fromServer))
	}

	// The CRC fields as tshark reads them (most significant octet
	// first), each marked "Good CRC32", in the order of the capture.
	tsharkCRC := []struct {
		f   *siwFPDU
		crc uint32
	}{
		{&fromClient[0], 0xad4dabe7}, {&fromServer[0], 0x2f4eefe5}, {&fromClient[1], 0xffb65858},
		{&fromServer[1], 0x84609a12}, {&fromClient[2], 0x1564aea9}, {&fromServer[2], 0xd8042013},
		{&fromServer[3], 0xb3e68405}, {&fromClient[3], 0x77b6bffd}, {&fromClient[4], 0xf4c788de},
		{&fromServer[4], 0xab74bcf7},
	}
	for i, c := range tsharkCRC {
		if got := binary.BigEndian.Uint32(c.f.raw[len(c.f.raw)-4:]); got != c.crc {
			t.Errorf("FPDU %d of the capture: CRC field %#08x, tshark shows %#08x", i, got, c.crc)
		}
	}

	// A ULPDU, RFC 5041 §4 and RFC 5040 §4: the DDP control octet (T L
	// Rsvd(4) DV(2)), the RDMAP control octet (RV(2) Rsv(2) Opcode(4)),
	// then for untagged (T = 0) the RDMAP reserved STag, QN, MSN, MO (18
	// octets), for tagged (T = 1) STag and TO (14 octets).
	type want struct {
		tagged      bool
		opcode      uint8
		stag        uint32
		to          uint64
		qn, msn, mo uint32
		payload     []byte
	}
	// rping's advertisement (struct rping_rdma_info): buffer address,
	// rkey, size, in network byte order.
	advert := func(buf uint64, rkey, size uint32) []byte {
		b := binary.BigEndian.AppendUint64(nil, buf)
		b = binary.BigEndian.AppendUint32(b, rkey)
		return binary.BigEndian.AppendUint32(b, size)
	}
	ping := []byte("rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr\x00")
	readRequest := func(sinkSTag uint32, sinkTO uint64, size, srcSTag uint32, srcTO uint64) []byte {
		b := binary.BigEndian.AppendUint32(nil, sinkSTag)
		b = binary.BigEndian.AppendUint64(b, sinkTO)
		b = binary.BigEndian.AppendUint32(b, size)
		b = binary.BigEndian.AppendUint32(b, srcSTag)
		return binary.BigEndian.AppendUint64(b, srcTO)
	}
	const (
		clientSTag, clientTO = 0xd1e06500, 0x55a24348af30 // where the client takes the ping it reads
		pingSTag, pingTO     = 0xff238f14, 0x200000       // the client's ping, which the server reads
		echoSTag, echoTO     = 0x37b78f02, 0x100000       // where the server writes the ping back
	)
	// The Terminate (RFC 5040 §4.8): Terminate Control 21 02 03, Reserved;
	// DDP Segment Length 16; the DDP header of the client's Send with MSN
	// 4, which found no receive buffer. siw lays the control out with
	// little-endian bitfields: meant is Layer 1 (DDP), EType 2 (Untagged
	// Buffer Error), Error Code 2 (Invalid MSN - no buffer available),
	// HdrCt M and D; by the RFC's bit order it reads Layer 2 (LLP), EType
	// 1, no HdrCt bits.
	terminate := append([]byte{0x21, 0x02, 0x03, 0x00, 0x00, 0x10}, fromClient[4].ulpdu[:18]...)
	wantClient := []want{
		{opcode: 3, qn: 0, msn: 1, payload: advert(pingTO, pingSTag, 64)},
		{tagged: true, opcode: 2, stag: clientSTag, to: clientTO, payload: ping},
		{opcode: 3, qn: 0, msn: 2, payload: advert(echoTO, echoSTag, 64)},
		{opcode: 3, qn: 0, msn: 3, payload: advert(pingTO, pingSTag, 64)},
		{opcode: 3, qn: 0, msn: 4, payload: advert(pingTO, pingSTag, 64)},
	}
	wantServer := []want{
		{opcode: 1, qn: 1, msn: 1, payload: readRequest(clientSTag, clientTO, 64, pingSTag, pingTO)},
		{opcode: 3, qn: 0, msn: 1, payload: make([]byte, 16)},
		{tagged: true, opcode: 0, stag: echoSTag, to: echoTO, payload: ping},
		{opcode: 3, qn: 0, msn: 2, payload: make([]byte, 16)},
		{opcode: 7, qn: 2, msn: 1, payload: terminate},
	}
	check := func(who string, got []siwFPDU, wants []want) {
		t.Helper()
		for i, w := range wants {
			u := got[i].ulpdu
			ddp, rdmap := u[0], u[1]
			// DV = 1 (RFC 5041 §4.2), RV = 1 (RFC 5040 §4.1), every
			// message in one segment: L set.
			if ddp&0x3f != 0x01 || rdmap&0xf0 != 0x40 || ddp&0x40 == 0 || (ddp&0x80 != 0) != w.tagged || rdmap&0x0f != w.opcode {
				t.Errorf("%s ULPDU %d: DDP control %#02x, RDMAP control %#02x", who, i, ddp, rdmap)
				continue
			}
			var hdr []byte
			if w.tagged {
				hdr = binary.BigEndian.AppendUint32(u[:2:2], w.stag)
				hdr = binary.BigEndian.AppendUint64(hdr, w.to)
			} else {
				hdr = binary.BigEndian.AppendUint32(u[:2:2], 0)
				hdr = binary.BigEndian.AppendUint32(hdr, w.qn)
				hdr = binary.BigEndian.AppendUint32(hdr, w.msn)
				hdr = binary.BigEndian.AppendUint32(hdr, w.mo)
			}
			if !bytes.Equal(u, append(hdr, w.payload...)) {
				t.Errorf("%s ULPDU %d:\n got %x\nwant %x", who, i, u, append(hdr, w.payload...))
			}
		}
	}
	check("client", fromClient, wantClient)
	check("server", fromServer, wantServer)

	// The Reader checks the CRC: one flipped bit in the ULPDU or in the
	// CRC field of the client's first FPDU is an MPA CRC error.
	for _, off := range []int{2, len(fromClient[0].raw) - 1} {
		bad := bytes.Clone(reqStream.Data[n:])
		bad[off] ^= 0x01
		r := NewReader(bytes.NewReader(bad), fromInit)
		if _, err := r.Next(); !errors.Is(err, term.MPACRCError) {
			t.Fatalf("bit flipped at %d: %v", off, err)
		}
	}
}
