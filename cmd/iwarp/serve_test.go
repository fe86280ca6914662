package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/admission"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/responder"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/leaktest"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

func TestServeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"serve"},
		{"serve", "--listen", "udp://x:1"},
		{"serve", "--listen", "tcp://127.0.0.1"},
		{"serve", "--listen", "tcp://127.0.0.1:0", "--mr-size", "0"},
		{"serve", "--listen", "tcp://127.0.0.1:0", "--psk", "x"},
		{"serve", "--listen", "sctp://127.0.0.1:0", "--markers"},
		{"serve", "--bogus"},
	} {
		_, stderr, code := runIwarp(t, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 && !contains(stderr, "Usage") && !contains(stderr, "usage") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	_, stderr, code := runIwarp(t, "serve", "-h")
	if code != 0 || !contains(stderr, "Examples:") || !contains(stderr, `"event":"recv"`) {
		t.Errorf("serve -h: exit %d\n%s", code, stderr)
	}
	_, stderr, code = runIwarp(t, "serve", "--listen", "tcp://256.0.0.1:1")
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("bad address: exit %d, stderr %q", code, stderr)
	}
}

// expectedRegion is the served region's initial contents.
func expectedRegion(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func testServe(t *testing.T, url string, link endpoint.Flags, args ...string) {
	const mrSize = 8192
	s := startServe(t, append([]string{"--listen", url, "--mr-size", "8192", "--recv-depth", "4", "--recv-size", "2048"}, args...)...)
	if s.fp != "" {
		link.Fingerprint = s.fp
	}
	cl := dialServer(t, s.url, link)
	ev := s.next("connected")
	wantField(t, ev, "stag", cl.stag)
	wantField(t, ev, "to", cl.to)
	wantField(t, ev, "length", mrSize)
	if cl.length != mrSize || cl.to != responder.TO {
		t.Fatalf("advertised TO %#x length %d", cl.to, cl.length)
	}
	scheme := url[:strings.Index(url, ":")]
	wantField(t, ev, "transport", scheme)
	if scheme == "tcp" {
		wantField(t, ev, "mpa_revision", 2)
		wantField(t, ev, "crc", !link.NoCRC)
		wantField(t, ev, "markers_rx", link.Markers)
	} else {
		wantField(t, ev, "sctp_stream", 1)
	}

	want := expectedRegion(mrSize)
	// RDMA Write 3000 bytes at offset 100.
	data := bytes.Repeat([]byte("iwarp!"), 500)
	src := cl.reg(data)
	if err := cl.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: uint32(len(data))}}, RemoteSTag: cl.stag, RemoteTO: cl.to + 100}); err != nil {
		t.Fatal(err)
	}
	copy(want[100:], data)
	// RDMA Read it back, with what follows.
	sink := cl.reg(make([]byte, 4000))
	if err := cl.qp.PostRead(rdmap.ReadWR{ID: 2, Local: rdmap.SGE{MR: sink, Length: 4000}, RemoteSTag: cl.stag, RemoteTO: cl.to + 100}); err != nil {
		t.Fatal(err)
	}
	// Two Sends.
	msgs := [][]byte{[]byte("hello"), bytes.Repeat([]byte{7}, 1500)}
	for i, m := range msgs {
		if err := cl.qp.PostSend(rdmap.SendWR{ID: uint64(3 + i), SGL: []rdmap.SGE{{MR: cl.reg(m), Length: uint32(len(m))}}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		cl.wait(cl.scq)
	}
	if !bytes.Equal(sink.Bytes(), want[100:4100]) {
		t.Error("RDMA Read returned other bytes than were written")
	}
	for i, m := range msgs {
		ev := s.next("recv")
		wantField(t, ev, "msn", i+1)
		wantField(t, ev, "len", len(m))
		wantField(t, ev, "sha256", sum(m))
	}
	cl.close()
	ev = s.next("closed")
	wantField(t, ev, "mr_sha256", sum(want))

	// A Write to an STag that does not exist: the server terminates.
	cl2 := dialServer(t, s.url, link)
	s.next("connected")
	cl2.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: cl2.reg([]byte("x")), Length: 1}}, RemoteSTag: cl2.stag ^ 0xff00, RemoteTO: cl2.to})
	ev = s.next("terminate")
	wantField(t, ev, "origin", "local")
	wantField(t, ev, "layer_name", "DDP")
	wantField(t, ev, "name", "Tagged Buffer Error / Invalid Steering Tag")
	ev = s.next("closed")
	wantField(t, ev, "mr_sha256", sum(expectedRegion(mrSize)))
	s.stop()
}

