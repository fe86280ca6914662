//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/dtls/v3"
)

// isClientHello and hasServerHello look at datagrams before any DTLS
// authentication. The fuzz targets here hold them to a reference parse
// written from the record and handshake layouts of RFC 6347 §4.1 and
// §4.2.2 (which RFC 9147 §4 and §5.2 keep for the plaintext records of
// epoch 0), and check that neither looks past the datagram's length.

var writeHelloSeeds = flag.Bool("hello-seeds", false, "write the pion handshakes TestHelloDetectorsOnPion records to testdata/fuzz as seeds")

// refRecord is one DTLSPlaintext record (RFC 6347 §4.1):
//
//	struct {
//	     ContentType type;               // 1 octet
//	     ProtocolVersion version;        // 2 octets
//	     uint16 epoch;
//	     uint48 sequence_number;
//	     uint16 length;
//	     opaque fragment[DTLSPlaintext.length];
//	} DTLSPlaintext;
type refRecord struct {
	contentType uint8
	version     uint16
	epoch       uint16
	seq         uint64
	fragment    []byte
}

// refParseRecord parses the record at the start of d and returns what
// follows it; ok is false if d is shorter than the header or than the
// length the header gives.
func refParseRecord(d []byte) (r refRecord, rest []byte, ok bool) {
	const header = 1 + 2 + 2 + 6 + 2
	if len(d) < header {
		return refRecord{}, nil, false
	}
	r.contentType = d[0]
	r.version = uint16(d[1])<<8 | uint16(d[2])
	r.epoch = uint16(d[3])<<8 | uint16(d[4])
	for _, c := range d[5:11] {
		r.seq = r.seq<<8 | uint64(c)
	}
	n := int(d[11])<<8 | int(d[12])
	if n > len(d)-header {
		return refRecord{}, nil, false
	}
	r.fragment = d[header : header+n]
	return r, d[header+n:], true
}

// refHandshake is a handshake message header (RFC 6347 §4.2.2) and the
// fragment behind it:
//
//	struct {
//	  HandshakeType msg_type;    // 1 octet
//	  uint24 length;
//	  uint16 message_seq;
//	  uint24 fragment_offset;
//	  uint24 fragment_length;
//	  ...body
//	} Handshake;
type refHandshake struct {
	msgType                            uint8
	length, fragmentOffset, fragLength uint32
	messageSeq                         uint16
	body                               []byte
}

func refParseHandshake(f []byte) (h refHandshake, ok bool) {
	if len(f) < 12 {
		return refHandshake{}, false
	}
	u24 := func(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }
	h.msgType = f[0]
	h.length = u24(f[1:4])
	h.messageSeq = uint16(f[4])<<8 | uint16(f[5])
	h.fragmentOffset = u24(f[6:9])
	h.fragLength = u24(f[9:12])
	h.body = f[12:]
	return h, true
}

// refDTLSVersion: DTLS 1.0 is {254, 255}, DTLS 1.2 {254, 253} (RFC 6347
// §4.1); DTLS 1.3 keeps {254, 253} as the legacy version of its
// ClientHello (RFC 9147 §5.3).
func refDTLSVersion(v uint16) bool { return v == 0xfeff || v == 0xfefd }

// refMinClientHello is the shortest ClientHello body (RFC 6347 §4.2.1,
// RFC 5246 §7.4.1.2): client_version (2), random (32), an empty
// session_id and cookie (1 + 1), one cipher suite (2 + 2) and one
// compression method (1 + 1).
const refMinClientHello = 2 + 32 + 1 + 1 + 2 + 2 + 1 + 1

// refIsClientHello is what isClientHello documents: the datagram's first
// record is a handshake record of epoch 0 with a DTLS version, and holds
// exactly one handshake fragment, the first (offset 0) of a client_hello
// (type 1) no longer than its message, of at least the shortest
// ClientHello, whose client_version is a DTLS version.
func refIsClientHello(d []byte) bool {
	r, _, ok := refParseRecord(d)
	if !ok || r.contentType != 22 || !refDTLSVersion(r.version) || r.epoch != 0 {
		return false
	}
	h, ok := refParseHandshake(r.fragment)
	if !ok || h.msgType != 1 || h.fragmentOffset != 0 {
		return false
	}
	return int(h.fragLength) == len(h.body) && h.fragLength <= h.length &&
		len(h.body) >= refMinClientHello && h.length >= refMinClientHello &&
		refDTLSVersion(uint16(h.body[0])<<8|uint16(h.body[1]))
}

// refHasServerHello is what hasServerHello documents: one of the whole
// records the datagram starts with is a handshake record of epoch 0 that
// begins with a handshake header of type server_hello (2).
func refHasServerHello(d []byte) bool {
	for {
		r, rest, ok := refParseRecord(d)
		if !ok {
			return false
		}
		if r.contentType == 22 && r.epoch == 0 {
			if h, ok := refParseHandshake(r.fragment); ok && h.msgType == 2 {
				return true
			}
		}
		d = rest
	}
}

