//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/dtls/v3"
)

// stallConn is a DTLS client's socket that sends its ClientHellos (the
// first, and the one echoing the HelloVerifyRequest's cookie) and nothing
// after: a client whose address is its own, that answers the cookie
// exchange and then stalls, as an attacker holding handshake slots does.
type stallConn struct{ net.PacketConn }

func (c stallConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	if !isClientHello(p) {
		return len(p), nil
	}
	return c.PacketConn.WriteTo(p, addr)
}

// stallers start stalling handshakes with a Listener until the test ends.
type stallers struct {
	t      *testing.T
	to     net.Addr
	opts   []dtls.ClientOption
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newStallers(t *testing.T, to net.Addr, cli *Config) *stallers {
	s, err := cli.settings()
	if err != nil {
		t.Fatal(err)
	}
	_, opts := s.dtlsOptions(false, nil)
	st := &stallers{t: t, to: to, opts: opts}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { st.cancel(); st.wg.Wait() })
	return st
}

// start begins a handshake from a new port of ip that stalls after the
// cookie exchange, until the test ends.
func (st *stallers) start(ip string) {
	pc, err := net.ListenPacket("udp", ip+":0")
	if err != nil {
		st.t.Skipf("cannot bind %s: %v", ip, err)
	}
	conn, err := dtls.ClientWithOptions(stallConn{pc}, st.to, st.opts...)
	if err != nil {
		_ = pc.Close()
		st.t.Fatal(err)
	}
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		_ = conn.HandshakeContext(st.ctx)
		_ = conn.Close()
		_ = pc.Close()
	}()
}

// delayRelay forwards UDP datagrams between one client and a server,
// each after a delay: a client a round trip of 2 × delay away, as over the
// Internet, rather than loopback's few microseconds.
type delayRelay struct {
	conn     *net.UDPConn
	server   *net.UDPAddr
	client   atomic.Pointer[net.UDPAddr]
	toServer chan delayed
	toClient chan delayed
	delay    time.Duration
	wg       sync.WaitGroup
}

type delayed struct {
	at  time.Time
	pkt []byte
}

func newDelayRelay(t *testing.T, server net.Addr, delay time.Duration) *delayRelay {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &delayRelay{conn: c, server: server.(*net.UDPAddr), delay: delay,
		toServer: make(chan delayed, 1024), toClient: make(chan delayed, 1024)}
	r.wg.Add(3)
	go r.read()
	go r.send(r.toServer, func() *net.UDPAddr { return r.server })
	go r.send(r.toClient, r.client.Load)
	t.Cleanup(func() { _ = c.Close(); r.wg.Wait() })
	return r
}

func (r *delayRelay) read() {
	defer r.wg.Done()
	defer close(r.toServer)
	defer close(r.toClient)
	buf := make([]byte, 65536)
	for {
		n, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		d := delayed{time.Now().Add(r.delay), append([]byte(nil), buf[:n]...)}
		ch := r.toServer
		if from.Port == r.server.Port && from.IP.Equal(r.server.IP) {
			ch = r.toClient
		} else {
			r.client.Store(from)
		}
		select {
		case ch <- d:
		default: // a full path drops
		}
	}
}

func (r *delayRelay) send(ch <-chan delayed, to func() *net.UDPAddr) {
	defer r.wg.Done()
	for d := range ch {
		time.Sleep(time.Until(d.at))
		if a := to(); a != nil {
			_, _ = r.conn.WriteToUDP(d.pkt, a)
		}
	}
}

// answered counts the Listener's handshakes past the cookie exchange.
func (m *udpMux) answered() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.conns {
		if c.state == connProgressed {
			n++
		}
	}
	return n
}

// A few addresses that answer the cookie exchange and then stall hold
// every DTLS handshake slot of a Listener (3 addresses × 2 per peer = 6,
// its MaxHandshakes), and keep starting more handshakes, every 10 ms: a
// genuine client from another address, 50 ms of round trip away, still
// completes Dial, DTLS, SCTP and a DDP session, at once, well within the
// handshake timeout. The stalled handshake evicted for it is reported
// (ErrTooManyHandshakes), the handshake count never exceeds the cap, and
// the evicted handshakes' goroutines end.
func TestStalledHandshakesDoNotLockOut(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var heard refusals
	srv.MaxHandshakes, srv.MaxHandshakesPerPeer, srv.Refused = 6, 2, heard.hear
	// The stalled handshakes outlast the test: only eviction frees a slot.
	srv.HandshakeTimeout = time.Minute
	l := listenT(t, srv)
	accepted := acceptAll(t, l)
	m := l.mux
	st := newStallers(t, l.Addr(), cli)
	attackers := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	for _, ip := range attackers {
		st.start(ip)
		st.start(ip)
	}
	if !waitFor(10*time.Second, func() bool { return m.answered() == srv.MaxHandshakes }) {
		hs, _ := m.counts()
		t.Fatalf("the attackers hold %d handshakes, %d answered", hs, m.answered())
	}
	// Full: one more ClientHello of an attacker is dropped.
	dropped := m.dropped.Load()
	st.start(attackers[0])
	if !waitFor(5*time.Second, func() bool { return m.dropped.Load() > dropped }) {
		t.Fatal("an attacker beyond its share was not dropped")
	}

	// The attackers keep starting handshakes, each as soon as it may,
	// while the genuine client dials; the handshake count is watched.
	stop := make(chan struct{})
	var over atomic.Int64
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ; i++ {
			if hs, _ := m.counts(); hs > srv.MaxHandshakes {
				over.Store(int64(hs))
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			if i < 300 {
				st.start(attackers[i%len(attackers)])
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	relay := newDelayRelay(t, l.Addr(), 25*time.Millisecond)
	start := time.Now()
	client, err := dialFrom(ctx, t, relay.conn.LocalAddr().String(), cli, "127.0.0.1")
	took := time.Since(start)
	close(stop)
	churn.Wait()
	if err != nil {
		hs, _ := m.counts()
		t.Fatalf("genuine client locked out by %d stalled handshakes after %v: %v", hs, took.Round(time.Millisecond), err)
	}
	t.Logf("genuine Dial took %v beside the stalled handshakes; %d evicted, %d ClientHellos dropped",
		took.Round(time.Millisecond), m.evictions.Load(), m.dropped.Load())
	if took > 3*time.Second {
		t.Errorf("the genuine Dial took %v", took)
	}
	exchange(t, next(t, accepted), client, 1)
	if n := over.Load(); n != 0 {
		t.Errorf("%d handshakes at once, more than MaxHandshakes", n)
	}
	// The evicted handshakes wind down: their pion connections close,
	// and the Listener heard of the answered ones it evicted.
	if !waitFor(5*time.Second, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.evicted == 0
	}) {
		t.Fatal("evicted handshakes still winding down")
	}
	if n := heard.count(ErrTooManyHandshakes); n == 0 || uint64(n) > m.evictions.Load() {
		t.Errorf("Refused heard %d evictions of %d handshakes evicted: %v", n, m.evictions.Load(), heard.why)
	}
	for _, why := range heard.why {
		if !errors.Is(why, ErrTooManyHandshakes) {
			t.Errorf("Refused heard %v", why)
		}
	}
	checkMux(t, m)
}
