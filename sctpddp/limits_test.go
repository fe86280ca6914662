//go:build !js

package sctpddp

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/pion/dtls/v3"
)

// listenT listens on loopback with cfg until the test ends.
func listenT(t *testing.T, cfg *Config) *Listener {
	t.Helper()
	l, err := Listen(testCtx(t), "udp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// dialFrom dials addr from the loopback address ip ("" for any). The
// association is closed when the test ends.
func dialFrom(ctx context.Context, t *testing.T, addr string, cfg *Config, ip string) (*Association, error) {
	c := *cfg
	if ip != "" {
		c.localAddr = ip + ":0"
	}
	a, err := Dial(ctx, "udp", addr, &c)
	if err == nil {
		t.Cleanup(func() { _ = a.Close() })
	}
	return a, err
}

// acceptAll accepts every association of l until the test ends.
func acceptAll(t *testing.T, l *Listener) <-chan *Association {
	ch := make(chan *Association, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			a, err := l.Accept(ctx)
			if err != nil {
				return
			}
			ch <- a
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for {
			select {
			case a := <-ch:
				_ = a.Close()
			default:
				return
			}
		}
	})
	return ch
}

func next(t *testing.T, ch <-chan *Association) *Association {
	t.Helper()
	select {
	case a := <-ch:
		t.Cleanup(func() { _ = a.Close() })
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no association accepted")
		return nil
	}
}

// refusals records what Config.Refused hears.
type refusals struct {
	mu  sync.Mutex
	why []error
}

func (r *refusals) hear(_ net.Addr, why error) {
	r.mu.Lock()
	r.why = append(r.why, why)
	r.mu.Unlock()
}

func (r *refusals) count(target error) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.why {
		if errors.Is(w, target) {
			n++
		}
	}
	return n
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	return waitfor.Until(d, cond)
}

// clientHello returns the first datagram of a real DTLS client.
func clientHello(t *testing.T, cli *Config) []byte {
	t.Helper()
	s, err := cli.settings()
	if err != nil {
		t.Fatal(err)
	}
	sink, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, opts := s.dtlsOptions(false, nil)
	conn, err := dtls.ClientWithOptions(pc, sink.LocalAddr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = conn.HandshakeContext(ctx)
	}()
	buf := make([]byte, 2048)
	_ = sink.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := sink.ReadFrom(buf)
	cancel()
	<-done
	_ = conn.Close()
	_ = pc.Close()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf[:n]...)
}

// junk returns a DTLS handshake record header (epoch 0, consistent
// length) followed by random bytes.
func junk(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	b[0], b[1], b[2], b[3], b[4] = dtlsContentHandshake, 0xfe, 0xfd, 0, 0
	binary.BigEndian.PutUint16(b[11:13], uint16(n-dtlsRecordHeaderLen))
	return b
}

func TestIsClientHello(t *testing.T) {
	_, cli := pinnedConfigs(t)
	ch := clientHello(t, cli)
	if !isClientHello(ch) {
		t.Fatalf("pion's ClientHello not recognised: % x", ch[:32])
	}
	psk := clientHello(t, pskConfigs("k", "id"))
	if !isClientHello(psk) {
		t.Fatal("pion's PSK ClientHello not recognised")
	}
	for i := 0; i < 100000; i++ {
		if j := junk(64 + i%1200); isClientHello(j) {
			t.Fatalf("junk taken for a ClientHello: % x", j[:32])
		}
	}
	for _, cut := range []int{0, 1, 13, 25, len(ch) - 1} {
		if isClientHello(ch[:cut]) {
			t.Fatalf("truncated ClientHello (%d of %d) accepted", cut, len(ch))
		}
	}
	bad := append([]byte(nil), ch...)
	bad[4] = 1 // epoch 1
	if isClientHello(bad) {
		t.Fatal("epoch 1 accepted")
	}
	if hasServerHello(ch) {
		t.Fatal("a ClientHello taken for a ServerHello")
	}
	sh := append([]byte(nil), ch...)
	sh[dtlsRecordHeaderLen] = dtlsServerHello
	if !hasServerHello(append(append([]byte(nil), ch...), sh...)) {
		t.Fatal("ServerHello in the second record not found")
	}
}

