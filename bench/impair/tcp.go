package impair

import (
	"net"
	"sync"
	"time"
)

// TCPRelay accepts TCP connections and relays each to a target, every
// byte delayed by Delay in each direction. It holds at most
// relayChunks chunks of up to 64 KiB per direction; the sender then
// waits, as TCP's flow control makes it.
type TCPRelay struct {
	l      net.Listener
	target string
	delay  time.Duration

	mu     sync.Mutex // guards conns, closed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

const (
	relayChunk  = 64 << 10
	relayChunks = 256
)

// ListenTCP starts a relay on addr that forwards to target with delay
// each way.
func ListenTCP(addr, target string, delay time.Duration) (*TCPRelay, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &TCPRelay{l: l, target: target, delay: delay, conns: make(map[net.Conn]struct{})}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address clients connect to.
func (r *TCPRelay) Addr() net.Addr { return r.l.Addr() }

// Close stops the relay and its connections.
func (r *TCPRelay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.l.Close()
	r.wg.Wait()
	return err
}

func (r *TCPRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *TCPRelay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

func (r *TCPRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c)
			s, err := net.DialTimeout("tcp", r.target, 10*time.Second)
			if err != nil {
				return
			}
			if !r.track(s) {
				return
			}
			defer r.untrack(s)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); r.pipe(s, c) }()
			go func() { defer wg.Done(); r.pipe(c, s) }()
			wg.Wait()
		}()
	}
}

type chunk struct {
	at time.Time
	b  []byte
}

// pipe copies from src to dst, each chunk held until Delay after it was
// read; at src's end it closes dst's writing half.
func (r *TCPRelay) pipe(dst, src net.Conn) {
	ch := make(chan chunk, relayChunks)
	free := make(chan []byte, relayChunks+2)
	go func() {
		defer close(ch)
		for {
			var b []byte
			select {
			case b = <-free:
			default:
				b = make([]byte, relayChunk)
			}
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{time.Now().Add(r.delay), b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	failed := false
	for c := range ch {
		if failed {
			continue // drain, so that the reader ends
		}
		if d := time.Until(c.at); d > 0 {
			t.Reset(d)
			<-t.C
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			src.Close()
			continue
		}
		select {
		case free <- c.b[:cap(c.b)]:
		default:
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}