// refClientHelloBody reports whether the fragment of a whole ClientHello
// parses to its end (RFC 6347 §4.2.1): the detectors look at headers
// only, and this checks that pion's ClientHellos are the real thing.
func refClientHelloBody(b []byte) bool {
	vec := func(lenLen int) ([]byte, bool) {
		if len(b) < lenLen {
			return nil, false
		}
		n := 0
		for _, c := range b[:lenLen] {
			n = n<<8 | int(c)
		}
		if n > len(b)-lenLen {
			return nil, false
		}
		v := b[lenLen : lenLen+n]
		b = b[lenLen+n:]
		return v, true
	}
	if len(b) < 34 {
		return false
	}
	b = b[34:] // client_version, random
	sid, ok1 := vec(1)
	cookie, ok2 := vec(1)
	suites, ok3 := vec(2)
	comp, ok4 := vec(1)
	if !ok1 || !ok2 || !ok3 || !ok4 || len(sid) > 32 || len(cookie) > 255 || len(suites) < 2 || len(suites)%2 != 0 || len(comp) < 1 {
		return false
	}
	if len(b) == 0 {
		return true
	}
	_, ok := vec(2) // extensions
	return ok && len(b) == 0
}

// tailBuf holds a datagram followed by at least 64 KiB of the octet
// fill, enough to complete any record whose length overruns the
// datagram: a parser that slices past the length (which Go allows up to
// the capacity) sees the fill.
type tailBuf struct {
	b    []byte // all fill between two calls of with
	fill byte
}

// with calls f with a copy of d whose capacity runs on into the fill.
func (tb *tailBuf) with(d []byte, f func([]byte) bool) bool {
	if n := len(d) + 64<<10; len(tb.b) < n {
		tb.b = bytes.Repeat([]byte{tb.fill}, n)
	}
	copy(tb.b, d)
	r := f(tb.b[:len(d)])
	for i := range d {
		tb.b[i] = tb.fill
	}
	return r
}

// tails are filled with zeros, DTLS version octets and server_hello
// types. The fuzz functions run one at a time in a process, so they are
// reused.
var tails = []*tailBuf{{fill: 0}, {fill: 0xfe}, {fill: 2}}

// helloSeeds are hand-made datagrams around the edges the detectors
// check: the recorded pion handshakes are in testdata/fuzz.
func helloSeeds() [][]byte {
	ch := func(recordVersion, clientVersion uint16, epoch uint16, bodyLen, msgLen, fragOff, fragLen, recLen int) []byte {
		var b []byte
		b = append(b, 22)
		b = binary.BigEndian.AppendUint16(b, recordVersion)
		b = binary.BigEndian.AppendUint16(b, epoch)
		b = append(b, 0, 0, 0, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(recLen))
		b = append(b, 1, byte(msgLen>>16), byte(msgLen>>8), byte(msgLen), 0, 0,
			byte(fragOff>>16), byte(fragOff>>8), byte(fragOff), byte(fragLen>>16), byte(fragLen>>8), byte(fragLen))
		body := make([]byte, bodyLen)
		if bodyLen >= 2 {
			binary.BigEndian.PutUint16(body, clientVersion)
		}
		return append(b, body...)
	}
	m := refMinClientHello
	sh := func(epoch uint16, fragment []byte) []byte {
		var b []byte
		b = append(b, 22, 0xfe, 0xfd)
		b = binary.BigEndian.AppendUint16(b, epoch)
		b = append(b, 0, 0, 0, 0, 0, 1)
		b = binary.BigEndian.AppendUint16(b, uint16(len(fragment)))
		return append(b, fragment...)
	}
	hsHeader := append([]byte{2, 0, 0, 70, 0, 0, 0, 0, 0, 0, 0, 70}, make([]byte, 70)...)
	return [][]byte{
		nil,
		{22},
		make([]byte, 13),
		ch(0xfefd, 0xfefd, 0, m, m, 0, m, 12+m), // the shortest ClientHello
		ch(0xfeff, 0xfeff, 0, m, m, 0, m, 12+m), // DTLS 1.0
		ch(0xfefd, 0xfefd, 0, m-1, m-1, 0, m-1, 12+m-1),    // one octet short
		ch(0xfefd, 0xfefd, 0, m, m+100, 0, m, 12+m),        // first fragment of a longer message
		ch(0xfefd, 0xfefd, 0, m, m-1, 0, m, 12+m),          // fragment longer than its message
		ch(0xfefd, 0xfefd, 0, m, m+100, 1, m, 12+m),        // not the first fragment
		ch(0xfefd, 0xfefd, 0, m, m, 0, m+1, 12+m),          // fragment length past the record
		ch(0xfefd, 0xfefd, 0, m, m, 0, m, 12+m+1),          // record length past the datagram
		ch(0xfefd, 0xfefd, 1, m, m, 0, m, 12+m),            // epoch 1
		ch(0xfefd, 0x0303, 0, m, m, 0, m, 12+m),            // a TLS 1.2 client_version
		ch(0x0303, 0xfefd, 0, m, m, 0, m, 12+m),            // a TLS record version
		append(ch(0xfefd, 0xfefd, 0, m, m, 0, m, 12+m), 1), // trailing octet
		sh(0, hsHeader),
		sh(1, hsHeader),
		sh(0, []byte{2}),             // a ServerHello type without a header
		sh(0, []byte{3, 0, 0, 3, 0}), // HelloVerifyRequest
		append(sh(0, []byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), sh(0, hsHeader)...),
		append(sh(0, hsHeader), 22, 0xfe, 0xfd, 0, 0),               // a short record after it
		append(sh(0, []byte{11, 0, 0, 0})[:14], sh(0, hsHeader)...), // a record overrunning into the next
	}
}