// The demultiplexer's admission: ClientHellos only, the caps, and
// eviction of the oldest handshake without progress.
func TestMuxEviction(t *testing.T) {
	_, cli := pinnedConfigs(t)
	ch := clientHello(t, cli)
	s, _ := cli.settings()
	s.MaxHandshakes, s.MaxHandshakesPerPeer = 3, 2
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var made []*muxConn
	m := newUDPMux(uc, s, func(c *muxConn) { made = append(made, c) })
	defer func() {
		m.close()
		for _, c := range made {
			_ = c.Close()
		}
		<-m.readDone
	}()
	addr := func(ip byte, port uint16) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, ip}), port)
	}
	closed := func(c *muxConn) bool {
		select {
		case <-c.done:
			return true
		default:
			return false
		}
	}
	m.deliver(addr(2, 1), junk(300))
	if len(made) != 0 || m.notHello.Load() != 1 {
		t.Fatal("junk made a conn")
	}
	m.deliver(addr(2, 1), ch) // A
	m.deliver(addr(2, 2), ch) // B
	m.progress(made[0])       // A answered the cookie exchange
	m.deliver(addr(2, 3), ch) // C: 127.0.0.2 is at its cap; B, its oldest fresh one, goes
	if len(made) != 3 || closed(made[0]) || !closed(made[1]) || m.evicted != 1 {
		t.Fatalf("per-peer eviction: %d made, A closed %v, B closed %v", len(made), closed(made[0]), closed(made[1]))
	}
	m.deliver(addr(2, 3), ch) // a retransmission reaches C
	if len(made) != 3 {
		t.Fatal("a retransmission made a conn")
	}
	m.deliver(addr(3, 1), ch) // D
	m.progress(made[2])
	m.progress(made[3])       // A, C, D answered: 3 in all, 127.0.0.2 holding 2
	m.deliver(addr(4, 1), ch) // E, of a peer holding none: 127.0.0.2's oldest, A, goes
	if len(made) != 5 || !closed(made[0]) || closed(made[2]) || closed(made[3]) || m.evictedAnswered.Load() != 1 {
		t.Fatalf("at the cap with every handshake answered: %d made, A closed %v, C closed %v", len(made), closed(made[0]), closed(made[2]))
	}
	m.progress(made[4])
	m.deliver(addr(3, 2), ch) // every peer holds one: dropped
	if len(made) != 5 || m.dropped.Load() != 1 {
		t.Fatalf("at the cap, every peer holding as many: %d made, %d dropped", len(made), m.dropped.Load())
	}
	checkMux(t, m)
	if !m.established(made[3]) { // D leaves the handshake count
		t.Fatal("D not established")
	}
	m.deliver(addr(3, 2), ch)
	if len(made) != 6 {
		t.Fatal("no room after a handshake completed")
	}
	if hs, _ := m.counts(); hs != 3 {
		t.Fatalf("%d handshaking, want 3", hs)
	}
	if m.established(made[0]) {
		t.Fatal("an evicted handshake established")
	}
	checkMux(t, m)
}

// checkMux checks the demultiplexer's handshake counts against its
// tables.
func checkMux(t *testing.T, m *udpMux) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	total := 0
	for peer, p := range m.peers {
		n, fresh := 0, 0
		var seq uint64
		for c := p.list.head; c != nil; c = c.next {
			n++
			if c.peer != peer || c.seq <= seq || m.conns[c.raddr] != c {
				t.Fatalf("peer %v: conn %v (peer %v, seq %d after %d) misplaced", peer, c.raddr, c.peer, c.seq, seq)
			}
			seq = c.seq
			switch c.state {
			case connFresh:
				fresh++
			case connProgressed:
			default:
				t.Fatalf("peer %v: conn %v in state %d among the handshakes", peer, c.raddr, c.state)
			}
		}
		if n != p.n || fresh != p.fresh || n == 0 || n > m.maxPerPeer {
			t.Fatalf("peer %v: counts %d (%d unanswered), list %d (%d)", peer, p.n, p.fresh, n, fresh)
		}
		total += n
	}
	if total != m.handshaking || m.handshaking > m.maxHandshakes || m.handshaking+m.evicted > 2*m.maxHandshakes {
		t.Fatalf("%d handshaking, %d in the peers' lists, %d evicted (cap %d)", m.handshaking, total, m.evicted, m.maxHandshakes)
	}
}

// muxHarness drives a udpMux with ClientHellos from loopback addresses,
// without pion: windDown closes each evicted conn at once, as pion soon
// does.
type muxHarness struct {
	t        *testing.T
	m        *udpMux
	ch       []byte
	made     []*muxConn
	windDown bool
}

func newMuxHarness(t *testing.T, maxHandshakes, maxPerPeer int, windDown bool) *muxHarness {
	_, cli := pinnedConfigs(t)
	s, _ := cli.settings()
	s.MaxHandshakes, s.MaxHandshakesPerPeer = maxHandshakes, maxPerPeer
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	h := &muxHarness{t: t, ch: clientHello(t, cli), windDown: windDown}
	h.m = newUDPMux(uc, s, func(c *muxConn) { h.made = append(h.made, c) })
	t.Cleanup(func() {
		h.m.close()
		for _, c := range h.made {
			_ = c.Close()
		}
		<-h.m.readDone
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		if h.m.handshaking != 0 || h.m.evicted != 0 || len(h.m.peers) != 0 || len(h.m.conns) != 0 || h.m.refs != 0 {
			t.Errorf("after every conn closed: %d handshaking, %d evicted, %d peers, %d conns, %d refs",
				h.m.handshaking, h.m.evicted, len(h.m.peers), len(h.m.conns), h.m.refs)
		}
	})
	return h
}

// hello delivers a ClientHello from 127.0.0.ip:port and returns the conn
// it made, or nil.
func (h *muxHarness) hello(ip byte, port uint16) *muxConn {
	h.t.Helper()
	n := len(h.made)
	h.m.deliver(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, ip}), port), h.ch)
	if h.windDown {
		for _, c := range h.made {
			if c.isEvicted() {
				_ = c.Close() // a no-op if closed already
			}
		}
	}
	checkMux(h.t, h.m)
	if len(h.made) == n {
		return nil
	}
	return h.made[n]
}

