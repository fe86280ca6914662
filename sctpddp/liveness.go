//go:build !js

package sctpddp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// countingConn is the connection SCTP reads from: it counts the packets
// that come from the peer (one atomic add each), which the monitor reads
// to tell a live peer from a dead one, and keeps the error that ended the
// reads.
type countingConn struct {
	net.Conn
	packets atomic.Uint64

	mu      sync.Mutex
	readErr error
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.packets.Add(1)
	}
	if err != nil {
		c.mu.Lock()
		if c.readErr == nil {
			c.readErr = err
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *countingConn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

// monitor ends the association when SCTP has ended by itself (the peer's
// SHUTDOWN or ABORT, the DTLS connection closed or failed), and, with a
// dead-peer timeout, when the peer has been silent for that long: a quiet
// peer is sent a HEARTBEAT every HeartbeatInterval, and any packet from
// it, the HEARTBEAT ACK included, shows it alive. pion/sctp retransmits
// without limit and never gives up on a peer by itself.
func (a *Association) monitor() {
	defer a.wg.Done()
	timeout, interval := a.s.DeadPeerTimeout, a.s.HeartbeatInterval
	var tick <-chan time.Time
	if timeout > 0 {
		// Checking twice per interval keeps the detection within
		// timeout + interval/2.
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		tick = t.C
	}
	heard := a.in.packets.Load()
	lastHeard := time.Now()
	var lastBeat time.Time
	for {
		select {
		case <-a.closed:
			return
		case <-a.ended:
			why := ErrClosed
			if !a.local.Load() {
				why = ErrPeerClosed
				if err := a.in.err(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					why = fmt.Errorf("%w: %w", ErrPeerClosed, err)
				}
			}
			_ = a.end(why)
			return
		case now := <-tick:
			if n := a.in.packets.Load(); n != heard {
				heard, lastHeard = n, now
				continue
			}
			quiet := now.Sub(lastHeard)
			if quiet >= timeout {
				_ = a.end(fmt.Errorf("%w: nothing from %s for %v", ErrPeerDead, a.RemoteAddr(), quiet.Round(time.Millisecond)))
				return
			}
			if quiet >= interval && now.Sub(lastBeat) >= interval {
				a.sctp.ActiveHeartbeat()
				lastBeat = now
			}
		}
	}
}
