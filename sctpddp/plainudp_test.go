//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pion "github.com/pion/sctp"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/internal/tshark"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/sctpddp/sctp"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// plainConfigs returns a Listener's and a Dial's Config over plain UDP.
func plainConfigs() (srv, cli *Config) {
	return &Config{InsecurePlainUDP: true, MTU: LoopbackMTU}, &Config{InsecurePlainUDP: true, MTU: LoopbackMTU}
}

// tracedPacket is one SCTP packet a Config.Trace saw.
type tracedPacket struct {
	outbound bool
	b        []byte
}

// packetLog collects the packets of Config.Trace.
type packetLog struct {
	mu  sync.Mutex
	pkt []tracedPacket
}

func (l *packetLog) trace(_ net.Addr, outbound bool, b []byte) {
	l.mu.Lock()
	l.pkt = append(l.pkt, tracedPacket{outbound, bytes.Clone(b)})
	l.mu.Unlock()
}

func (l *packetLog) packets() []tracedPacket {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]tracedPacket(nil), l.pkt...)
}

// find returns the first packet of the direction whose first chunk is t.
func (l *packetLog) find(outbound bool, t chunk.Type) []byte {
	for _, p := range l.packets() {
		if p.outbound == outbound && len(p.b) > chunk.HeaderLen && chunk.Type(p.b[chunk.HeaderLen]) == t {
			return p.b
		}
	}
	return nil
}

