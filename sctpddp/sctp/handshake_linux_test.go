package sctp

import (
	"bytes"
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// TestLinuxInit answers the INITs Linux builds (hand-made in the chunk
// package's testdata, byte by byte as sctp_make_init() lays them out).
// Linux lists its addresses and Supported Address Types, which an
// endpoint over DTLS accepts and ignores (RFC 8261 §8), and
// Forward-TSN-Supported, whose type 0xC000 says "Skip this parameter and
// continue processing, but report the unrecognized parameter" (RFC 9260
// §3.2.1): this package does not implement RFC 3758, so it reports it.
func TestLinuxInit(t *testing.T) {
	keys := testKeys(t)
	for _, tc := range []struct {
		file    string
		udp     bool // an RFC 6951 datagram: the SCTP packet follows 8 bytes of UDP header
		tag     uint32
		tsn     uint32
		arwnd   uint32
		os, mis uint16
	}{
		{"linux_init.hex", false, 0x3f5c9a21, 0x8d1e6b03, 106496, 10, 65535},
		{"linux_init_udp.hex", true, 0x0a0b0c0d, 1, 131072, 10, 10},
	} {
		t.Run(tc.file, func(t *testing.T) {
			pkt := readHex(t, "chunk/testdata/"+tc.file)
			if tc.udp {
				pkt = pkt[8:]
			}
			if err := chunk.VerifyChecksum(pkt); err != nil {
				t.Fatal(err)
			}
			h := chunk.Header(pkt)
			cfg := HandshakeConfig{LocalPort: 5000, ARwnd: 65536, OutboundStreams: 16, InboundStreams: 16}
			res, err := HandleInit(nil, pkt, &cfg, &keys, testRand(0x21, 64), testNow)
			if err != nil || res.Abort {
				t.Fatalf("HandleInit: %v, %+v", err, res)
			}
			if !res.PeerAdaptation.DDP() || res.Unrecognized != 1 || res.PeerZeroChecksum {
				t.Errorf("result %+v", res)
			}
			rh, ia := parseInitAck(t, res.Packet)
			if rh.VerificationTag() != tc.tag || rh.DestinationPort() != h.SourcePort() || rh.SourcePort() != 5000 {
				t.Errorf("INIT ACK header %x", []byte(rh[:8]))
			}
			var reports [][]byte
			for _, p := range paramsOf(t, ia.Params) {
				if p.Type() == chunk.ParamUnrecognizedParameter {
					reports = append(reports, p.Value())
				}
			}
			if len(reports) != 1 || !bytes.Equal(reports[0], []byte{0xc0, 0x00, 0x00, 0x04}) {
				t.Errorf("Unrecognized Parameters %x, want Forward-TSN-Supported's", reports)
			}
			// Linux echoes the cookie; the association is Linux's.
			echo := packet(h.SourcePort(), 5000, ia.InitiateTag, chunk.CookieEcho{Cookie: mustCookie(t, ia)}.Append(nil))
			_, est, err := HandleCookieEcho(nil, echo, &keys, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if est.PeerVerificationTag != tc.tag || est.PeerInitialTSN != tc.tsn || est.PeerARwnd != tc.arwnd ||
				est.OutboundStreams != min(16, tc.mis) || est.InboundStreams != min(16, tc.os) || !est.PeerAdaptation.DDP() {
				t.Errorf("established %+v", est)
			}
		})
	}
}
