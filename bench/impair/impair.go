// Package impair is a UDP impairment proxy for measuring transports on
// one machine without root: it stands between a client and a server on
// 127.0.0.1, one socket facing the clients and one socket per flow (a
// client's address and port) facing the server, and forwards datagrams
// both ways with a delay, jitter, random loss and duplication (seeded,
// so a run can be repeated), an optional bandwidth cap with a tail-drop
// queue, and an outage that drops everything for a while.
//
// Each direction of a flow holds its datagrams in a queue ordered by
// the time they are due, served by one goroutine and one timer; jitter
// reorders datagrams as a real path with varying delay would. Buffers
// are reused, so forwarding a datagram allocates nothing.
//
// TCPRelay does what it can for TCP: it delays each direction's bytes.
// It terminates TCP, so the TCP endpoints see neither the delay in their
// round trip nor any loss (Linux's netem would give them both, but it
// needs a kernel module and root).
package impair

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Link is what one direction of a flow does to its datagrams.
type Link struct {
	// Delay is added to every datagram.
	Delay time.Duration
	// Jitter moves each datagram's delay by up to ± Jitter (uniformly),
	// never below zero.
	Jitter time.Duration
	// Loss is the fraction of datagrams dropped (0 to 1).
	Loss float64
	// Duplicate is the fraction of datagrams sent twice, the copy with a
	// jitter of its own.
	Duplicate float64
	// Rate caps the direction at this many bytes per second (0: no cap).
	// Datagrams wait their turn; one that would find more than Queue
	// bytes waiting ahead of it is dropped.
	Rate int64
	// Queue is the bytes the capped link holds (default 1 MiB).
	Queue int
}

// Config configures a Proxy.
type Config struct {
	// Up is the client-to-server direction, Down the other.
	Up, Down Link
	// Seed seeds the random losses, duplicates and jitter: the same seed
	// and the same datagrams give the same decisions.
	Seed uint64
	// ImpairAfter leaves a flow's first ImpairAfter unimpaired (no delay,
	// jitter, loss or duplication): a handshake gets through, and what
	// follows meets the path as configured.
	ImpairAfter time.Duration
	// OutageAt and OutageFor drop every datagram of a flow, both ways,
	// from OutageAt after the flow's first datagram, for OutageFor.
	OutageAt, OutageFor time.Duration
	// MaxFlows bounds the flows (DefaultMaxFlows); a new client beyond
	// it takes the place of the flow that started first.
	MaxFlows int
	// MaxQueued bounds the datagrams each direction of a flow holds
	// (DefaultMaxQueued); more are dropped.
	MaxQueued int
	// BufferSize sets SO_RCVBUF and SO_SNDBUF of the proxy's sockets
	// (DefaultBufferSize; negative: the OS default).
	BufferSize int
}

// Defaults of Config.
const (
	DefaultMaxFlows   = 64
	DefaultMaxQueued  = 1 << 16
	DefaultBufferSize = 4 << 20
	defaultQueue      = 1 << 20
)

// Stats counts what one direction did.
type Stats struct {
	Forwarded  int64 // datagrams sent on, copies included
	Lost       int64 // dropped by Loss
	Duplicated int64 // copies made
	Outage     int64 // dropped during the outage
	Overflow   int64 // dropped by a full queue (Queue, MaxQueued)
}

func (s *Stats) add(o Stats) {
	s.Forwarded += o.Forwarded
	s.Lost += o.Lost
	s.Duplicated += o.Duplicated
	s.Outage += o.Outage
	s.Overflow += o.Overflow
}

// Proxy forwards UDP between its clients and one server address.
type Proxy struct {
	cfg    Config
	front  *net.UDPConn
	target *net.UDPAddr
	base   time.Time // the clock the queues count from

	mu     sync.Mutex // guards flows, order, past, closed
	flows  map[netip.AddrPort]*flow
	order  []*flow // by start
	past   [2]Stats
	closed bool
	wg     sync.WaitGroup
}