// isEvicted says whether c was evicted, whether or not closed since.
func (c *muxConn) isEvicted() bool { return c.evictedOut.Load() }

// answered says whether c is still handshaking, past the cookie exchange.
func (c *muxConn) answered() bool {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.state == connProgressed
}

// At the total cap with every handshake answered, a ClientHello of a peer
// holding fewer handshakes than the greediest peer evicts the greediest's
// oldest; one of a peer holding as many is dropped; unanswered handshakes
// go first; a peer holding fewer than another never loses one, whatever
// the others send.
func TestMuxFairEviction(t *testing.T) {
	h := newMuxHarness(t, 6, 3, true)
	m := h.m
	// Three peers each answer two handshakes and stall: the cap.
	var stalled []*muxConn
	for ip := byte(2); ip <= 4; ip++ {
		for port := uint16(1); port <= 2; port++ {
			c := h.hello(ip, port)
			m.progress(c)
			stalled = append(stalled, c)
		}
	}
	// A third of 127.0.0.2, below its own cap, holds as many as any
	// other peer: dropped, nothing evicted.
	if h.hello(2, 3) != nil || m.evictions.Load() != 0 || m.dropped.Load() != 1 {
		t.Fatalf("a ClientHello of a peer holding the most: %d evictions, %d dropped", m.evictions.Load(), m.dropped.Load())
	}
	// A genuine client, of a peer holding none: the oldest handshake of
	// the peers holding the most (all of them) goes.
	g := h.hello(9, 1)
	if g == nil || !stalled[0].isEvicted() || m.evictedAnswered.Load() != 1 {
		t.Fatal("the genuine client was not admitted in place of the oldest stalled handshake")
	}
	for _, c := range stalled[1:] {
		if !c.answered() {
			t.Fatal("another stalled handshake evicted")
		}
	}
	// 127.0.0.2, down to one, sends again: the genuine client's
	// unanswered handshake is the only one, but its peer holds fewer
	// than 127.0.0.3 and .4, whose oldest goes instead.
	a2 := h.hello(2, 4)
	if a2 == nil || g.isEvicted() || !stalled[2].isEvicted() {
		t.Fatal("the genuine client's handshake was evicted for a peer holding more")
	}
	// 127.0.0.3, down to one, sends again: of the peers holding the most
	// (.2 and .4), the unanswered handshake goes before the older
	// answered ones.
	c35 := h.hello(3, 5)
	if c35 == nil || !a2.isEvicted() || g.isEvicted() || !stalled[4].answered() || !stalled[1].answered() {
		t.Fatal("an answered handshake evicted before an unanswered one")
	}
	m.progress(c35)
	m.progress(g)
	// The genuine peer, holding one, starts a second handshake: of .3
	// and .4, holding two each, all answered, the oldest goes. Then the
	// genuine peer holds as many as the most (2), and its third is
	// dropped, below its own cap of 3.
	if g2 := h.hello(9, 2); g2 == nil || !stalled[3].isEvicted() || !stalled[4].answered() {
		t.Fatal("the genuine peer's second handshake was not admitted in place of the oldest")
	}
	dropped := m.dropped.Load()
	if h.hello(9, 3) != nil || m.dropped.Load() != dropped+1 {
		t.Fatal("a ClientHello of a peer holding the most was admitted")
	}
	if hs, _ := m.counts(); hs != 6 || m.evictedAnswered.Load() != 3 || m.evictions.Load() != 4 {
		t.Fatalf("%d handshaking, %d evicted of which %d answered; want 6, 4, 3", hs, m.evictions.Load(), m.evictedAnswered.Load())
	}
	// Every peer holding one handshake (the cap is 3): a newcomer evicts
	// the oldest unanswered of all of them, then the oldest answered.
	h2 := newMuxHarness(t, 3, 3, true)
	x, y, z := h2.hello(2, 1), h2.hello(3, 1), h2.hello(4, 1)
	h2.m.progress(x)
	if h2.hello(5, 1) == nil || x.isEvicted() || !y.isEvicted() || z.isEvicted() {
		t.Fatal("every peer holding one: not the oldest unanswered evicted")
	}
	h2.m.progress(z)
	h2.m.progress(h2.made[3])
	if h2.hello(6, 1) == nil || !x.isEvicted() {
		t.Fatal("every peer holding one, all answered: not the oldest evicted")
	}
}

// Evicted handshakes whose pion connection has not closed yet (still
// winding down: here, never) count against a second MaxHandshakes: beyond,
// ClientHellos are dropped and nothing more is evicted, and a slot comes
// back as one of them closes.
func TestMuxEvictedWindingDown(t *testing.T) {
	h := newMuxHarness(t, 3, 3, false)
	m := h.m
	for i := range 20 {
		h.hello(byte(10+i), 1) // spoofed: none answers
	}
	if len(h.made) != 6 || m.evictions.Load() != 3 || m.dropped.Load() != 14 || m.evicted != 3 {
		t.Fatalf("%d made, %d evicted, %d dropped, %d winding down; want 6, 3, 14, 3",
			len(h.made), m.evictions.Load(), m.dropped.Load(), m.evicted)
	}
	_ = h.made[0].Close() // the oldest, evicted, has wound down
	if h.hello(40, 1) == nil || m.evicted != 3 || m.evictions.Load() != 4 {
		t.Fatalf("no room after an evicted handshake closed: %d winding down", m.evicted)
	}
}

