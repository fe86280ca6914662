package demo

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

// Impairment is what the network between the page and the Go peer does
// to each packet, in each direction: Loss and Dup are percentages, Delay
// the one-way delay in milliseconds, and Jitter a uniformly drawn extra
// delay of up to that many milliseconds. Packets are not kept in order:
// with jitter, a later packet may leave earlier. On a byte stream (MPA
// over a WebSocket, that is TCP) only Delay and Jitter apply, and the
// order is kept: TCP retransmits lost segments itself and never
// delivers out of order.
type Impairment struct {
	Preset string  `json:"preset,omitempty"`
	Loss   float64 `json:"loss"`
	Delay  int     `json:"delay"`
	Jitter int     `json:"jitter"`
	Dup    float64 `json:"dup"`
}

// Limits of an Impairment.
const (
	MaxLoss   = 50
	MaxDup    = 50
	MaxDelay  = 1000
	MaxJitter = 1000
)

// Presets are the impairments the page offers by name.
var Presets = []Impairment{
	{Preset: "clean"},
	{Preset: "lossy Wi-Fi", Loss: 3, Delay: 5, Jitter: 10, Dup: 1},
	{Preset: "reordering path", Delay: 10, Jitter: 40},
	{Preset: "bad path", Loss: 10, Delay: 30, Jitter: 60, Dup: 3},
}

// Preset returns the impairment of that name.
func Preset(name string) (Impairment, bool) {
	for _, p := range Presets {
		if p.Preset == name {
			return p, true
		}
	}
	return Impairment{}, false
}

// Check reports an impairment outside the limits.
func (im Impairment) Check() error {
	switch {
	case im.Loss < 0 || im.Loss > MaxLoss:
		return fmt.Errorf("loss %g %% outside [0, %d]", im.Loss, MaxLoss)
	case im.Dup < 0 || im.Dup > MaxDup:
		return fmt.Errorf("duplication %g %% outside [0, %d]", im.Dup, MaxDup)
	case im.Delay < 0 || im.Delay > MaxDelay:
		return fmt.Errorf("delay %d ms outside [0, %d]", im.Delay, MaxDelay)
	case im.Jitter < 0 || im.Jitter > MaxJitter:
		return fmt.Errorf("jitter %d ms outside [0, %d]", im.Jitter, MaxJitter)
	}
	return nil
}

func (im Impairment) zero() bool {
	return im.Loss == 0 && im.Delay == 0 && im.Jitter == 0 && im.Dup == 0
}

func (im Impairment) String() string {
	if im.zero() {
		return "clean"
	}
	return fmt.Sprintf("loss %g %%, delay %d ms, jitter %d ms, duplicates %g %%", im.Loss, im.Delay, im.Jitter, im.Dup)
}

// DirStats counts what the impairment did to one direction's packets
// (or, on a byte stream, the writes).
type DirStats struct {
	Packets    uint64 `json:"packets"`    // handed to the impairment
	Dropped    uint64 `json:"dropped"`    // lost
	Duplicated uint64 `json:"duplicated"` // sent twice
	Reordered  uint64 `json:"reordered"`  // left before a packet that came earlier
	Delayed    uint64 `json:"delayed"`    // held back for a time
}

// NetStats are both directions' counts, seen from the Go peer: In is the
// page's traffic to the Go peer, Out the Go peer's to the page.
type NetStats struct {
	In  DirStats `json:"in"`
	Out DirStats `json:"out"`
}

// impairer draws the fate of each packet from one Impairment, shared by
// both directions of a link and changed while it runs.
type impairer struct {
	mu    sync.Mutex
	im    Impairment
	rng   *rand.Rand
	stats NetStats
}