func FuzzIsClientHello(f *testing.F) {
	for _, d := range helloSeeds() {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		got := isClientHello(d)
		if want := refIsClientHello(d); got != want {
			t.Fatalf("isClientHello = %v, the reference parse says %v: % x", got, want, d[:min(len(d), 40)])
		}
		for _, tb := range tails {
			if tb.with(d, isClientHello) != got {
				t.Fatalf("isClientHello reads past the datagram's %d octets", len(d))
			}
		}
	})
}

func FuzzHasServerHello(f *testing.F) {
	for _, d := range helloSeeds() {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		got := hasServerHello(d)
		if want := refHasServerHello(d); got != want {
			t.Fatalf("hasServerHello = %v, the reference parse says %v: % x", got, want, d[:min(len(d), 40)])
		}
		for _, tb := range tails {
			if tb.with(d, hasServerHello) != got {
				t.Fatalf("hasServerHello reads past the datagram's %d octets", len(d))
			}
		}
	})
}

// recordConn keeps a copy of every datagram written through it.
type recordConn struct {
	net.PacketConn
	mu  sync.Mutex
	out [][]byte
}

func (c *recordConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, bytes.Clone(p))
	c.mu.Unlock()
	return c.PacketConn.WriteTo(p, addr)
}

func (c *recordConn) written() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out
}