// A muxConn's deadlines work as pion's reads and writes expect: a past
// deadline ends a blocked read at once, a zero one lifts it, and queued
// datagrams are bounded.
// muxWithHello makes a udpMux on a loopback socket with cfg's settings
// and delivers it a ClientHello from 127.0.0.1:9; it returns the mux, the
// conn it made for that address, the address and the ClientHello. All is
// closed when the test ends.
func muxWithHello(t *testing.T, cfg *Config) (*udpMux, *muxConn, netip.AddrPort, []byte) {
	t.Helper()
	ch := clientHello(t, cfg)
	s, _ := cfg.settings()
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var c *muxConn
	m := newUDPMux(uc, s, func(n *muxConn) { c = n })
	from := netip.MustParseAddrPort("127.0.0.1:9")
	m.deliver(from, ch)
	if c == nil {
		m.close()
		t.Fatal("no conn for the ClientHello")
	}
	t.Cleanup(func() { m.close(); _ = c.Close(); <-m.readDone })
	return m, c, from, ch
}

func TestMuxConnDeadlinesAndQueue(t *testing.T) {
	_, cli := pinnedConfigs(t)
	m, c, from, ch := muxWithHello(t, cli)
	buf := make([]byte, 2048)
	if n, _, err := c.ReadFrom(buf); err != nil || n != len(ch) {
		t.Fatalf("read %d, %v", n, err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFrom(buf)
		done <- err
	}()
	// The deadline comes while the read waits.
	waitfor.True(t, 5*time.Second, func() bool {
		return waitfor.Blocked("github.com/iwarpgo/iwarp/sctpddp.TestMuxConnDeadlinesAndQueue", "sctpddp.(*muxConn).ReadFrom")
	}, "the read does not wait")
	_ = c.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked read ended with %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a past deadline did not end the read")
	}
	_ = c.SetReadDeadline(time.Time{})
	m.deliver(from, ch)
	if _, _, err := c.ReadFrom(buf); err != nil {
		t.Fatalf("read after the deadline was lifted: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, _, err := c.ReadFrom(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past a deadline: %v", err)
	}
	_ = c.SetWriteDeadline(time.Unix(1, 0))
	if _, err := c.WriteTo(ch, nil); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past a deadline: %v", err)
	}
	// A handshaking address queues at most 64 KiB.
	for range 100 {
		m.deliver(from, ch)
	}
	c.qmu.Lock()
	queued := c.queued
	c.qmu.Unlock()
	if queued > m.handshakeQueue {
		t.Fatalf("%d bytes queued", queued)
	}
	_ = c.Close()
	if _, _, err := c.ReadFrom(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}

// blackHole relays datagrams between one client and a server until cut,
// then drops them: a peer that vanishes without a goodbye.
type blackHole struct {
	pc     net.PacketConn
	server net.Addr
	client atomic.Pointer[net.Addr]
	cut    atomic.Bool
	done   chan struct{}
}

func newBlackHole(t *testing.T, server net.Addr) *blackHole {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &blackHole{pc: pc, server: server, done: make(chan struct{})}
	go r.loop()
	t.Cleanup(func() { _ = pc.Close(); <-r.done })
	return r
}

func (r *blackHole) loop() {
	defer close(r.done)
	buf := make([]byte, 9000)
	for {
		n, from, err := r.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if r.cut.Load() {
			continue
		}
		if from.String() == r.server.String() {
			if c := r.client.Load(); c != nil {
				_, _ = r.pc.WriteTo(buf[:n], *c)
			}
			continue
		}
		r.client.Store(&from)
		_, _ = r.pc.WriteTo(buf[:n], r.server)
	}
}

