package perf

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// heapWatch samples the heap in use until stopped and returns the most
// seen.
func heapWatch() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// wellBehaved runs a real perf test beside an attack: RDMA Writes with the
// raw comparison, and checks its result.
func wellBehaved(t *testing.T, ts *testServer) {
	t.Helper()
	st := run(t, ts, ClientConfig{Op: OpWrite, Iters: 200, CompareRaw: true}, 65536)
	checkStats(t, "the well-behaved client", st, 65536, 200, true, false)
}

// waitUsage waits until the server counts conns connections and octets.
func waitUsage(t *testing.T, ts *testServer, conns int, octets int64) {
	t.Helper()
	if !waitfor.Until(5*time.Second, func() bool {
		n, b := ts.srv.Usage()
		return n == conns && b == octets
	}) {
		n, b := ts.srv.Usage()
		t.Fatalf("the server counts %d connections and %d octets, want %d and %d", n, b, conns, octets)
	}
}

func refusal(t *testing.T, m Ctl, err error, want RefusalCode) {
	t.Helper()
	if err != nil || m.Type != CtlRefuse || m.Code != want {
		t.Fatalf("answer %+v, %v; want a refusal with code %d", m, err, want)
	}
}

// TestPerfHelloAsksForGigabytes: hellos asking for 8 GiB (1024 buffers of
// 8 MiB, which a server without limits would allocate), for 2 GiB within the
// buffer count, and for sizes out of range are refused before anything is
// allocated, while a real perf run works beside them; the server's heap
// stays far under 1 GiB.
func TestPerfHelloAsksForGigabytes(t *testing.T) {
	ts := startServer(t, "tcp", Limits{})
	peak := heapWatch()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wellBehaved(t, ts)
	}()
	for _, c := range []struct {
		hello Ctl
		code  RefusalCode
	}{
		{Ctl{Type: CtlHello, Op: OpSend, Size: 8 << 20, N: 1024, BufLen: 8 << 20}, RefusedBadHello},
		{Ctl{Type: CtlHello, Op: OpSend, Size: 8 << 20, N: 256, BufLen: 8 << 20, Flags: FlagRaw}, RefusedConnBudget},
		{Ctl{Type: CtlHello, Op: OpWrite, Size: 1 << 31, N: 4, BufLen: CtlLen}, RefusedBadHello},
		{Ctl{Type: CtlHello, Op: OpRead, Size: 65536, N: 4, BufLen: 1 << 20}, RefusedBadHello},
		{Ctl{Type: CtlHello, Op: 9, Size: 65536, N: 4, BufLen: CtlLen}, RefusedBadHello},
		{Ctl{Type: CtlHello, Op: OpAtomic, Size: 4096, N: 4, BufLen: CtlLen}, RefusedBadHello},
	} {
		a, err := dialAttacker(t, ts, "127.0.0.2")
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.ask(t, c.hello)
		refusal(t, m, err, c.code)
		if c.code == RefusedConnBudget && m.Asked < 2<<30 {
			t.Errorf("refusal says %d octets asked", m.Asked)
		}
		// The server closes the connection after the refusal.
		select {
		case <-a.qp.Terminated():
		case <-time.After(5 * time.Second):
			t.Error("the refused connection stays open")
		}
	}
	wg.Wait()
	if p := peak(); p > 256<<20 {
		t.Errorf("the heap reached %d MiB", p>>20)
	}
	waitUsage(t, ts, 0, 0)
}