func newImpairer(im Impairment) *impairer {
	return &impairer{im: im, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

func (p *impairer) set(im Impairment) {
	p.mu.Lock()
	p.im = im
	p.mu.Unlock()
}

func (p *impairer) get() (Impairment, NetStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.im, p.stats
}

// fate decides one packet's: the delays of its copies (none when it is
// lost, two when it is duplicated). in says which direction counts it.
func (p *impairer) fate(in bool, datagram bool) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := &p.stats.Out
	if in {
		st = &p.stats.In
	}
	st.Packets++
	im := p.im
	if im.zero() {
		return []time.Duration{0}
	}
	if datagram && im.Loss > 0 && p.rng.Float64()*100 < im.Loss {
		st.Dropped++
		return nil
	}
	n := 1
	if datagram && im.Dup > 0 && p.rng.Float64()*100 < im.Dup {
		st.Duplicated++
		n = 2
	}
	out := make([]time.Duration, n)
	for i := range out {
		d := time.Duration(im.Delay) * time.Millisecond
		if im.Jitter > 0 {
			d += time.Duration(p.rng.Int64N(int64(im.Jitter) * int64(time.Millisecond)))
		}
		out[i] = d
	}
	if out[0] > 0 {
		st.Delayed++
	}
	return out
}

func (p *impairer) reordered(in bool) {
	p.mu.Lock()
	if in {
		p.stats.In.Reordered++
	} else {
		p.stats.Out.Reordered++
	}
	p.mu.Unlock()
}

// packet is one datagram waiting for its time.
type packet struct {
	at   time.Time
	seq  uint64
	b    []byte
	addr net.Addr
}

type packetHeap []packet

func (h packetHeap) Len() int { return len(h) }
func (h packetHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h packetHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *packetHeap) Push(x any)   { *h = append(*h, x.(packet)) }
func (h *packetHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = packet{}
	*h = old[:len(old)-1]
	return p
}

// maxQueued bounds the packets one direction holds back, as a router's
// queue would: more are dropped.
const maxQueued = 4096

// scheduler releases packets at their time, in time order (not in the
// order they came: that is how jitter reorders them).
type scheduler struct {
	in      bool
	p       *impairer
	deliver func(packet)
	mu      sync.Mutex
	h       packetHeap
	seq     uint64
	latest  time.Time // the latest release time given so far
	wake    chan struct{}
	done    chan struct{}
}

func newScheduler(in bool, p *impairer, deliver func(packet), done chan struct{}) *scheduler {
	s := &scheduler{in: in, p: p, deliver: deliver, wake: make(chan struct{}, 1), done: done}
	go s.run()
	return s
}

func (s *scheduler) push(b []byte, addr net.Addr, d time.Duration) {
	now := time.Now()
	at := now.Add(d)
	s.mu.Lock()
	if len(s.h) >= maxQueued {
		s.mu.Unlock()
		s.p.mu.Lock()
		if s.in {
			s.p.stats.In.Dropped++
		} else {
			s.p.stats.Out.Dropped++
		}
		s.p.mu.Unlock()
		return
	}
	if at.Before(s.latest) {
		s.p.reordered(s.in)
	} else {
		s.latest = at
	}
	s.seq++
	heap.Push(&s.h, packet{at: at, seq: s.seq, b: b, addr: addr})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *scheduler) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		var due []packet
		now := time.Now()
		for len(s.h) > 0 && !s.h[0].at.After(now) {
			due = append(due, heap.Pop(&s.h).(packet))
		}
		wait := time.Hour
		if len(s.h) > 0 {
			wait = s.h[0].at.Sub(now)
		}
		s.mu.Unlock()
		for _, p := range due {
			s.deliver(p)
		}
		if len(due) > 0 {
			continue
		}
		t.Reset(wait)
		select {
		case <-s.done:
			return
		case <-s.wake:
		case <-t.C:
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

// PacketLink is a net.PacketConn (the Go peer's ICE UDP socket) with an
// impaired network beneath it: every datagram in either direction is
// lost, delayed, reordered or duplicated as its Impairment says, below
// DTLS, SCTP and DDP, which see a real lossy path and recover from it
// themselves.
type PacketLink struct {
	conn  net.PacketConn
	imp   *impairer
	out   *scheduler
	in    *scheduler
	ready chan packet
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu       sync.Mutex // guards deadline
	deadline time.Time
	sentTo   map[string]int // datagrams sent per remote address (for the tests)
}

// NewPacketLink impairs conn, whose local address must be a *net.UDPAddr.
func NewPacketLink(conn net.PacketConn, im Impairment) *PacketLink {
	l := &PacketLink{conn: conn, imp: newImpairer(im), ready: make(chan packet, 1024), done: make(chan struct{}), sentTo: map[string]int{}}
	l.out = newScheduler(false, l.imp, func(p packet) { _, _ = l.conn.WriteTo(p.b, p.addr) }, l.done)
	l.in = newScheduler(true, l.imp, l.enqueue, l.done)
	l.wg.Add(1)
	go l.readLoop()
	return l
}

// Set changes the impairment at once, for packets still to come.
func (l *PacketLink) Set(im Impairment) { l.imp.set(im) }

// Stats returns the impairment and what it did so far.
func (l *PacketLink) Stats() (Impairment, NetStats) { return l.imp.get() }

// SentTo returns how many datagrams were sent to each remote address.
func (l *PacketLink) SentTo() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.sentTo))
	for k, v := range l.sentTo {
		out[k] = v
	}
	return out
}