// A peer that vanishes without a goodbye is found dead within the
// timeout, on both sides, and its session flushes; a healthy idle
// association beside it stays up, kept alive by heartbeats.
func TestDeadPeer(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	const timeout, interval = 600 * time.Millisecond, 100 * time.Millisecond
	for _, c := range []*Config{srv, cli} {
		c.DeadPeerTimeout, c.HeartbeatInterval = timeout, interval
	}
	l := listenT(t, srv)
	accepted := acceptAll(t, l)
	ctx := testCtx(t)
	healthyCli, err := dialFrom(ctx, t, l.Addr().String(), cli, "")
	if err != nil {
		t.Fatal(err)
	}
	healthy := next(t, accepted)
	hole := newBlackHole(t, l.Addr())
	goneCli, err := dialFrom(ctx, t, hole.pc.LocalAddr().String(), cli, "")
	if err != nil {
		t.Fatal(err)
	}
	gone := next(t, accepted)
	if gone.RemoteAddr().String() != hole.pc.LocalAddr().String() {
		gone, healthy = healthy, gone
	}
	// A session on each association, with receives posted on the server's
	// queue pair of the one that will vanish: once set up, a session sends
	// nothing by itself, and one end of an idle association hears the
	// other's heartbeats without sending any of its own.
	hsa := healthy.Sessions(0)
	sessionPair(t, healthy, healthyCli, hsa, 1, newPeer(t, nil), newPeer(t, nil))
	a, b := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, gone, goneCli, gone.Sessions(0), 1, a, b)
	rbuf := b.Reg(t, 64, rdmap.LocalWrite)
	for i := range 3 {
		if err := b.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}}); err != nil {
			t.Fatal(err)
		}
	}

	cut := time.Now()
	hole.cut.Store(true)
	select {
	case <-gone.Done():
	case <-time.After(timeout + 2*time.Second):
		t.Fatal("the server did not find the vanished peer dead")
	}
	took := time.Since(cut)
	t.Logf("dead peer found after %v (timeout %v, heartbeat every %v)", took.Round(time.Millisecond), timeout, interval)
	if took < timeout-interval {
		t.Fatalf("found dead after %v, before the timeout", took)
	}
	if err := gone.Err(); !errors.Is(err, ErrPeerDead) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Err = %v", err)
	}
	for i := range 3 {
		if c := waitC(t, b.RCQ); c.WRID != uint64(i) || c.Status != rdmap.StatusWRFlushErr {
			t.Fatalf("%+v", c)
		}
	}
	if err := b.QP.Err(); !errors.Is(err, rdmap.ErrLLPLost) || !errors.Is(err, ErrPeerDead) {
		t.Fatalf("queue pair error %v", err)
	}
	select {
	case <-goneCli.Done():
		if err := goneCli.Err(); !errors.Is(err, ErrPeerDead) {
			t.Fatalf("client Err = %v", err)
		}
	case <-time.After(timeout + 2*time.Second):
		t.Fatal("the client did not find the server dead")
	}

	// The healthy pair has been idle all along; three timeouts in all.
	time.Sleep(time.Until(cut.Add(3 * timeout)))
	if err := healthy.Err(); err != nil {
		t.Fatalf("healthy association ended: %v", err)
	}
	if err := healthyCli.Err(); err != nil {
		t.Fatalf("healthy client association ended: %v", err)
	}
	sessionPair(t, healthy, healthyCli, hsa, 2, newPeer(t, nil), newPeer(t, nil))
	// Heartbeats are sent only by an end that has sent nothing for an
	// interval, and keep the idle association up without an answer.
	server, client := connect(t, srv, &Config{Certificate: cli.Certificate, PeerFingerprints: cli.PeerFingerprints,
		MTU: LoopbackMTU, DeadPeerTimeout: -1, HeartbeatInterval: interval})
	time.Sleep(3 * timeout)
	if server.Err() != nil || client.Err() != nil {
		t.Fatalf("idle association with a peer that does not detect dead peers ended: %v, %v", server.Err(), client.Err())
	}
}

// The peer's Close ends the association here too, and says so.
func TestPeerCloseEndsAssociation(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if err := client.Err(); err != ErrClosed {
		t.Fatalf("client Err = %v", err)
	}
	select {
	case <-server.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the server's association did not end")
	}
	if err := server.Err(); !errors.Is(err, ErrPeerClosed) || !errors.Is(err, ErrClosed) {
		t.Fatalf("server Err = %v", err)
	}
	if _, err := server.OpenStream(1); !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("OpenStream: %v", err)
	}
}

// A hostile client at its association limit is refused at once and
// clearly, and never locks out a well-behaved one; a slot comes back when
// one of its associations ends.
func TestAssociationLimits(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var heard refusals
	srv.MaxAssociationsPerPeer, srv.MaxAssociations, srv.Refused = 2, 3, heard.hear
	l := listenT(t, srv)
	accepted := acceptAll(t, l)
	before := measure()
	ctx := testCtx(t)
	addr := l.Addr().String()
	var hostile []*Association
	for range 2 {
		a, err := dialFrom(ctx, t, addr, cli, "127.0.0.2")
		if err != nil {
			t.Fatal(err)
		}
		hostile = append(hostile, a)
		next(t, accepted)
	}
	start := time.Now()
	_, err := dialFrom(ctx, t, addr, cli, "127.0.0.2")
	if err == nil || !strings.Contains(err.Error(), "association limit") {
		t.Fatalf("third association of one peer: %v", err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if time.Since(start) > 3*time.Second {
		t.Fatal("the refusal took too long")
	}
	if heard.count(ErrTooManyAssociations) != 1 {
		t.Fatalf("Refused heard %v", heard.why)
	}
	// Another peer still gets in.
	good, err := dialFrom(ctx, t, addr, cli, "127.0.0.1")
	if err != nil {
		t.Fatalf("well-behaved peer locked out: %v", err)
	}
	exchange(t, next(t, accepted), good, 1)
	// The Listener is full (3). A third address takes the place of the
	// oldest association of the peer holding the most (127.0.0.2, two
	// more than it), which carries no session.
	third, err := dialFrom(ctx, t, addr, cli, "127.0.0.3")
	if err != nil {
		t.Fatalf("a new peer beside another's idle associations: %v", err)
	}
	next(t, accepted)
	if !waitFor(5*time.Second, func() bool { return hostile[0].Err() != nil }) || hostile[1].Err() != nil {
		t.Fatalf("the greediest peer's associations: %v, %v; want the oldest ended", hostile[0].Err(), hostile[1].Err())
	}
	if heard.count(ErrAssociationEvicted) != 1 {
		t.Fatalf("Refused heard %v", heard.why)
	}
	// Every peer holds one: a fourth address is refused.
	if _, err := dialFrom(ctx, t, addr, cli, "127.0.0.4"); err == nil {
		t.Fatal("association beyond MaxAssociations")
	}
	// One association ends: its slot comes back.
	_ = third.Close()
	var again *Association
	if !waitFor(5*time.Second, func() bool {
		again, err = dialFrom(ctx, t, addr, cli, "127.0.0.2")
		return err == nil
	}) {
		t.Fatalf("no slot after an association ended: %v", err)
	}
	next(t, accepted)
	_ = again.Close()
	_ = hostile[1].Close()
	_ = good.Close()
	after := settle(t, before.goroutines)
	t.Logf("before: %v; after: %v", before, after)
	if after.goroutines > before.goroutines || after.heap > before.heap+8<<20 {
		t.Errorf("not all came back: before %v, after %v", before, after)
	}
}

// An association the application does not accept in time is closed.
func TestAssociationAcceptTimeout(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var heard refusals
	srv.AcceptTimeout, srv.Refused = 300*time.Millisecond, heard.hear
	l := listenT(t, srv)
	ctx := testCtx(t)
	a, err := dialFrom(ctx, t, l.Addr().String(), cli, "")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the unaccepted association stayed open")
	}
	if !errors.Is(a.Err(), ErrPeerClosed) || heard.count(ErrAcceptTimeout) != 1 {
		t.Fatalf("client Err %v; Refused heard %v", a.Err(), heard.why)
	}
	// The Listener still accepts.
	server, client := connect(t, srv, cli)
	exchange(t, server, client, 2)
}

// newQP returns a queue pair of its own protection domain on dev.
func newQP(dev *rdmap.Device) *rdmap.QueuePair {
	qp, err := dev.NewProtectionDomain().NewQueuePair(rdmap.QPConfig{SendCQ: dev.NewCompletionQueue(16), RecvCQ: dev.NewCompletionQueue(16)})
	if err != nil {
		panic(err)
	}
	return qp
}

func closeQP(qp *rdmap.QueuePair) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = qp.Close(ctx)
}