// Listen starts a proxy on addr (127.0.0.1:0 picks a port) that forwards
// to target.
func Listen(addr, target string, cfg Config) (*Proxy, error) {
	if err := cfg.Up.check(); err != nil {
		return nil, err
	}
	if err := cfg.Down.check(); err != nil {
		return nil, err
	}
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = DefaultMaxFlows
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	ta, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	front, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, err
	}
	setBuffers(front, cfg.BufferSize)
	p := &Proxy{cfg: cfg, front: front, target: ta, base: time.Now(), flows: make(map[netip.AddrPort]*flow)}
	p.wg.Add(1)
	go p.readFront()
	return p, nil
}

func (l *Link) check() error {
	if l.Loss < 0 || l.Loss > 1 || l.Duplicate < 0 || l.Duplicate > 1 {
		return fmt.Errorf("impair: loss %v and duplication %v must be fractions from 0 to 1", l.Loss, l.Duplicate)
	}
	if l.Delay < 0 || l.Jitter < 0 || l.Rate < 0 || l.Queue < 0 {
		return errors.New("impair: negative delay, jitter, rate or queue")
	}
	return nil
}

func setBuffers(c *net.UDPConn, n int) {
	if n > 0 {
		c.SetReadBuffer(n)
		c.SetWriteBuffer(n)
	}
}

// Addr is the address clients send to.
func (p *Proxy) Addr() net.Addr { return p.front.LocalAddr() }

// Stats returns what the proxy did, client to server (up) and back
// (down), over all flows.
func (p *Proxy) Stats() (up, down Stats) {
	p.mu.Lock()
	up, down = p.past[0], p.past[1]
	flows := append([]*flow(nil), p.order...)
	p.mu.Unlock()
	for _, f := range flows {
		up.add(f.up.stats())
		down.add(f.down.stats())
	}
	return up, down
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	flows := p.order
	p.order, p.flows = nil, nil
	p.mu.Unlock()
	err := p.front.Close()
	for _, f := range flows {
		f.close()
	}
	p.wg.Wait()
	return err
}

// readFront reads the clients' datagrams and queues each on its flow.
func (p *Proxy) readFront() {
	defer p.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, from, err := p.front.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error for an earlier datagram
		}
		f, open := p.flow(from)
		if !open {
			return
		}
		if f != nil {
			f.up.push(buf[:n])
		}
	}
}

// flow returns the flow of a client, starting it if it is new (nil if
// no socket to the server could be had: the datagram is dropped and the
// next one tries again), and whether the proxy is open.
func (p *Proxy) flow(from netip.AddrPort) (*flow, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if f := p.flows[from]; f != nil {
		return f, true
	}
	if len(p.order) >= p.cfg.MaxFlows {
		old := p.order[0]
		p.order = p.order[1:]
		delete(p.flows, old.client)
		p.past[0].add(old.up.stats())
		p.past[1].add(old.down.stats())
		go old.close()
	}
	f, err := p.newFlow(from)
	if err != nil {
		return nil, true
	}
	p.flows[from] = f
	p.order = append(p.order, f)
	return f, true
}

// A flow is one client's datagrams both ways.
type flow struct {
	client   netip.AddrPort
	upstream *net.UDPConn
	up, down *pipe
	once     sync.Once
}

func (p *Proxy) newFlow(client netip.AddrPort) (*flow, error) {
	up, err := net.DialUDP("udp", nil, p.target)
	if err != nil {
		return nil, err
	}
	setBuffers(up, p.cfg.BufferSize)
	now := p.now()
	f := &flow{client: client, upstream: up}
	f.up = newPipe(p, p.cfg.Up, now, func(b []byte) error { _, err := up.Write(b); return err })
	f.down = newPipe(p, p.cfg.Down, now, func(b []byte) error { _, err := p.front.WriteToUDPAddrPort(b, client); return err })
	f.up.seed(p.cfg.Seed, 1)
	f.down.seed(p.cfg.Seed, 2)
	p.wg.Add(3)
	go func() { defer p.wg.Done(); f.up.run() }()
	go func() { defer p.wg.Done(); f.down.run() }()
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 1<<16)
		for {
			n, err := up.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ECONNREFUSED from an earlier datagram: the server is not there yet
			}
			f.down.push(buf[:n])
		}
	}()
	return f, nil
}

func (f *flow) close() {
	f.once.Do(func() {
		f.upstream.Close()
		f.up.close()
		f.down.close()
	})
}

func (p *Proxy) now() int64 { return int64(time.Since(p.base)) }