func (l *PacketLink) enqueue(p packet) {
	select {
	case l.ready <- p:
	default: // the reader is behind: the queue overflows
		l.imp.mu.Lock()
		l.imp.stats.In.Dropped++
		l.imp.mu.Unlock()
	}
}

func (l *PacketLink) readLoop() {
	defer l.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := l.conn.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.Close()
			return
		}
		for _, d := range l.imp.fate(true, true) {
			b := append([]byte(nil), buf[:n]...)
			if d == 0 {
				l.enqueue(packet{b: b, addr: addr})
			} else {
				l.in.push(b, addr, d)
			}
		}
	}
}

// ReadFrom returns the next datagram the impaired network delivers.
func (l *PacketLink) ReadFrom(b []byte) (int, net.Addr, error) {
	l.mu.Lock()
	dl := l.deadline
	l.mu.Unlock()
	var timeout <-chan time.Time
	if !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case p := <-l.ready:
		return copy(b, p.b), p.addr, nil
	case <-l.done:
		return 0, nil, net.ErrClosed
	case <-timeout:
		return 0, nil, os.ErrDeadlineExceeded
	}
}

// WriteTo sends b to addr through the impaired network.
func (l *PacketLink) WriteTo(b []byte, addr net.Addr) (int, error) {
	select {
	case <-l.done:
		return 0, net.ErrClosed
	default:
	}
	l.mu.Lock()
	l.sentTo[addr.String()]++
	l.mu.Unlock()
	for _, d := range l.imp.fate(false, true) {
		if d == 0 {
			if _, err := l.conn.WriteTo(b, addr); err != nil {
				return 0, err
			}
			continue
		}
		l.out.push(append([]byte(nil), b...), addr, d)
	}
	return len(b), nil
}

// Close closes the socket; packets still held back are lost.
func (l *PacketLink) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.conn.Close()
	})
	return err
}

// Wait waits for the link's reader to end after Close.
func (l *PacketLink) Wait() { l.wg.Wait() }

func (l *PacketLink) LocalAddr() net.Addr { return l.conn.LocalAddr() }

func (l *PacketLink) SetDeadline(t time.Time) error {
	_ = l.SetReadDeadline(t)
	return l.conn.SetWriteDeadline(t)
}

func (l *PacketLink) SetReadDeadline(t time.Time) error {
	l.mu.Lock()
	l.deadline = t
	l.mu.Unlock()
	return nil
}

func (l *PacketLink) SetWriteDeadline(t time.Time) error { return l.conn.SetWriteDeadline(t) }

// maxStreamQueued bounds the octets a StreamLink holds back in each
// direction: a writer then waits, a reader stops reading.
const maxStreamQueued = 4 << 20

// chunk is a piece of a byte stream waiting for its time.
type chunk struct {
	at time.Time
	b  []byte
}

// fifo is one direction of a StreamLink: chunks leave in order, each
// when its time has come and not before the one ahead of it.
type fifo struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      []chunk
	n      int // octets queued
	latest time.Time
	err    error // the direction's end (EOF, or the write error)
	closed bool
	notify chan struct{} // signalled on every change, for the one reader
}