// serveSessions accepts every session request of a, as `iwarp serve`
// does, each with the next of qps, and returns the sessions so far.
func serveSessions(a *Association, qps []*rdmap.QueuePair) func() []*Session {
	sa := a.Sessions(0)
	var mu sync.Mutex
	var out []*Session
	go func() {
		for i := 0; i < len(qps); i++ {
			r, err := sa.Accept(context.Background())
			if err != nil {
				return
			}
			s, err := r.Accept(qps[i], SessionConfig{})
			if err == nil {
				mu.Lock()
				out = append(out, s)
				mu.Unlock()
			}
		}
	}()
	return func() []*Session {
		mu.Lock()
		defer mu.Unlock()
		return append([]*Session(nil), out...)
	}
}

// Session limits: a hostile peer that opens sessions beyond its limits,
// or leaves requests pending, is answered with Terminates; another peer
// still opens sessions, and what the server holds comes back.
func TestSessionLimits(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var heard refusals
	srv.MaxSessions, srv.MaxPeerSessions, srv.MaxPendingSessions, srv.Refused = 3, 4, 2, heard.hear
	srv.AcceptTimeout = 300 * time.Millisecond
	l := listenT(t, srv)
	accepted := acceptAll(t, l)
	before := measure()
	// The attack runs in a function of its own, so that nothing of it
	// stays reachable from here when memory is measured after it.
	during := sessionAttack(t, l, accepted, cli, &heard)
	// Every count comes back to zero once the sessions are closed.
	if !waitFor(5*time.Second, func() bool {
		l.sessions.mu.Lock()
		defer l.sessions.mu.Unlock()
		return l.sessions.total == 0
	}) {
		t.Fatalf("the Listener still counts %d sessions", l.sessions.total)
	}
	after := settle(t, before.goroutines)
	t.Logf("before: %v; under attack: %v; after: %v", before, during, after)
	if after.heap > before.heap+8<<20 {
		t.Errorf("heap in use: %v before, %v after", before, after)
	}
	if after.goroutines > before.goroutines {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines left:\n%s", buf[:runtime.Stack(buf, true)])
	}
}