func TestServeTCP(t *testing.T) {
	testServe(t, "tcp://127.0.0.1:0", endpoint.Flags{})
}

func TestServeTCPMarkersNoCRC(t *testing.T) {
	testServe(t, "tcp://127.0.0.1:0", endpoint.Flags{Markers: true, NoCRC: true}, "--markers", "--no-crc")
}

func TestServeSCTPFingerprint(t *testing.T) {
	testServe(t, "sctp://127.0.0.1:0", endpoint.Flags{})
}

func TestServeSCTPPSK(t *testing.T) {
	testServe(t, "sctp://127.0.0.1:0", endpoint.Flags{PSK: "lab key", PSKIdentity: "iwarp"}, "--psk", "lab key")
}

// Two clients at once, then SIGINT with one still connected: serve
// reports it closed and exits 0.
func TestServeConcurrentAndSIGINT(t *testing.T) {
	for _, url := range []string{"tcp://127.0.0.1:0", "sctp://127.0.0.1:0"} {
		s := startServe(t, "--listen", url, "--mr-size", "4096")
		a := dialServer(t, s.url, endpoint.Flags{Fingerprint: s.fp})
		s.next("connected")
		b := dialServer(t, s.url, endpoint.Flags{Fingerprint: s.fp})
		s.next("connected")
		if a.stag == b.stag {
			t.Error("two connections share a region")
		}
		start := time.Now()
		s.stop()
		t.Logf("%s stopped in %v", url, time.Since(start))
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: serve took %v to stop", url, d)
		}
	}
}

// The client side of package endpoint (Dial, Close) leaves no goroutines
// behind, over either transport.
func TestDialNoLeak(t *testing.T) {
	for _, url := range []string{"tcp://127.0.0.1:0", "sctp://127.0.0.1:0"} {
		t.Run(url, func(t *testing.T) {
			s := startServe(t, "--listen", url, "--mr-size", "4096")
			leaktest.Check(t)
			for range 3 {
				cl := dialServer(t, s.url, endpoint.Flags{Fingerprint: s.fp})
				s.next("connected")
				cl.close()
				s.next("closed")
			}
			s.stop()
		})
	}
}