// writePcap writes the packets as the UDP datagrams (RFC 6951 §5.2)
// between local and remote, in raw IP packets.
func (l *packetLog) writePcap(t *testing.T, path string, local, remote netip.AddrPort) {
	t.Helper()
	f, err := pcapfile.CreateFile(path, pcapfile.LinkRaw)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now()
	for i, p := range l.packets() {
		src, dst := local, remote
		if !p.outbound {
			src, dst = remote, local
		}
		ip := pcapfile.AppendIPHeader(nil, src.Addr(), dst.Addr(), pcapfile.ProtoUDP, uint16(i), 8+len(p.b))
		ip = binary.BigEndian.AppendUint16(ip, src.Port())
		ip = binary.BigEndian.AppendUint16(ip, dst.Port())
		ip = binary.BigEndian.AppendUint16(ip, uint16(8+len(p.b)))
		ip = append(ip, 0, 0) // no UDP checksum (IPv4)
		if err := f.WritePacket(ts.Add(time.Duration(i)*time.Microsecond), append(ip, p.b...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func addrPortOf(a net.Addr) netip.AddrPort {
	u := a.(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(u.Addr().Unmap(), u.Port())
}

// TestPlainUDPSession runs DDP Stream Sessions over plain UDP (RFC 6951),
// one started by each end on its own stream, every RDMAP operation on
// each with every byte checked, and has tshark dissect the capture with
// docs/wireshark/ddp-sctp.lua: no malformed packet, the CRC32c good on
// every packet, the Adaptation Layer Indication of RFC 5043 in the INIT
// and the INIT ACK, and the DDP and RDMAP fields decoded.
func TestPlainUDPSession(t *testing.T) {
	checkGoroutines(t)
	srv, cli := plainConfigs()
	var log packetLog
	cli.Trace = log.trace
	server, client := connect(t, srv, cli)
	if server.PeerCertificate() != nil || client.PeerCertificate() != nil {
		t.Error("a plain-UDP association has a peer certificate")
	}
	a, b := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, server.Sessions(0), 1, a, b)
	c, d := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, client, server, client.Sessions(0), 2, c, d)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); rdmaptest.Exercise(t, a, b) }()
	go func() { defer wg.Done(); rdmaptest.Exercise(t, c, d) }()
	wg.Wait()
	local, remote := addrPortOf(client.LocalAddr()), addrPortOf(client.RemoteAddr())
	if err := client.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, p := range log.packets() {
		if chunk.Header(p.b).Checksum() == 0 || chunk.VerifyChecksum(p.b) != nil {
			t.Fatalf("packet without its CRC32c over plain UDP: % x", p.b[:min(len(p.b), 32)])
		}
	}

	ts, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (scripts/test.sh installs it)")
	}
	path := filepath.Join(t.TempDir(), "plain.pcap")
	log.writePcap(t, path, local, remote)
	lua, _ := filepath.Abs(filepath.Join("..", "docs", "wireshark", "ddp-sctp.lua"))
	run := func(args ...string) string {
		t.Helper()
		all := append([]string{"-n", "-r", path, "-d", "udp.port==" + strconv.Itoa(int(remote.Port())) + ",sctp",
			"-o", "sctp.checksum:CRC 32c", "-X", "lua_script:" + lua}, tshark.Args...)
		cmd := exec.Command(ts, append(all, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tshark %v: %v\n%s", args, err, stderr.String())
		}
		if strings.Contains(strings.ToLower(stderr.String()), "lua") {
			t.Fatalf("tshark reports a Lua problem:\n%s", stderr.String())
		}
		return string(out)
	}
	verbose := run("-V")
	for _, bad := range []string{"Malformed", "Lua Error", "Dissector bug", "[Expert Info (Error"} {
		if i := strings.Index(verbose, bad); i >= 0 {
			t.Errorf("tshark -V shows %q: ...%s...", bad, verbose[max(0, i-300):min(len(verbose), i+200)])
		}
	}
	count := func(filter string) int {
		return len(strings.Fields(run("-Y", filter, "-T", "fields", "-e", "frame.number")))
	}
	total, good := count("sctp"), count("sctp.checksum.status == 1")
	if total != len(log.packets()) || good != total {
		t.Errorf("tshark: %d SCTP packets of %d captured, %d with a good CRC32c", total, len(log.packets()), good)
	}
	for _, filter := range []string{
		"sctp.chunk_type == 1 && sctp.adaptation_layer_indication == 0x00000001", // INIT, RFC 5043's code point
		"sctp.chunk_type == 2 && sctp.adaptation_layer_indication == 0x00000001", // INIT ACK
		"ddp_sctp.function == 5", // Enhanced Initiate
		"ddp_sctp.function == 6", // Enhanced Accept
		"iwarp_ddp.tagged_flag == 1 && iwarp_rdma.opcode == 0 && iwarp_ddp.stag", // RDMA Write
		"iwarp_rdma.opcode == 1 && iwarp_rdma.srcstag",                           // RDMA Read Request
		"iwarp_rdma.opcode == 2",                                                 // RDMA Read Response
		"iwarp_rdma.opcode == 3 && iwarp_ddp.msn >= 1",                           // Send
	} {
		if count(filter) == 0 {
			t.Errorf("no packet matches %q", filter)
		}
	}
}

// TestPlainUDPConfig checks that InsecurePlainUDP is an authentication
// choice of its own and that a plain-UDP Listener needs no certificate.
func TestPlainUDPConfig(t *testing.T) {
	cert, fp := mustCert(t)
	for _, c := range []*Config{
		{InsecurePlainUDP: true, PSK: []byte("k"), PSKIdentity: []byte("i")},
		{InsecurePlainUDP: true, PeerFingerprints: []Fingerprint{fp}, Certificate: &cert},
		{InsecurePlainUDP: true, InsecureSkipPeerVerification: true, Certificate: &cert},
		{InsecurePlainUDP: true, AcceptAnyClient: true, Certificate: &cert},
	} {
		_, err := Dial(context.Background(), "udp", "127.0.0.1:9", c)
		if !errors.Is(err, ErrConfig) || !errors.Is(err, ErrPlainUDPWithAuth) {
			t.Errorf("Dial %+v: %v, want ErrPlainUDPWithAuth", c, err)
		}
		if _, err := Listen(context.Background(), "udp", "127.0.0.1:0", c); !errors.Is(err, ErrPlainUDPWithAuth) {
			t.Errorf("Listen: %v, want ErrPlainUDPWithAuth", err)
		}
	}
	_, err := Listen(context.Background(), "udp", "127.0.0.1:0", &Config{InsecurePlainUDP: true, PionSCTP: true})
	if !errors.Is(err, ErrConfig) || !errors.Is(err, ErrPlainUDPPionListener) {
		t.Errorf("Listen with PionSCTP: %v", err)
	}
	l, err := Listen(context.Background(), "udp", "127.0.0.1:0", &Config{InsecurePlainUDP: true})
	if err != nil {
		t.Fatalf("Listen without a certificate: %v", err)
	}
	_ = l.Close()
}

// TestPlainUDPUnreachable checks that a plain-UDP Dial to a port nothing
// listens on fails at once with ErrUnreachable, by the ICMP Port
// Unreachable, as over DTLS.
func TestPlainUDPUnreachable(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	_ = pc.Close()
	start := time.Now()
	_, err = Dial(testCtx(t), "udp", addr, &Config{InsecurePlainUDP: true})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Dial: %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Dial took %v to find nothing listening", d)
	}
}

// abortCause returns the first error cause of the ABORT that pkt holds.
func abortOf(t *testing.T, pkt []byte) (chunk.Abort, chunk.CauseCode, []byte) {
	t.Helper()
	it := chunk.Chunks(pkt)
	if !it.Next() {
		t.Fatalf("no chunk in % x", pkt)
	}
	ab, _, err := chunk.ParseAbort(it.Chunk())
	if err != nil {
		t.Fatal(err)
	}
	cs := chunk.Causes(ab.Causes)
	if !cs.Next() {
		return ab, 0, nil
	}
	return ab, cs.Cause().Code(), cs.Cause().Info()
}

