package impair

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// echo starts a UDP server on 127.0.0.1 that sends every datagram back.
func echo(t *testing.T) *net.UDPConn {
	t.Helper()
	s, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, from, err := s.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			s.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return s
}

// sink starts a UDP server that counts the datagrams it gets, each
// holding its sequence number in its first 8 octets.
func sink(t *testing.T) (*net.UDPConn, chan uint64) {
	t.Helper()
	s, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetReadBuffer(4 << 20)
	t.Cleanup(func() { s.Close() })
	got := make(chan uint64, 1<<16)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, err := s.Read(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				got <- binary.BigEndian.Uint64(buf)
			}
		}
	}()
	return s, got
}

func proxy(t *testing.T, target net.Addr, cfg Config) *Proxy {
	t.Helper()
	p, err := Listen("127.0.0.1:0", target.String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, p.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

// send sends n numbered datagrams of size octets, pausing now and then so
// that no socket buffer overflows.
func send(t *testing.T, c *net.UDPConn, n, size int) {
	t.Helper()
	b := make([]byte, size)
	for i := range n {
		binary.BigEndian.PutUint64(b, uint64(i))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
}

// collect counts what arrives until nothing has for quiet.
func collect(got chan uint64, quiet time.Duration) map[uint64]int {
	m := make(map[uint64]int)
	for {
		select {
		case s := <-got:
			m[s]++
		case <-time.After(quiet):
			return m
		}
	}
}

func TestForwardBothWays(t *testing.T) {
	p := proxy(t, echo(t).LocalAddr(), Config{})
	c := dial(t, p)
	for i := range 100 {
		msg := bytes.Repeat([]byte{byte(i)}, 1+i*80)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 1<<16)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Fatalf("datagram %d came back changed", i)
		}
	}
	up, down := p.Stats()
	if up.Forwarded != 100 || down.Forwarded != 100 {
		t.Fatalf("forwarded %d up, %d down; want 100 each", up.Forwarded, down.Forwarded)
	}
}

func TestDelay(t *testing.T) {
	const each = 20 * time.Millisecond
	p := proxy(t, echo(t).LocalAddr(), Config{Up: Link{Delay: each}, Down: Link{Delay: each}})
	c := dial(t, p)
	buf := make([]byte, 64)
	var best time.Duration = time.Hour
	for range 5 {
		t0 := time.Now()
		c.Write(buf)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	// The round trip is at least both delays; a loaded machine may add
	// to it, so the upper bound is loose.
	if best < 2*each || best > 2*each+30*time.Millisecond {
		t.Fatalf("round trip %v, want about %v", best, 2*each)
	}
}

func TestLossSeeded(t *testing.T) {
	count := func(seed uint64) map[uint64]int {
		s, got := sink(t)
		p := proxy(t, s.LocalAddr(), Config{Up: Link{Loss: 0.3}, Seed: seed})
		send(t, dial(t, p), 2000, 100)
		m := collect(got, 300*time.Millisecond)
		if up, _ := p.Stats(); up.Lost+int64(len(m)) != 2000 {
			t.Fatalf("%d lost and %d received of 2000", up.Lost, len(m))
		}
		return m
	}
	a, b := count(7), count(7)
	if len(a) < 1200 || len(a) > 1600 {
		t.Fatalf("%d of 2000 arrived with 30 %% loss", len(a))
	}
	if len(a) != len(b) {
		t.Fatalf("the same seed lost %d, then %d", 2000-len(a), 2000-len(b))
	}
	for s := range a {
		if b[s] == 0 {
			t.Fatalf("datagram %d arrived in one run, not in the other", s)
		}
	}
}

func TestDuplicateAndJitter(t *testing.T) {
	s, got := sink(t)
	p := proxy(t, s.LocalAddr(), Config{Up: Link{Duplicate: 0.5, Delay: 5 * time.Millisecond, Jitter: 5 * time.Millisecond}, Seed: 1})
	send(t, dial(t, p), 1000, 100)
	m := collect(got, 300*time.Millisecond)
	total := 0
	for _, n := range m {
		total += n
	}
	up, _ := p.Stats()
	if len(m) != 1000 || int64(total) != 1000+up.Duplicated || up.Duplicated < 400 || up.Duplicated > 600 {
		t.Fatalf("%d distinct, %d in all, %d duplicated", len(m), total, up.Duplicated)
	}
}

func TestReorderByJitter(t *testing.T) {
	s, got := sink(t)
	p := proxy(t, s.LocalAddr(), Config{Up: Link{Delay: 10 * time.Millisecond, Jitter: 10 * time.Millisecond}, Seed: 3})
	send(t, dial(t, p), 500, 100)
	var order []uint64
	for {
		select {
		case s := <-got:
			order = append(order, s)
			continue
		case <-time.After(300 * time.Millisecond):
		}
		break
	}
	late := 0
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			late++
		}
	}
	if len(order) != 500 || late == 0 {
		t.Fatalf("%d of 500 arrived, %d out of order", len(order), late)
	}
}