// recordHandshake runs a pion DTLS handshake between srv and cli over
// loopback UDP, in datagrams of at most dtlsMTU octets (pion's default if
// 0), and returns the datagrams each side sent.
func recordHandshake(t *testing.T, srv, cli *Config, dtlsMTU int) (fromClient, fromServer [][]byte) {
	t.Helper()
	ss, err := srv.settings()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := cli.settings()
	if err != nil {
		t.Fatal(err)
	}
	listen := func() *recordConn {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Close() })
		return &recordConn{PacketConn: pc}
	}
	spc, cpc := listen(), listen()
	sopts, _ := ss.dtlsOptions(true, &authFailure{})
	_, copts := cs.dtlsOptions(false, &authFailure{})
	if dtlsMTU > 0 {
		sopts = append(sopts, dtls.WithMTU(dtlsMTU))
		copts = append(copts, dtls.WithMTU(dtlsMTU))
	}
	sconn, err := dtls.ServerWithOptions(spc, cpc.LocalAddr(), sopts...)
	if err != nil {
		t.Fatal(err)
	}
	cconn, err := dtls.ClientWithOptions(cpc, spc.LocalAddr(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- sconn.HandshakeContext(ctx) }()
	go func() { errs <- cconn.HandshakeContext(ctx) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	_ = cconn.Close()
	_ = sconn.Close()
	return cpc.written(), spc.written()
}

// TestHelloDetectorsOnPion records pion's handshakes (certificates, one
// flight in a datagram and spread over several; PSK) and checks the
// detectors and the reference on each datagram: the client's first two
// datagrams are its ClientHellos (the second echoes the cookie of the
// HelloVerifyRequest), and nothing else is; the server's first datagram
// is the HelloVerifyRequest, which is no ServerHello, and its second
// holds the ServerHello.
func TestHelloDetectorsOnPion(t *testing.T) {
	cert := func() (srv, cli *Config) { return pinnedConfigs(t) }
	psk := func() (srv, cli *Config) { return pskConfigs("k", "id"), pskConfigs("k", "id") }
	for _, tc := range []struct {
		name    string
		configs func() (srv, cli *Config)
		dtlsMTU int
	}{
		{"cert", cert, 0},
		{"cert-mtu200", cert, 200},
		{"psk", psk, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := tc.configs()
			fromClient, fromServer := recordHandshake(t, srv, cli, tc.dtlsMTU)
			lens := func(ds [][]byte) (n []int) {
				for _, d := range ds {
					n = append(n, len(d))
				}
				return n
			}
			t.Logf("datagrams from the client %v, from the server %v", lens(fromClient), lens(fromServer))
			if len(fromClient) < 3 || len(fromServer) < 2 {
				t.Fatalf("%d datagrams from the client, %d from the server", len(fromClient), len(fromServer))
			}
			for i, d := range fromClient {
				want := i < 2
				if got, ref := isClientHello(d), refIsClientHello(d); got != want || ref != want {
					t.Errorf("client datagram %d (% x): isClientHello %v, reference %v, want %v", i, d[:min(len(d), 32)], got, ref, want)
				}
				if hasServerHello(d) || refHasServerHello(d) {
					t.Errorf("client datagram %d taken for a ServerHello", i)
				}
				if want {
					r, _, _ := refParseRecord(d)
					h, _ := refParseHandshake(r.fragment)
					if h.fragLength != h.length || !refClientHelloBody(h.body) {
						t.Errorf("client datagram %d: not one whole ClientHello", i)
					}
				}
			}
			if r, _, _ := refParseRecord(fromClient[1]); !bytes.Contains(r.fragment, cookieOf(t, fromServer[0])) {
				t.Error("the second ClientHello does not echo the HelloVerifyRequest's cookie")
			}
			for i, d := range fromServer {
				want := i == 1
				if got, ref := hasServerHello(d), refHasServerHello(d); got != want || ref != want {
					t.Errorf("server datagram %d (% x): hasServerHello %v, reference %v, want %v", i, d[:min(len(d), 32)], got, ref, want)
				}
				if isClientHello(d) || refIsClientHello(d) {
					t.Errorf("server datagram %d taken for a ClientHello", i)
				}
			}
			if *writeHelloSeeds {
				writeSeed(t, "FuzzIsClientHello", "pion-"+tc.name+"-clienthello", fromClient[0])
				writeSeed(t, "FuzzIsClientHello", "pion-"+tc.name+"-clienthello-cookie", fromClient[1])
				writeSeed(t, "FuzzIsClientHello", "pion-"+tc.name+"-client-flight5", fromClient[2])
				writeSeed(t, "FuzzHasServerHello", "pion-"+tc.name+"-helloverifyrequest", fromServer[0])
				writeSeed(t, "FuzzHasServerHello", "pion-"+tc.name+"-serverhello", fromServer[1])
				if len(fromServer) > 2 {
					writeSeed(t, "FuzzHasServerHello", "pion-"+tc.name+"-server-next", fromServer[2])
				}
			}
		})
	}
}

// cookieOf returns the cookie of the HelloVerifyRequest in datagram d
// (RFC 6347 §4.2.1: server_version, then cookie<0..2^8-1>).
func cookieOf(t *testing.T, d []byte) []byte {
	t.Helper()
	r, _, ok := refParseRecord(d)
	h, ok2 := refParseHandshake(r.fragment)
	if !ok || !ok2 || h.msgType != 3 || len(h.body) < 3 || int(h.body[2]) > len(h.body)-3 || h.body[2] == 0 {
		t.Fatalf("not a HelloVerifyRequest with a cookie: % x", d)
	}
	return h.body[3 : 3+int(h.body[2])]
}

// writeSeed writes d as a seed of the fuzz target in testdata/fuzz.
func writeSeed(t *testing.T, target, name string, d []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", d), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHelloSeedsArePion checks that the recorded seeds in testdata/fuzz
// are still what the detectors take them for.
func TestHelloSeedsArePion(t *testing.T) {
	for target, check := range map[string]func([]byte) bool{"FuzzIsClientHello": isClientHello, "FuzzHasServerHello": hasServerHello} {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", target, "pion-*"))
		if len(files) == 0 {
			t.Errorf("no recorded seeds for %s", target)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			d := parseSeed(t, b)
			base := filepath.Base(name)
			want := strings.HasSuffix(base, "-clienthello") || strings.HasSuffix(base, "-clienthello-cookie") || strings.HasSuffix(base, "-serverhello")
			if check(d) != want {
				t.Errorf("%s: %v, want %v", name, check(d), want)
			}
		}
	}
}

// parseSeed returns the []byte value of a seed file as writeSeed writes
// it.
func parseSeed(t *testing.T, b []byte) []byte {
	t.Helper()
	s, ok := strings.CutPrefix(string(b), "go test fuzz v1\n[]byte(")
	s, ok2 := strings.CutSuffix(s, ")\n")
	v, err := strconv.Unquote(s)
	if !ok || !ok2 || err != nil {
		t.Fatalf("not a seed file: %q", b)
	}
	return []byte(v)
}