// TestPerfConnectionLimits: one address holds at most MaxConnsPerPeer
// connections, however many hellos it sends (63 of them, each asking for
// the most receive buffers, once used up the server's STags); the next are
// told why; past MaxConns refusals more are rejected outright; a client
// from another address still runs.
func TestPerfConnectionLimits(t *testing.T) {
	lim := Limits{MaxConns: 8, MaxConnsPerPeer: 4}
	ts := startServer(t, "tcp", lim)
	g0 := runtime.NumGoroutine()
	hello := Ctl{Type: CtlHello, Op: OpSend, Size: 4096, N: DefaultMaxRecvBuffers, BufLen: 4096}
	granted, peerRefusals, rejected := 0, 0, 0
	var held []*attacker
	for range 63 {
		a, err := dialAttacker(t, ts, "127.0.0.2")
		if err != nil {
			rejected++ // MPA's Reply with R=1: past the refusals a server keeps
			continue
		}
		m, err := a.ask(t, hello)
		switch {
		case err == nil && m.Type == CtlAdvert:
			granted++
			held = append(held, a)
		case err == nil && m.Type == CtlRefuse && m.Code == RefusedPeerConns:
			peerRefusals++
			a.close()
		default:
			t.Fatalf("answer %+v, %v", m, err)
		}
	}
	if granted != lim.MaxConnsPerPeer || peerRefusals == 0 {
		t.Fatalf("%d granted, %d refused (per peer), %d rejected", granted, peerRefusals, rejected)
	}
	n, b := ts.srv.Usage()
	if want := int64(granted) * (ConnOverhead + need(hello)); n != granted || b != want {
		t.Errorf("the server counts %d connections and %d octets, want %d and %d", n, b, granted, want)
	}
	wellBehaved(t, ts)
	// The well-behaved client's connection is gone from the count once
	// the server has seen it close, which may come after the client
	// returns.
	waitUsage(t, ts, granted, int64(granted)*(ConnOverhead+need(hello)))
	// Other addresses fill the server; the next is told it is full.
	for _, from := range []string{"127.0.0.3", "127.0.0.3", "127.0.0.3", "127.0.0.3"} {
		a, err := dialAttacker(t, ts, from)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := a.ask(t, Ctl{Type: CtlHello, Op: OpWrite, Size: 64, N: 1, BufLen: CtlLen}); err != nil || m.Type != CtlAdvert {
			t.Fatalf("%+v, %v", m, err)
		}
		held = append(held, a)
	}
	a, err := dialAttacker(t, ts, "127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.ask(t, hello)
	refusal(t, m, err, RefusedConns)
	var re *RefusedError
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Connect(ctx, ts.connectCfg(t, ClientConfig{Op: OpWrite, MaxSize: 64}))
	if !errors.As(err, &re) || re.Code != RefusedConns {
		t.Errorf("a client at the limit: %v", err)
	}
	for _, a := range held {
		a.close()
	}
	waitUsage(t, ts, 0, 0)
	wellBehaved(t, ts)
	waitfor.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= g0+10 })
	if g := runtime.NumGoroutine(); g > g0+10 {
		t.Errorf("%d goroutines after the attack, %d before", g, g0)
	}
}

