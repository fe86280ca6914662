package sctp

import (
	"net"
	"sync"
	"testing"
	"time"
)

// heldConn is a connection with a Batcher of its own: the packets written
// between Cork and Flush are held and written by Flush, as a batching
// socket would send them.
type heldConn struct {
	net.Conn
	mu             sync.Mutex
	depth          int
	held           [][]byte
	corks, flushes int
	most           int // packets held by one Flush
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.depth == 0 {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, append([]byte(nil), p...))
	return len(p), nil
}

func (c *heldConn) Cork() {
	c.mu.Lock()
	c.depth++
	c.corks++
	c.mu.Unlock()
}

func (c *heldConn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.depth == 0 {
		panic("Flush without Cork")
	}
	c.depth--
	c.flushes++
	c.most = max(c.most, len(c.held))
	for _, p := range c.held {
		if _, err := c.Conn.Write(p); err != nil {
			return err
		}
	}
	c.held = c.held[:0]
	return nil
}

// TestBatcher checks that the run loop corks its Batcher around the
// packets of a burst, flushes every Cork, and that what it held arrives.
func TestBatcher(t *testing.T) {
	c, s := udpPair(t)
	hc, hs := &heldConn{Conn: c}, &heldConn{Conn: s}
	a, b := assocPair(t, hc, hs, Config{MTU: 1400, Batcher: hc}, Config{MTU: 1400, Batcher: hs})
	exchange(t, a, b, 200, 64<<10, 3, 15*time.Second)
	_ = a.Close()
	_ = b.Close()
	for name, h := range map[string]*heldConn{"client": hc, "server": hs} {
		h.mu.Lock()
		if h.corks == 0 || h.corks != h.flushes || h.depth != 0 || len(h.held) != 0 {
			t.Errorf("%s: %d Corks, %d Flushes, %d held at the end", name, h.corks, h.flushes, len(h.held))
		}
		if h.most < 2 {
			t.Errorf("%s: no Flush held more than %d packets", name, h.most)
		}
		h.mu.Unlock()
	}
}