func sessionAttack(t *testing.T, l *Listener, accepted <-chan *Association, cli *Config, heard *refusals) usage {
	ctx := testCtx(t)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	qps := make([]*rdmap.QueuePair, 20)
	for i := range qps {
		qps[i] = newQP(dev)
	}
	srvQPs, cliQPs := qps[:10], qps[10:]
	dial := func(ip string) (client, server *Association) {
		t.Helper()
		c, err := dialFrom(ctx, t, l.Addr().String(), cli, ip)
		if err != nil {
			t.Fatal(err)
		}
		return c, next(t, accepted)
	}
	connect := func(a *Association, id uint16) error {
		_, err := Connect(ctx, a, id, cliQPs[0], SessionConfig{})
		if err == nil {
			cliQPs = cliQPs[1:]
		}
		return err
	}

	hostileCli, hostile := dial("127.0.0.2")
	hostileSessions := serveSessions(hostile, srvQPs[:5])
	for i := range 3 {
		if err := connect(hostileCli, uint16(10+i)); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	if err := connect(hostileCli, 20); !errors.Is(err, ErrSessionTerminated) {
		t.Fatalf("session beyond MaxSessions: %v", err)
	}
	if heard.count(ErrTooManySessions) != 1 {
		t.Fatalf("Refused heard %v", heard.why)
	}
	// A session closed on the server gives its slot back.
	_ = hostileSessions()[0].Close()
	if err := connect(hostileCli, 21); err != nil {
		t.Fatalf("no slot after a session closed: %v", err)
	}
	// A second association of the same address reaches MaxPeerSessions.
	hostileCli2, hostile2 := dial("127.0.0.2")
	serveSessions(hostile2, srvQPs[5:7])
	if err := connect(hostileCli2, 10); err != nil {
		t.Fatal(err)
	}
	if err := connect(hostileCli2, 11); !errors.Is(err, ErrSessionTerminated) {
		t.Fatalf("session beyond MaxPeerSessions: %v", err)
	}
	if heard.count(ErrTooManySessions) != 2 {
		t.Fatalf("Refused heard %v", heard.why)
	}
	// Another peer is not affected.
	goodCli, good := dial("127.0.0.1")
	serveSessions(good, srvQPs[7:8])
	if err := connect(goodCli, 1); err != nil {
		t.Fatalf("well-behaved peer's session: %v", err)
	}

	// Pending requests: an acceptor whose application never decides
	// holds MaxPendingSessions of them; more are refused at once, and the
	// pending ones are refused after AcceptTimeout.
	pendingCli, pendingSrv := dial("127.0.0.3")
	pendingSrv.Sessions(0)
	var streams []*Stream
	for i := range 3 {
		st, err := pendingCli.OpenStream(uint16(30 + i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionInitiate}); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
		time.Sleep(30 * time.Millisecond)
	}
	expectTerminate := func(st *Stream) {
		t.Helper()
		buf := make([]byte, 2048)
		n, ppid, err := st.ReadMessage(testCtx(t), buf)
		if err != nil || ppid != wire.PPIDSessionControl {
			t.Fatalf("%v %v", ppid, err)
		}
		if m, _, _ := wire.ParseSessionControl(buf[:n]); m.Function != wire.FunctionTerminate {
			t.Fatalf("reply %v", m.Function)
		}
	}
	expectTerminate(streams[2])
	if heard.count(ErrTooManyPendingSessions) != 1 {
		t.Fatalf("Refused heard %v", heard.why)
	}
	expectTerminate(streams[0])
	expectTerminate(streams[1])
	if heard.count(ErrAcceptTimeout) != 2 {
		t.Fatalf("Refused heard %v", heard.why)
	}

	during := measure()
	for _, a := range []*Association{hostileCli, hostileCli2, goodCli, pendingCli} {
		_ = a.Close()
	}
	for _, a := range []*Association{hostile, hostile2, good, pendingSrv} {
		_ = a.Close()
	}
	for _, qp := range qps {
		closeQP(qp)
	}
	return during
}

// flooder sends datagrams to a target from many sockets on 127.0.0.x
// addresses, as spoofed sources would: none ever answers.
type flooder struct {
	socks []*net.UDPConn
	sent  atomic.Uint64
	stop  chan struct{}
	wg    sync.WaitGroup
}

// newFlooder binds ports sockets on each of addrs addresses from
// 127.0.0.first.
func newFlooder(t *testing.T, first, addrs, ports int) *flooder {
	f := &flooder{stop: make(chan struct{})}
	for ip := first; ip < first+addrs; ip++ {
		for range ports {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(ip))})
			if err != nil {
				f.close()
				t.Skipf("cannot bind 127.0.0.%d: %v", ip, err)
			}
			f.socks = append(f.socks, c)
		}
	}
	t.Cleanup(f.close)
	return f
}

// run sends payload(i) at rate datagrams a second, each from the next
// socket in turn, until close.
func (f *flooder) run(to *net.UDPAddr, rate int, payload func(i int) []byte) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		const tick = 2 * time.Millisecond
		per := max(1, rate*int(tick)/int(time.Second))
		tk := time.NewTicker(tick)
		defer tk.Stop()
		i := 0
		for {
			select {
			case <-f.stop:
				return
			case <-tk.C:
			}
			for range per {
				if _, err := f.socks[i%len(f.socks)].WriteToUDP(payload(i), to); err == nil {
					f.sent.Add(1)
				}
				i++
			}
		}
	}()
}

func (f *flooder) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
	for _, c := range f.socks {
		_ = c.Close()
	}
	f.socks = nil
}

// peak samples the heap in use and the goroutines until stop.
type peak struct {
	heap       atomic.Uint64
	goroutines atomic.Int64
	stop, done chan struct{}
}

