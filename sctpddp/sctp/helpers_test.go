package sctp

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// readHex reads a file of hex bytes written with spaces, newlines and #
// comments.
func readHex(t testing.TB, name string) []byte {
	t.Helper()
	s, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var clean strings.Builder
	for line := range strings.SplitSeq(string(s), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// testConfig is the endpoint configuration of the tests.
func testConfig() HandshakeConfig {
	return HandshakeConfig{LocalPort: 5000, PeerPort: 5001, ARwnd: 65536, OutboundStreams: 16, InboundStreams: 32}
}

// packet builds a packet of the given chunks with a CRC32c.
func packet(src, dst uint16, vtag uint32, chunks ...[]byte) []byte {
	var w chunk.Builder
	w.Start(nil, src, dst, vtag)
	for _, c := range chunks {
		w.Buf = append(w.Buf, c...)
	}
	return w.Finish()
}

// peerInit is an INIT as a well-behaved peer at port 5001 sends it to port
// 5000.
func peerInit(params ...[]byte) chunk.Init {
	return chunk.Init{InitiateTag: 0xA1A2A3A4, ARwnd: 100000, NumOutboundStreams: 8, NumInboundStreams: 10,
		InitialTSN: 0xB1B2B3B4, Params: bytes.Join(params, nil)}
}

func initPacket(i chunk.Init) []byte { return packet(5001, 5000, 0, i.Append(nil)) }

// param builds a parameter of any type.
func param(t chunk.ParamType, value ...byte) []byte {
	return chunk.RawParam{Type: t, Value: value}.Append(nil)
}

var (
	aliDDP = chunk.AdaptationLayerIndication{AdaptationCodePoint: chunk.AdaptationCodePointDDP}.Append(nil)
	zca    = chunk.ZeroChecksumAcceptable{EDMID: chunk.EDMIDDTLS}.Append(nil)
)

// parsed is a packet taken apart.
type parsed struct {
	h      chunk.Header
	chunks []chunk.Raw
}

func parsePacket(t testing.TB, pkt []byte) parsed {
	t.Helper()
	if err := chunk.VerifyChecksum(pkt); err != nil {
		t.Fatalf("reply: %v", err)
	}
	p := parsed{h: chunk.Header(pkt)}
	it := chunk.Chunks(pkt)
	for it.Next() {
		p.chunks = append(p.chunks, it.Chunk())
	}
	if it.Err() != nil {
		t.Fatalf("reply: %v", it.Err())
	}
	return p
}

func (p parsed) types() []chunk.Type {
	var ts []chunk.Type
	for _, c := range p.chunks {
		ts = append(ts, c.Type())
	}
	return ts
}

// initAck parses a reply that must be one INIT ACK.
func parseInitAck(t testing.TB, pkt []byte) (chunk.Header, chunk.InitAck) {
	t.Helper()
	p := parsePacket(t, pkt)
	if len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeInitAck {
		t.Fatalf("reply chunks %v, want one INIT ACK", p.types())
	}
	ia, _, err := chunk.ParseInitAck(p.chunks[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := ia.Check(); err != nil {
		t.Fatal(err)
	}
	return p.h, ia
}

// paramsOf returns the parameters of a list, unpadded.
func paramsOf(t testing.TB, ps []byte) []chunk.Param {
	t.Helper()
	var out []chunk.Param
	it := chunk.Params(ps)
	for it.Next() {
		out = append(out, it.Param())
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// abortCauses parses a reply that must be one ABORT and returns its T bit
// and causes.
func parseAbort(t testing.TB, pkt []byte) (chunk.Header, bool, []chunk.Cause) {
	t.Helper()
	p := parsePacket(t, pkt)
	if len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeAbort {
		t.Fatalf("reply chunks %v, want one ABORT", p.types())
	}
	a, _, err := chunk.ParseAbort(p.chunks[0])
	if err != nil {
		t.Fatal(err)
	}
	var causes []chunk.Cause
	it := chunk.Causes(a.Causes)
	for it.Next() {
		causes = append(causes, it.Cause())
	}
	return p.h, a.T, causes
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