func TestOutage(t *testing.T) {
	s, got := sink(t)
	p := proxy(t, s.LocalAddr(), Config{OutageAt: 100 * time.Millisecond, OutageFor: 200 * time.Millisecond})
	c := dial(t, p)
	b := make([]byte, 16)
	start := time.Now()
	for i := 0; time.Since(start) < 400*time.Millisecond; i++ {
		binary.BigEndian.PutUint64(b, uint64(i))
		c.Write(b)
		time.Sleep(5 * time.Millisecond)
	}
	m := collect(got, 200*time.Millisecond)
	up, _ := p.Stats()
	// About 40 of ~80 datagrams fall in the outage; the machine's
	// scheduling moves the edges.
	if up.Outage < 20 || up.Outage > 45 || len(m) < 20 {
		t.Fatalf("%d dropped by the outage, %d delivered", up.Outage, len(m))
	}
}

func TestRateCap(t *testing.T) {
	s, got := sink(t)
	const rate = 2 << 20 // 2 MiB/s
	p := proxy(t, s.LocalAddr(), Config{Up: Link{Rate: rate, Queue: 4 << 20}})
	c := dial(t, p)
	start := time.Now()
	send(t, c, 256, 4096) // 1 MiB: half a second at the cap
	n := 0
	for n < 256 {
		select {
		case <-got:
			n++
		case <-time.After(2 * time.Second):
			t.Fatalf("%d of 256 arrived", n)
		}
	}
	if d := time.Since(start); d < 450*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("1 MiB at 2 MiB/s took %v", d)
	}
}

func TestRateCapDrops(t *testing.T) {
	s, got := sink(t)
	p := proxy(t, s.LocalAddr(), Config{Up: Link{Rate: 1 << 20, Queue: 64 << 10}})
	send(t, dial(t, p), 256, 4096)
	m := collect(got, 300*time.Millisecond)
	up, _ := p.Stats()
	if up.Overflow == 0 || int64(len(m))+up.Overflow != 256 {
		t.Fatalf("%d delivered, %d dropped by the queue", len(m), up.Overflow)
	}
}

// TestPushAllocs checks that queueing and sending a datagram allocates
// nothing once the buffers are there.
func TestPushAllocs(t *testing.T) {
	p := &Proxy{base: time.Now(), cfg: Config{MaxQueued: DefaultMaxQueued}}
	q := newPipe(p, Link{Delay: 0, Jitter: time.Millisecond, Loss: 0.01, Duplicate: 0.01}, 0, func([]byte) error { return nil })
	q.seed(1, 1)
	b := make([]byte, 1200)
	drain := func() {
		for len(q.q) > 0 {
			q.recycle(q.heapPop().b)
		}
	}
	for range 64 {
		q.push(b)
	}
	drain()
	if n := testing.AllocsPerRun(100, func() {
		for range 16 {
			q.push(b)
		}
		drain()
	}); n != 0 {
		t.Fatalf("%v allocations per 16 datagrams", n)
	}
}

func TestTCPRelay(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	const each = 15 * time.Millisecond
	r, err := ListenTCP("127.0.0.1:0", l.Addr().String(), each)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("relay"), 50000)
	t0 := time.Now()
	go c.Write(msg)
	back := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, msg) {
		t.Fatal("the bytes came back changed")
	}
	if d := time.Since(t0); d < 2*each {
		t.Fatalf("a round trip through the relay took %v, less than %v", d, 2*each)
	}
}