func samplePeak() *peak {
	p := &peak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > p.heap.Load() {
				p.heap.Store(ms.HeapInuse)
			}
			if g := int64(runtime.NumGoroutine()); g > p.goroutines.Load() {
				p.goroutines.Store(g)
			}
			select {
			case <-p.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return p
}

func (p *peak) end() usage {
	close(p.stop)
	<-p.done
	return usage{p.heap.Load(), int(p.goroutines.Load())}
}

// A flood of datagrams from spoofed sources, half of them DTLS handshake
// record headers with random bytes and half real ClientHellos, from 512
// source addresses on 16 IP addresses: a genuine client still connects
// during it, and the memory and goroutines it costs stay bounded and come
// back.
func TestHandshakeFlood(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	// Handshakes left without progress when the flood stops expire
	// sooner than by default.
	srv.HandshakeTimeout = time.Second
	l := listenT(t, srv)
	accepted := acceptAll(t, l)
	hello := clientHello(t, cli)
	junks := make([][]byte, 256)
	for i := range junks {
		junks[i] = junk(100 + 5*i)
	}
	f := newFlooder(t, 2, 16, 32)
	before := measure()
	pk := samplePeak()
	to := l.Addr().(*net.UDPAddr)
	rate := 10000 // of each kind, a second
	if r, err := strconv.Atoi(os.Getenv("SCTPDDP_FLOOD_RATE")); err == nil {
		rate = r
	}
	f.run(to, rate, func(i int) []byte { return junks[i%len(junks)] })
	f.run(to, rate, func(int) []byte { return hello })
	// The genuine client comes once half a second of the flood is in.
	if !waitFor(10*time.Second, func() bool { return f.sent.Load() >= uint64(rate) }) {
		t.Fatalf("the flood sent %d datagrams, not half a second's %d", f.sent.Load(), rate)
	}

	start := time.Now()
	ctx := testCtx(t)
	client, err := dialFrom(ctx, t, to.String(), cli, "127.0.0.1")
	if err != nil {
		t.Fatalf("genuine client locked out by the flood: %v", err)
	}
	took := time.Since(start)
	server := next(t, accepted)
	exchange(t, server, client, 1)
	time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
	f.close()
	during := pk.end()
	m := l.mux
	t.Logf("flood: %d datagrams in 2 s; %d ClientHellos admitted, %d evicted, %d dropped at the caps, %d other datagrams dropped",
		f.sent.Load(), m.created.Load(), m.evictions.Load(), m.dropped.Load(), m.notHello.Load())
	t.Logf("genuine Dial took %v during the flood", took.Round(time.Millisecond))
	// Of the ClientHellos, those of a peer holding as many handshakes as
	// any are dropped at the cap rather than admitted.
	if m.created.Load()+m.dropped.Load() < 1000 || m.notHello.Load() < 1000 {
		t.Fatalf("the flood did not reach the Listener")
	}
	// Handshakes without progress expire.
	if !waitFor(srv.HandshakeTimeout+3*time.Second, func() bool { hs, _ := m.counts(); return hs == 0 }) {
		hs, _ := m.counts()
		t.Fatalf("%d handshakes still counted after the flood", hs)
	}
	_ = client.Close()
	_ = server.Close()
	after := settle(t, before.goroutines)
	t.Logf("before: %v; peak during the flood: %v; after: %v", before, during, after)
	const maxHeap = 64 << 20
	if during.heap > before.heap+maxHeap {
		t.Errorf("heap grew by %d MiB during the flood", (during.heap-before.heap)>>20)
	}
	// A handshake runs a few goroutines (ours, pion's handshake and
	// reader); at most MaxHandshakes run at once, and as many evicted
	// ones winding down.
	if limit := before.goroutines + 2*6*DefaultMaxHandshakes + 50; during.goroutines > limit {
		t.Errorf("%d goroutines during the flood, more than %d", during.goroutines, limit)
	}
	if after.heap > before.heap+8<<20 {
		t.Errorf("heap after the flood %v, before %v", after, before)
	}
}

// A peer that starts more streams than MaxStreams loses its association.
func TestTooManyStreams(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var heard refusals
	srv.MaxStreams, srv.Refused = 20, heard.hear
	server, client := connect(t, srv, cli)
	server.Sessions(0)
	ctx := testCtx(t)
	for i := range 21 {
		st, err := client.OpenStream(uint16(100 + i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionInitiate}); err != nil {
			break // the server closed the association already
		}
	}
	select {
	case <-server.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the association survived")
	}
	if !errors.Is(server.Err(), ErrTooManyStreams) || heard.count(ErrTooManyStreams) != 1 {
		t.Fatalf("Err %v; Refused heard %v", server.Err(), heard.why)
	}
}

// Once its DTLS handshake has completed, an address queues up to
// 2 × MaxReceiveBufferSize between the socket and DTLS (a well-behaved
// peer has at most the receive window in flight), not the 64 KiB of a
// handshake; beyond that its datagrams are dropped, as a full socket
// buffer would drop them.
func TestMuxConnEstablishedQueue(t *testing.T) {
	_, cli := pinnedConfigs(t)
	cli.MaxReceiveBufferSize = 256 << 10
	m, c, from, _ := muxWithHello(t, cli)
	if !m.established(c) {
		t.Fatal("the conn could not be established")
	}
	d := make([]byte, 1200)
	for range 1000 { // 1.2 MB offered, more than 2 × 256 KiB
		m.deliver(from, d)
	}
	c.qmu.Lock()
	queued := c.queued
	c.qmu.Unlock()
	limit := 2 * int(cli.MaxReceiveBufferSize)
	if queued > limit || queued <= m.handshakeQueue || queued < limit*3/4 {
		t.Fatalf("%d bytes queued after the handshake; want at most and near %d, above the handshake's %d", queued, limit, m.handshakeQueue)
	}
}