func newFIFO() *fifo {
	f := &fifo{notify: make(chan struct{}, 1)}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// put queues b to leave after d, and never before the chunks queued
// earlier: a byte stream keeps its order whatever the delay. It waits
// while the queue is full.
func (f *fifo) put(b []byte, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n >= maxStreamQueued && !f.closed && f.err == nil {
		f.cond.Wait()
	}
	if f.closed {
		return net.ErrClosed
	}
	if f.err != nil {
		return f.err
	}
	at := time.Now().Add(d)
	if at.Before(f.latest) {
		at = f.latest
	}
	f.latest = at
	f.q = append(f.q, chunk{at: at, b: b})
	f.n += len(b)
	f.changed()
	return nil
}

// changed wakes the writer (cond) and the reader (notify); f.mu is held.
func (f *fifo) changed() {
	f.cond.Broadcast()
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

func (f *fifo) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.changed()
	f.mu.Unlock()
}

func (f *fifo) close() {
	f.mu.Lock()
	f.closed = true
	f.changed()
	f.mu.Unlock()
}

// StreamLink is a net.Conn (the Go peer's end of the page's WebSocket,
// which carries MPA) whose octets are delayed in each direction as an
// Impairment's Delay and Jitter say. Loss and duplication do not apply
// to a byte stream: TCP below hides them as delay, and keeps the order.
type StreamLink struct {
	net.Conn
	imp  *impairer
	out  *fifo
	in   *fifo
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	rmu      sync.Mutex // serialises Read; guards rest and deadline
	rest     []byte
	dmu      sync.Mutex
	deadline time.Time
	dchanged chan struct{}
}

// NewStreamLink impairs c.
func NewStreamLink(c net.Conn, im Impairment) *StreamLink {
	s := &StreamLink{Conn: c, imp: newImpairer(im), out: newFIFO(), in: newFIFO(), done: make(chan struct{}), dchanged: make(chan struct{}, 1)}
	s.wg.Add(2)
	go s.readLoop()
	go s.writeLoop()
	return s
}

// Set changes the delay and jitter for what is still to come.
func (s *StreamLink) Set(im Impairment) { s.imp.set(im) }

// Stats returns the impairment and what it did so far.
func (s *StreamLink) Stats() (Impairment, NetStats) { return s.imp.get() }

func (s *StreamLink) delay(in bool) time.Duration {
	d := s.imp.fate(in, false)
	return d[0]
}

func (s *StreamLink) readLoop() {
	defer s.wg.Done()
	for {
		b := make([]byte, 32<<10)
		n, err := s.Conn.Read(b)
		if n > 0 {
			if s.in.put(b[:n], s.delay(true)) != nil {
				return
			}
		}
		if err != nil {
			s.in.fail(err)
			return
		}
	}
}

func (s *StreamLink) writeLoop() {
	defer s.wg.Done()
	f := s.out
	for {
		f.mu.Lock()
		for len(f.q) == 0 && !f.closed {
			f.cond.Wait()
		}
		if f.closed {
			f.mu.Unlock()
			return
		}
		c := f.q[0]
		f.mu.Unlock()
		if w := time.Until(c.at); w > 0 {
			select {
			case <-time.After(w):
			case <-s.done:
				return
			}
		}
		_, err := s.Conn.Write(c.b)
		f.mu.Lock()
		f.q = f.q[1:]
		f.n -= len(c.b)
		f.cond.Broadcast()
		f.mu.Unlock()
		if err != nil {
			f.fail(err)
			return
		}
	}
}

// Write queues b for the impaired stream; an earlier write's error is
// returned by a later one.
func (s *StreamLink) Write(b []byte) (int, error) {
	if err := s.out.put(append([]byte(nil), b...), s.delay(false)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Read returns octets whose time has come, in order.
func (s *StreamLink) Read(b []byte) (int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if len(s.rest) > 0 {
		n := copy(b, s.rest)
		s.rest = s.rest[n:]
		return n, nil
	}
	f := s.in
	for {
		s.dmu.Lock()
		dl := s.deadline
		s.dmu.Unlock()
		if !dl.IsZero() && !time.Now().Before(dl) {
			return 0, os.ErrDeadlineExceeded
		}
		f.mu.Lock()
		if len(f.q) > 0 {
			c := f.q[0]
			if w := time.Until(c.at); w <= 0 {
				f.q = f.q[1:]
				f.n -= len(c.b)
				f.cond.Broadcast()
				f.mu.Unlock()
				n := copy(b, c.b)
				s.rest = c.b[n:]
				return n, nil
			}
			f.mu.Unlock()
			s.sleep(time.Until(c.at), dl)
			continue
		}
		if f.err != nil {
			err := f.err
			f.mu.Unlock()
			return 0, err
		}
		if f.closed {
			f.mu.Unlock()
			return 0, net.ErrClosed
		}
		f.mu.Unlock()
		var t *time.Timer
		var timeout <-chan time.Time
		if !dl.IsZero() {
			t = time.NewTimer(time.Until(dl))
			timeout = t.C
		}
		select {
		case <-f.notify:
		case <-timeout:
		case <-s.dchanged:
		case <-s.done:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// sleep waits for d, or until the deadline or a change of it.
func (s *StreamLink) sleep(d time.Duration, dl time.Time) {
	if !dl.IsZero() && time.Until(dl) < d {
		d = time.Until(dl)
	}
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.dchanged:
	case <-s.done:
	}
}

func (s *StreamLink) SetDeadline(t time.Time) error {
	_ = s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

func (s *StreamLink) SetReadDeadline(t time.Time) error {
	s.dmu.Lock()
	s.deadline = t
	s.dmu.Unlock()
	select {
	case s.dchanged <- struct{}{}:
	default:
	}
	return nil
}

func (s *StreamLink) SetWriteDeadline(t time.Time) error { return s.Conn.SetWriteDeadline(t) }

// Close closes the connection and drops what is held back.
func (s *StreamLink) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		s.out.close()
		s.in.close()
		err = s.Conn.Close()
	})
	return err
}
