// Package ddptest provides in-memory lower layers for testing DDP and
// RDMAP without sockets: an ordered pipe, a reordering pipe that delivers
// segments out of order within a seeded window (as SCTP's unordered
// delivery does), and fault injection (cut the stream, corrupt a byte,
// truncate a segment).
//
// As net/http/httptest does for HTTP, it lets a program run the protocol
// in one process, with no network: the two ends of a pipe stand in for a
// transport beneath two queue pairs (examples/tour runs that way):
//
//	a, b := ddptest.New(ddptest.Options{MULPDU: 1500, Reorder: 4, Seed: 1})
//	a.Attach(qpA.Stream())
//	b.Attach(qpB.Stream())
//	qpA.Start(a, ddp.Start{})
//	qpB.Start(b, ddp.Start{})
//
// The real transports are tested over real sockets in their own packages.
package ddptest

import (
	"errors"
	"math/rand/v2"
	"sync"
)

// Receiver is the receive side a pipe end delivers to. *ddp.Stream
// implements it.
type Receiver interface {
	Receive(seq uint32, seg []byte) error
	// Close tells the receiver its LLP stream ended (the pipe was cut).
	Close(err error)
}

// Options configures a pipe; the zero value is an ordered pipe with a
// 1500-octet MULPDU.
type Options struct {
	MULPDU int // largest segment; default 1500
	// Reorder, if above 1, delivers segments in a random order within
	// windows of up to Reorder segments that are waiting at once.
	Reorder int
	Seed    uint64 // seeds the reordering
	Depth   int    // segments in flight per direction before a writer blocks; default 256
	Fault   Fault  // applied to segments travelling from the first end to the second
}

// Fault describes one injected failure, counted in segments sent from the
// first end (index 0 is the first segment).
type Fault struct {
	// CutAfter, if above 0, cuts the pipe after that many segments: later
	// ones are lost and both ends' receivers get an LLP error.
	CutAfter int
	// Corrupt, if set, flips the bits of octet CorruptOffset in segment
	// CorruptSegment.
	Corrupt        bool
	CorruptSegment int
	CorruptOffset  int
	// Truncate, if set, cuts segment TruncateSegment to TruncateTo octets.
	Truncate        bool
	TruncateSegment int
	TruncateTo      int
}

// ErrClosed is returned by writes on a closed or cut pipe.
var ErrClosed = errors.New("ddptest: pipe closed")

// ErrLost is what receivers are told when a pipe is cut: the LLP stream
// is lost (ddp.Stream.Close wraps it in ddp.ErrLLPLost).
var ErrLost = errors.New("ddptest: test pipe cut")

type packet struct {
	seq uint32
	buf []byte
}

// End is one end of a pipe. It implements ddp.LLP for sending; Attach
// starts delivering what the other end sends.
type End struct {
	p      *pipe
	out    *dir // what this end sends
	in     *dir // what this end receives
	mulpdu int
}

type dir struct {
	ch      chan packet
	free    chan []byte
	seq     uint32
	mu      sync.Mutex // serialises writers on this direction
	fault   Fault
	count   int
	done    chan struct{}
	started bool
}

type pipe struct {
	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	ends    [2]*End
	recv    [2]Receiver
	rng     *rand.Rand
	reorder int
	wg      sync.WaitGroup
}

// New returns the two ends of a pipe.
func New(opt Options) (*End, *End) {
	if opt.MULPDU == 0 {
		opt.MULPDU = 1500
	}
	if opt.Depth == 0 {
		opt.Depth = 256
	}
	p := &pipe{closing: make(chan struct{}), reorder: opt.Reorder, rng: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15))}
	mk := func(f Fault) *dir {
		d := &dir{ch: make(chan packet, opt.Depth), free: make(chan []byte, opt.Depth+1), fault: f, done: make(chan struct{})}
		for i := 0; i < opt.Depth+1; i++ {
			d.free <- make([]byte, 0, opt.MULPDU)
		}
		return d
	}
	ab, ba := mk(opt.Fault), mk(Fault{})
	a := &End{p: p, out: ab, in: ba, mulpdu: opt.MULPDU}
	b := &End{p: p, out: ba, in: ab, mulpdu: opt.MULPDU}
	p.ends = [2]*End{a, b}
	return a, b
}