// A client with no receive posted cannot take the advertisement: its
// queue pair terminates, and serve reports the peer's Terminate.
func TestServeRemoteTerminate(t *testing.T) {
	s := startServe(t, "--listen", "tcp://127.0.0.1:0")
	ep, _ := endpoint.Parse(s.url)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(16)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	c, err := endpoint.Dial(t.Context(), ep, &endpoint.Flags{}, nil, qp, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	s.next("connected")
	ev := s.next("terminate")
	wantField(t, ev, "origin", "remote")
	wantField(t, ev, "layer_name", "DDP")
	wantField(t, ev, "etype", 2)
	if name, _ := ev["name"].(string); !strings.HasPrefix(name, "Untagged Buffer Error") {
		t.Errorf("terminate name %q", name)
	}
	s.next("closed")
	s.stop()
}

// --cert and --key: the listener presents the given certificate, and a
// client pinning its fingerprint connects.
func TestServeSCTPCertFiles(t *testing.T) {
	cert, err := sctpddp.GenerateCertificate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	fp, _ := sctpddp.CertificateFingerprint(cert)
	s := startServe(t, "--listen", "sctp://127.0.0.1:0", "--cert", certFile, "--key", keyFile)
	if s.fp != fp.String() {
		t.Fatalf("serve prints fingerprint %s, the certificate's is %s", s.fp, fp)
	}
	cl := dialServer(t, s.url, endpoint.Flags{Fingerprint: s.fp})
	s.next("connected")
	cl.close()
	s.next("closed")
	s.stop()
}

// attacker opens silent MPA connections to addr from the local IP
// address from: each sends a valid Request (and the RTR) and then nothing.
// It returns how many serve accepted and how many it rejected.
func attack(t *testing.T, from, addr string, n int) (accepted, rejected int, conns []*mpa.Conn) {
	t.Helper()
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	for range n {
		cq := dev.NewCompletionQueue(4)
		qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		// A buffer for serve's advertisement: the connection stays up.
		mr, err := pd.RegisterMemory(make([]byte, 16), 0, rdmap.LocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		qp.PostRecv(rdmap.RecvWR{SGL: []rdmap.SGE{{MR: mr, Length: 16}}})
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := mpa.Client(context.Background(), nc, qp, nil)
		var re *ddp.RejectedError
		switch {
		case err == nil:
			accepted++
			conns = append(conns, c)
		case errors.As(err, &re):
			rejected++
			nc.Close()
		default:
			t.Fatalf("attack connection: %v", err)
		}
	}
	return accepted, rejected, conns
}

// rss returns a process's resident memory in octets.
func rss(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A peer refused again and again (here past --max-conns-per-peer) gets
// at most refusalBurst "refused" events at once and refusalRate a second
// after that; the rest are counted in "unreported" events, the last when
// serve stops, so that every refusal is accounted for.
func TestServeBoundsRefusalReports(t *testing.T) {
	s := startServe(t, "--listen", "tcp://127.0.0.1:0", "--max-conns-per-peer", "1")
	addr := strings.TrimPrefix(s.url, "tcp://")
	start := time.Now()
	accepted, rejected, conns := attack(t, "127.0.0.1", addr, refusalBurst+61)
	took := time.Since(start)
	s.stop()
	for _, c := range conns {
		c.Close()
	}
	reported, unreported := 0, 0
	for ev := range s.events {
		switch ev["event"] {
		case "refused":
			reported++
		case "unreported":
			unreported += int(ev["refused"].(float64))
		}
	}
	if accepted != 1 || rejected != refusalBurst+60 {
		t.Fatalf("accepted %d, rejected %d; want 1 and %d", accepted, rejected, refusalBurst+60)
	}
	if reported+unreported != rejected {
		t.Fatalf("%d refusals reported and %d counted as unreported, want %d in all", reported, unreported, rejected)
	}
	if most := refusalBurst + int(took.Seconds()*refusalRate) + 1; reported > most {
		t.Fatalf("%d refusals reported in %v, want at most %d", reported, took, most)
	}
	t.Logf("%d refusals in %v: %d reported, %d counted", rejected, took.Round(time.Millisecond), reported, unreported)
}

// One peer that holds many silent connections reaches its limit and is
// refused the rest, while serve's memory stays bounded and a second peer
// still connects and moves data; a connection on which nothing moves is
// closed after the idle timeout.
func TestServeSilentPeer(t *testing.T) {
	s := startServe(t, "--listen", "tcp://127.0.0.1:0", "--max-conns-per-peer", "8", "--idle-timeout", "2s")
	addr := strings.TrimPrefix(s.url, "tcp://")
	before := rss(t, s.cmd.Process.Pid)
	accepted, rejected, conns := attack(t, "127.0.0.1", addr, 40)
	// The connected events come from each connection's goroutine, the
	// refusals from the accepting one: in any order.
	connected, refusedEvents := 0, 0
	for range accepted + rejected {
		ev := s.nextOf("connected", "refused")
		if ev["event"] == "connected" {
			connected++
			continue
		}
		if !strings.Contains(fmt.Sprint(ev["reason"]), "max-conns-per-peer") {
			t.Errorf("refused for %v", ev["reason"])
		}
		refusedEvents++
	}
	if accepted != 8 || rejected != 32 || refusedEvents != 32 || connected != 8 {
		t.Fatalf("accepted %d, rejected %d (%d reported, %d connected events); want 8 and 32", accepted, rejected, refusedEvents, connected)
	}
	if grew := rss(t, s.cmd.Process.Pid) - before; grew > 64<<20 {
		t.Errorf("serve grew by %d MiB for 8 silent connections", grew>>20)
	}
	// Another peer is served meanwhile.
	good := dialServerFrom(t, "127.0.0.2", s.url)
	s.next("connected")
	good.write(t, 100, []byte("still served"))
	// The silent connections, and then the good one, go idle: serve
	// closes them.
	for idle := 0; idle < accepted+1; {
		if ev := s.nextOf("idle", "closed"); ev["event"] == "idle" {
			idle++
		}
	}
	for _, c := range conns {
		c.Close()
	}
	s.stop()
}

// A refusal by serve's limits (package admission, which counts an IPv6
// /64 as one peer) names the flag that sets the limit.
func TestServeRefusalNamesFlag(t *testing.T) {
	a := admission.New(admission.Limits{MaxConns: 2, MaxConnsPerPeer: 1, MemBudget: 100})
	if err := a.Take("[2001:db8:1:2::1]:4000", 10); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		peer   string
		octets int64
		want   string
	}{
		{"[2001:db8:1:2:ffff::9]:4001", 10, "1 connections from 2001:db8:1:2::/64 already (--max-conns-per-peer)"},
		{"192.0.2.1:4002", 100, "100 octets asked, 10 of 100 in use (--mem-budget)"},
	} {
		if got := serveRefusal(a.Take(tc.peer, tc.octets)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.peer, got, tc.want)
		}
	}
	if err := a.Take("192.0.2.1:4002", 10); err != nil {
		t.Fatal(err)
	}
	if got, want := serveRefusal(a.Take("192.0.2.3:4003", 0)), "2 connections already (--max-conns)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// A connection that the transport's listener refuses before serve sees it
// (here mpa's limit of 64 connections per peer address, reached with
// TCP connections that never send their MPA Request) is reported as a
// refused event with the transport's reason, as serve's own refusals are.
func TestServeReportsTransportRefusals(t *testing.T) {
	s := startServe(t, "--listen", "tcp://127.0.0.1:0")
	addr := strings.TrimPrefix(s.url, "tcp://")
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range mpa.DefaultMaxPerPeer + 1 {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	ev := s.next("refused")
	if !strings.HasPrefix(fmt.Sprint(ev["peer"]), "127.0.0.3:") || ev["reason"] != mpa.ErrPeerLimit.Error() {
		t.Fatalf("refused event %v; want peer 127.0.0.3 and %q", ev, mpa.ErrPeerLimit)
	}
	s.stop()
}

// With --pcap over tcp://, the listener sees each connection's real
// peer: a refusal names it, and a connection refused or closed during
// its startup ends its recording.
func TestPcapListenerSeesRealPeers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var refusedFrom []string
	f := &endpoint.Flags{PCAP: filepath.Join(t.TempDir(), "relay.pcap")}
	f.Refused = func(a net.Addr, why error) {
		mu.Lock()
		refusedFrom = append(refusedFrom, a.String())
		mu.Unlock()
	}
	l, rec, err := endpoint.ListenRecorded(ctx, endpoint.URL{Scheme: "tcp", Addr: "127.0.0.1:0"}, f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	defer l.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	var conns []net.Conn
	for range mpa.DefaultMaxPerPeer + 1 {
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() }) // should the test end early
		conns = append(conns, c)
	}
	// The listener refuses the last, naming the real peer.
	deadline := time.Now().Add(10 * time.Second)
	waitfor.True(t, time.Until(deadline), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refusedFrom) > 0
	}, "no refusal reported")
	mu.Lock()
	if !strings.HasPrefix(refusedFrom[0], "127.0.0.3:") {
		t.Errorf("refused %s, want the peer 127.0.0.3", refusedFrom[0])
	}
	mu.Unlock()
	// The others end during their startup: each is in the capture, from
	// its handshake to its FIN.
	for _, c := range conns {
		c.Close()
	}
	var syns, fins int
	waitfor.Until(time.Until(deadline), func() bool {
		syns, fins = tcpOpensAndCloses(t, f.PCAP, "127.0.0.3")
		return fins >= mpa.DefaultMaxPerPeer
	})
	if syns != mpa.DefaultMaxPerPeer || fins != mpa.DefaultMaxPerPeer {
		t.Errorf("the capture has %d connections from 127.0.0.3 opened and %d closed by it, want %d of each", syns, fins, mpa.DefaultMaxPerPeer)
	}
}

// tcpOpensAndCloses counts the SYNs and FINs that from sent in the capture
// at path.
func tcpOpensAndCloses(t *testing.T, path, from string) (syns, fins int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pcapfile.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := r.Next()
		if err != nil {
			return syns, fins
		}
		seg, err := pcapfile.DecodeTCP(p.LinkType, p.Data)
		if err != nil || seg.Src.Addr().String() != from {
			continue
		}
		if seg.Flags&0x02 != 0 && seg.Flags&0x10 == 0 {
			syns++
		}
		if seg.Flags&0x01 != 0 {
			fins++
		}
	}
}