// TestPerfServerBudget: connections from several addresses that each ask
// for their whole budget fill the server's; the next is told how much is
// free; a smaller test still fits, and everything comes back.
func TestPerfServerBudget(t *testing.T) {
	lim := Limits{MemBudget: 40 << 20, ConnBudget: 16 << 20}
	ts := startServer(t, "tcp", lim)
	big := Ctl{Type: CtlHello, Op: OpWrite, Size: 6 << 20, N: 1, BufLen: CtlLen, Flags: FlagLat | FlagRaw}
	if n := need(big); n > lim.ConnBudget || n < 14<<20 {
		t.Fatalf("need %d", n)
	}
	for _, from := range []string{"127.0.0.2", "127.0.0.3"} {
		a, err := dialAttacker(t, ts, from)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := a.ask(t, big); err != nil || m.Type != CtlAdvert {
			t.Fatalf("%+v, %v", m, err)
		}
	}
	a, err := dialAttacker(t, ts, "127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.ask(t, big)
	refusal(t, m, err, RefusedServerBudget)
	if m.Asked != uint64(need(big)) || m.Limit >= m.Asked {
		t.Errorf("refusal: asked %d, free %d", m.Asked, m.Limit)
	}
	st := run(t, ts, ClientConfig{Op: OpWrite, Iters: 100}, 4096)
	checkStats(t, "a small test", st, 4096, 100, false, false)
}

// TestPerfIdleTimeout: a connection that sends no hello, or goes quiet
// after it, is closed, and what it held comes back.
func TestPerfIdleTimeout(t *testing.T) {
	ts := startServer(t, "tcp", Limits{HelloTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	silent, err := dialAttacker(t, ts, "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := dialAttacker(t, ts, "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := quiet.ask(t, Ctl{Type: CtlHello, Op: OpWrite, Size: 1 << 20, N: 4, BufLen: CtlLen}); err != nil || m.Type != CtlAdvert {
		t.Fatalf("%+v, %v", m, err)
	}
	for _, a := range []*attacker{silent, quiet} {
		select {
		case <-a.qp.Terminated():
		case <-time.After(5 * time.Second):
			t.Fatal("a silent connection stays open")
		}
	}
	waitUsage(t, ts, 0, 0)
	// A real run is not idle, however long its rounds.
	st := run(t, ts, ClientConfig{Op: OpRead, Duration: 800 * time.Millisecond, CompareRaw: true}, 65536)
	if st.Seconds < 0.7 {
		t.Errorf("%+v", st)
	}
}

// TestPerfRawListenerLimits: the raw port holds nothing for a connection
// that sends 10 octets and stalls (closed after the hello timeout),
// nothing for a header without a live perf connection's token or beyond
// what that connection was granted (closed at once), and no more
// connections than the perf connection limits; a real comparison runs
// beside.
func TestPerfRawListenerLimits(t *testing.T) {
	lim := Limits{MaxConns: 8, MaxConnsPerPeer: 4, HelloTimeout: 300 * time.Millisecond}
	ts := startServer(t, "tcp", lim)
	raw := ts.raw.String()
	closedWithin := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := io.ReadAll(c)
		return err == nil // EOF: closed by the server
	}
	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	stalled := make([]net.Conn, 0, 3)
	for range 3 {
		c, err := net.Dial("tcp", raw)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("0123456789"))
		stalled = append(stalled, c)
	}
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	if grew := int64(ms1.HeapInuse) - int64(ms0.HeapInuse); grew > 4<<20 {
		t.Errorf("three stalled raw connections grew the heap by %d KiB", grew>>10)
	}
	for _, c := range stalled {
		if !closedWithin(c, 3*time.Second) {
			t.Error("a stalled raw connection stays open")
		}
		c.Close()
	}
	// A header with a token no perf connection has.
	c, err := net.Dial("tcp", raw)
	if err != nil {
		t.Fatal(err)
	}
	h := RawHeader{Mode: RawToClient, Size: 8 << 20, Count: 1 << 30}
	c.Write(h.Append(nil))
	if !closedWithin(c, time.Second) {
		t.Error("a raw header without a token is served")
	}
	c.Close()
	// A perf connection's token, asking beyond its hello.
	a, err := dialAttacker(t, ts, "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	adv, err := a.ask(t, Ctl{Type: CtlHello, Op: OpWrite, Size: 4096, N: 1, BufLen: CtlLen, Flags: FlagRaw})
	if err != nil || adv.Type != CtlAdvert || adv.RawPort == 0 {
		t.Fatalf("%+v, %v", adv, err)
	}
	c, err = net.Dial("tcp", raw)
	if err != nil {
		t.Fatal(err)
	}
	h = RawHeader{Mode: RawToClient, Size: 8 << 20, Count: 1 << 30, Token: adv.Token}
	c.Write(h.Append(nil))
	if !closedWithin(c, time.Second) {
		t.Error("a raw transfer beyond the hello is served")
	}
	c.Close()
	// More raw connections from one address than the limit: the extra
	// ones are closed at once. The connections above are closed on our
	// side; the server lets go of them when it sees that.
	waitRawIdle(t, ts.srv, "127.0.0.1")
	var conns []net.Conn
	for range lim.MaxConnsPerPeer + 2 {
		c, err := net.Dial("tcp", raw)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	closedAtOnce := 0
	for i := len(conns) - 1; i >= 0; i-- {
		// The last ones first: the others are closed after the hello
		// timeout.
		d := 10 * time.Millisecond
		if i >= lim.MaxConnsPerPeer {
			d = 200 * time.Millisecond
		}
		if closedWithin(conns[i], d) {
			closedAtOnce++
		}
	}
	if closedAtOnce != 2 {
		t.Errorf("%d of %d raw connections closed at once, want 2", closedAtOnce, len(conns))
	}
	for _, c := range conns {
		c.Close()
	}
	wellBehaved(t, ts)
}

// TestPerfServerMemory: what an admitted connection costs the server
// before its hello is within ConnOverhead, what it is counted for.
func TestPerfServerMemory(t *testing.T) {
	ts := startServer(t, "tcp", Limits{MaxConnsPerPeer: 16})
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	const n = 8
	for range n {
		a, err := dialAttacker(t, ts, "127.0.0.2")
		if err != nil {
			t.Fatal(err)
		}
		if m, err := a.ask(t, Ctl{Type: CtlHello, Op: OpWrite, Size: 8, N: 1, BufLen: CtlLen}); err != nil || m.Type != CtlAdvert {
			t.Fatalf("%+v, %v", m, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	// Both ends are in this process: half of the growth is the server's,
	// at most; count it all.
	per := (int64(ms1.HeapInuse) - int64(ms0.HeapInuse)) / n
	t.Logf("%d KiB of heap per connection, both ends", per>>10)
	if per > ConnOverhead {
		t.Errorf("a connection costs %d KiB, more than the %d KiB it is counted for", per>>10, ConnOverhead>>10)
	}
}

// waitRawIdle waits until the server's raw listener holds no connection
// (the test's, from host).
func waitRawIdle(t *testing.T, s *Server, host string) {
	t.Helper()
	if !waitfor.Until(5*time.Second, func() bool { n, _ := s.rawAdm.Usage(); return n == 0 }) {
		n, _ := s.rawAdm.Usage()
		t.Fatalf("the raw listener still holds %d connections from %s", n, host)
	}
}