// MULPDU implements ddp.LLP.
func (e *End) MULPDU() int { return e.mulpdu }

// Flush implements ddp.LLP: WriteSegment has already copied and queued
// every segment.
func (e *End) Flush() error { return nil }

// WriteSegment implements ddp.LLP: it copies the segment into a pooled
// packet buffer and queues it for the other end.
func (e *End) WriteSegment(hdr []byte, payload [][]byte) error {
	d := e.out
	d.mu.Lock()
	cut, err := e.write(d, hdr, payload)
	d.mu.Unlock()
	return e.cutIf(cut, err)
}

// WriteNow implements ddp.NowWriter: WriteSegment when a packet buffer
// and room in the other end's queue are there already.
func (e *End) WriteNow(hdr []byte, payload [][]byte) (bool, error) {
	d := e.out
	d.mu.Lock()
	// Only writers, all under d.mu, take buffers and fill the queue: what
	// is there now stays there for this write.
	if len(d.free) == 0 || len(d.ch) == cap(d.ch) {
		d.mu.Unlock()
		return false, nil
	}
	cut, err := e.write(d, hdr, payload)
	d.mu.Unlock()
	return true, e.cutIf(cut, err)
}

func (e *End) cutIf(cut bool, err error) error {
	if cut {
		// Outside d.mu: the receivers' Fail may send (a Terminate).
		e.p.cut()
	}
	return err
}

func (e *End) write(d *dir, hdr []byte, payload [][]byte) (cut bool, err error) {
	var buf []byte
	select {
	case buf = <-d.free:
	case <-e.p.closing:
		return false, ErrClosed
	}
	buf = append(buf[:0], hdr...)
	for _, s := range payload {
		buf = append(buf, s...)
	}
	if len(buf) > e.mulpdu {
		d.free <- buf
		return false, errors.New("ddptest: segment larger than the MULPDU")
	}
	f := &d.fault
	i := d.count
	d.count++
	if f.CutAfter > 0 && i >= f.CutAfter {
		d.free <- buf
		return true, ErrClosed
	}
	if f.Corrupt && i == f.CorruptSegment && f.CorruptOffset < len(buf) {
		buf[f.CorruptOffset] ^= 0xff
	}
	if f.Truncate && i == f.TruncateSegment && f.TruncateTo < len(buf) {
		buf = buf[:f.TruncateTo]
	}
	select {
	case d.ch <- packet{seq: d.seq, buf: buf}:
		d.seq++
		return false, nil
	case <-e.p.closing:
		d.free <- buf
		return false, ErrClosed
	}
}

// Attach starts delivering to r the segments the other end sends, on a
// goroutine of the pipe's own, until Close.
func (e *End) Attach(r Receiver) {
	p := e.p
	p.mu.Lock()
	defer p.mu.Unlock()
	idx := 0
	if e == p.ends[1] {
		idx = 1
	}
	p.recv[idx] = r
	d := e.in
	if d.started {
		return
	}
	d.started = true
	p.wg.Add(1)
	go p.deliver(d, r)
}

func (p *pipe) deliver(d *dir, r Receiver) {
	defer p.wg.Done()
	defer close(d.done)
	var batch []packet
	for {
		var pk packet
		select {
		case pk = <-d.ch:
		case <-p.closing:
			return
		}
		batch = append(batch[:0], pk)
		// Gather what else is waiting, up to the reordering window.
	gather:
		for len(batch) < p.reorder {
			select {
			case pk = <-d.ch:
				batch = append(batch, pk)
			default:
				break gather
			}
		}
		if len(batch) > 1 {
			p.mu.Lock()
			p.rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			p.mu.Unlock()
		}
		for _, pk := range batch {
			r.Receive(pk.seq, pk.buf)
			d.free <- pk.buf
		}
	}
}

// cut loses the pipe: both receivers are told the LLP stream is lost.
func (p *pipe) cut() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.closing)
	recv := p.recv
	p.mu.Unlock()
	for _, r := range recv {
		if r != nil {
			r.Close(ErrLost)
		}
	}
}

// Close closes the pipe from this end without reporting an error, and
// waits for its delivery goroutines to stop. It must not be called from a
// Receiver's method.
func (e *End) Close() error {
	p := e.p
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}
