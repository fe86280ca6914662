package impair

import (
	"math/rand/v2"
	"sync"
	"time"
)

// packet is a datagram waiting in a pipe: due at at (nanoseconds on the
// proxy's clock), seq breaking ties so that datagrams due at once leave
// in the order they came.
type packet struct {
	at  int64
	seq uint64
	b   []byte
}

// pipe is one direction of a flow: a queue of datagrams ordered by the
// time they are due, and the goroutine that sends each when it is due.
type pipe struct {
	p    *Proxy
	link Link
	out  func([]byte) error
	kick chan struct{} // wakes run when the head of the queue changes
	done chan struct{}

	mu       sync.Mutex // guards everything below
	q        []packet   // a binary min-heap on (at, seq)
	seq      uint64
	rng      *rand.Rand
	start    int64    // the flow's first datagram, for the outage
	linkFree int64    // when a capped link has sent what it holds
	free     [][]byte // buffers to reuse, by size class
	st       Stats
	closed   bool
}

func newPipe(p *Proxy, l Link, start int64, out func([]byte) error) *pipe {
	if l.Queue == 0 {
		l.Queue = defaultQueue
	}
	return &pipe{
		p: p, link: l, out: out, start: start,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
		rng: rand.New(rand.NewPCG(0, 0)),
	}
}

func (q *pipe) seed(seed, stream uint64) {
	q.rng = rand.New(rand.NewPCG(seed, stream))
}

func (q *pipe) stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.st
}

func (q *pipe) close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
	q.mu.Unlock()
}

// push decides the datagram's fate and queues it (b is copied).
func (q *pipe) push(b []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	now := q.p.now()
	cfg := &q.p.cfg
	if cfg.OutageFor > 0 {
		if t := now - q.start; t >= int64(cfg.OutageAt) && t < int64(cfg.OutageAt+cfg.OutageFor) {
			q.st.Outage++
			return
		}
	}
	l := &q.link
	if now-q.start < int64(cfg.ImpairAfter) {
		l = &Link{}
	}
	if l.Loss > 0 && q.rng.Float64() < l.Loss {
		q.st.Lost++
		return
	}
	sent := now
	if l.Rate > 0 {
		begin := max(now, q.linkFree)
		if ahead := (begin - now) * l.Rate / int64(time.Second); ahead+int64(len(b)) > int64(l.Queue) {
			q.st.Overflow++
			return
		}
		q.linkFree = begin + int64(len(b))*int64(time.Second)/l.Rate
		sent = q.linkFree
	}
	copies := 1
	if l.Duplicate > 0 && q.rng.Float64() < l.Duplicate {
		copies = 2
		q.st.Duplicated++
	}
	head := len(q.q) == 0
	for range copies {
		if len(q.q) >= cfg.MaxQueued {
			q.st.Overflow++
			return
		}
		at := sent + int64(l.Delay)
		if l.Jitter > 0 {
			at += q.rng.Int64N(2*int64(l.Jitter)+1) - int64(l.Jitter)
			at = max(at, sent)
		}
		if !head && at < q.q[0].at {
			head = true
		}
		q.seq++
		q.heapPush(packet{at: at, seq: q.seq, b: append(q.buffer(len(b)), b...)})
	}
	if head {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
}

// run sends each datagram when it is due, until the pipe is closed.
func (q *pipe) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return
		}
		wait := time.Hour
		if len(q.q) > 0 {
			if d := q.q[0].at - q.p.now(); d > 0 {
				wait = time.Duration(d)
			} else {
				pk := q.heapPop()
				q.st.Forwarded++
				q.mu.Unlock()
				q.out(pk.b) // an error (the peer's socket gone) loses it, as a network would
				q.mu.Lock()
				q.recycle(pk.b)
				q.mu.Unlock()
				continue
			}
		}
		q.mu.Unlock()
		t.Reset(wait)
		select {
		case <-t.C:
		case <-q.kick:
		case <-q.done:
			return
		}
	}
}

// Buffer size classes: a small datagram does not hold 64 KiB while it
// waits.
var classes = [...]int{2 << 10, 16 << 10, 64 << 10}

func class(n int) int {
	for i, c := range classes {
		if n <= c {
			return i
		}
	}
	return len(classes) - 1
}

// buffer returns an empty buffer that holds n octets.
func (q *pipe) buffer(n int) []byte {
	c := class(n)
	for i := len(q.free) - 1; i >= 0 && i >= len(q.free)-8; i-- {
		if b := q.free[i]; cap(b) == classes[c] {
			q.free[i] = q.free[len(q.free)-1]
			q.free = q.free[:len(q.free)-1]
			return b[:0]
		}
	}
	return make([]byte, 0, max(classes[c], n))
}

// maxFree bounds the buffers kept for reuse.
const maxFree = 4096

func (q *pipe) recycle(b []byte) {
	if len(q.free) < maxFree {
		q.free = append(q.free, b[:0])
	}
}

func (a packet) before(b packet) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

func (q *pipe) heapPush(pk packet) {
	q.q = append(q.q, pk)
	i := len(q.q) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !q.q[i].before(q.q[parent]) {
			break
		}
		q.q[i], q.q[parent] = q.q[parent], q.q[i]
		i = parent
	}
}

func (q *pipe) heapPop() packet {
	top := q.q[0]
	last := len(q.q) - 1
	q.q[0] = q.q[last]
	q.q[last] = packet{}
	q.q = q.q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q.q) && q.q[l].before(q.q[m]) {
			m = l
		}
		if r < len(q.q) && q.q[r].before(q.q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q.q[i], q.q[m] = q.q[m], q.q[i]
		i = m
	}
	return top
}