// initiateTag returns the Initiate Tag of an INIT or INIT ACK packet.
func initiateTag(pkt []byte) uint32 {
	return binary.BigEndian.Uint32(pkt[chunk.HeaderLen+4:])
}

// TestPlainUDPRefusesPion associates with pion/sctp over plain UDP in
// both roles. pion sends no Adaptation Layer Indication, and RFC 5043
// §11.1's table says of a peer without one: "NONE: This indicates that
// the peer DOES NOT support ANY DDP or RDMA adaptation, and thus RDMA and
// DDP procedures MUST NOT be performed upon this association"; §7.1 adds
// that an endpoint "SHOULD terminate all requests to establish an
// association with any different Adaptation Indication". So no DDP
// Stream Session is possible, and the association is refused: this end
// answers pion's INIT, or its INIT ACK, with an ABORT to its Initiate
// Tag, T bit clear, holding a User-Initiated Abort cause that says why.
func TestPlainUDPRefusesPion(t *testing.T) {
	checkGoroutines(t)
	const reason = "RFC 5043: DDP Adaptation Layer Indication required"
	t.Run("PionDials", func(t *testing.T) {
		srv, cli := plainConfigs()
		cli.PionSCTP = true
		var log packetLog
		cli.Trace = log.trace
		l, err := Listen(testCtx(t), "udp", "127.0.0.1:0", srv)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
		defer cancel()
		if _, err := Dial(ctx, "udp", l.Addr().String(), cli); err == nil {
			t.Fatal("pion/sctp associated with package sctp over plain UDP")
		}
		init, abort := log.find(true, chunk.TypeInit), log.find(false, chunk.TypeAbort)
		if init == nil || abort == nil {
			t.Fatalf("INIT %x, ABORT %x", init, abort)
		}
		ab, cause, info := abortOf(t, abort)
		if vt := chunk.Header(abort).VerificationTag(); vt != initiateTag(init) || ab.T {
			t.Errorf("ABORT with tag %#x T %v, the INIT's Initiate Tag is %#x", vt, ab.T, initiateTag(init))
		}
		if cause != chunk.CauseUserInitiatedAbort || string(info) != reason {
			t.Errorf("ABORT cause %v %q", cause, info)
		}
		if _, conns := l.mux.counts(); conns != 0 || l.mux.created.Load() != 0 {
			t.Errorf("the Listener holds %d conns, created %d", conns, l.mux.created.Load())
		}
	})
	t.Run("PionListens", func(t *testing.T) {
		pconn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer pconn.Close()
		// pion/sctp runs on a net.Conn: the first datagram names the
		// client the socket then answers.
		done := make(chan error, 1)
		go func() {
			a, err := pion.ServerWithOptions(pion.WithNetConn(&firstPeerConn{UDPConn: pconn}))
			if err == nil {
				_ = a.Close()
				err = errors.New("pion established")
			}
			done <- err
		}()
		_, cli := plainConfigs()
		var log packetLog
		cli.Trace = log.trace
		_, err = Dial(testCtx(t), "udp", pconn.LocalAddr().String(), cli)
		if !errors.Is(err, sctp.ErrPeerAdaptation) {
			t.Fatalf("Dial: %v, want sctp.ErrPeerAdaptation", err)
		}
		initAck, abort := log.find(false, chunk.TypeInitAck), log.find(true, chunk.TypeAbort)
		if initAck == nil || abort == nil {
			t.Fatalf("INIT ACK %x, ABORT %x", initAck, abort)
		}
		ab, cause, info := abortOf(t, abort)
		if vt := chunk.Header(abort).VerificationTag(); vt != initiateTag(initAck) || ab.T {
			t.Errorf("ABORT with tag %#x T %v, the INIT ACK's Initiate Tag is %#x", vt, ab.T, initiateTag(initAck))
		}
		if cause != chunk.CauseUserInitiatedAbort || string(info) != reason {
			t.Errorf("ABORT cause %v %q", cause, info)
		}
		_ = pconn.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("pion's server did not end")
		}
	})
}

// firstPeerConn is a net.Conn over a UDP socket whose peer is the source
// of the first datagram read.
type firstPeerConn struct {
	*net.UDPConn
	mu   sync.Mutex
	peer netip.AddrPort
}

func (c *firstPeerConn) Read(b []byte) (int, error) {
	for {
		n, from, err := c.ReadFromUDPAddrPort(b)
		if err != nil {
			return n, err
		}
		c.mu.Lock()
		if !c.peer.IsValid() {
			c.peer = from
		}
		ok := c.peer == from
		c.mu.Unlock()
		if ok {
			return n, nil
		}
	}
}

func (c *firstPeerConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	p := c.peer
	c.mu.Unlock()
	return c.WriteToUDPAddrPort(b, p)
}

func (c *firstPeerConn) RemoteAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return net.UDPAddrFromAddrPort(c.peer)
}
