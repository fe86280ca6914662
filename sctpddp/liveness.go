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

// countingConn is the connection SCTP reads from and writes to: it counts
// the packets each way (one atomic add each), which the monitor reads to
// tell a live peer from a dead one and to know when to send a heartbeat,
// and keeps the error that ended the reads.
type countingConn struct {
	net.Conn
	in, out atomic.Uint64

	mu      sync.Mutex
	readErr error
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.in.Add(1)
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

func (c *countingConn) Write(b []byte) (int, error) {
	c.out.Add(1)
	return c.Conn.Write(b)
}

func (c *countingConn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

// monitor ends the association when SCTP has ended by itself (the peer's
// SHUTDOWN or ABORT, the DTLS connection closed or failed), and, with a
// dead-peer timeout, when nothing has come from the peer for that long.
// pion/sctp retransmits without limit and never gives up on a peer by
// itself.
//
// Liveness needs no answer from the peer: each end sends an SCTP
// HEARTBEAT whenever it has sent nothing for HeartbeatInterval, so a live
// peer is heard at least that often, idle or not, and a peer that only
// receives still sends SACKs. (An answer could not be relied on: pion/sctp
// v1.11.3's ActiveHeartbeat sends a HEARTBEAT without its Heartbeat
// Information parameter, because chunkHeartbeat has Marshal but not the
// marshal its packet encoder calls, and pion answers such a HEARTBEAT
// with nothing.)
func (a *Association) monitor() {
	defer a.wg.Done()
	timeout, interval := a.s.DeadPeerTimeout, a.s.HeartbeatInterval
	var tick <-chan time.Time
	if interval > 0 {
		// Checking twice per interval keeps a heartbeat within 1.5
		// intervals of the last packet sent, and the detection within
		// timeout + interval/2.
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		tick = t.C
	}
	heard, sent := a.in.in.Load(), a.in.out.Load()
	lastHeard, lastSent := time.Now(), time.Now()
	for {
		select {
		case <-a.closed:
			return
		case <-a.ended:
			why := ErrClosed
			if a.lingered.Load() {
				why = ErrSessionsEnded
			} else if !a.local.Load() {
				why = ErrPeerClosed
				if cause := a.sctp.Cause(); cause != nil {
					why = cause
				} else if err := a.in.err(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					why = fmt.Errorf("%w: %w", ErrPeerClosed, err)
				}
			}
			_ = a.end(why)
			return
		case now := <-tick:
			if n := a.in.in.Load(); n != heard {
				heard, lastHeard = n, now
			}
			if n := a.in.out.Load(); n != sent {
				sent, lastSent = n, now
			}
			if quiet := now.Sub(lastHeard); timeout > 0 && quiet >= timeout {
				_ = a.end(fmt.Errorf("%w: nothing from %s for %v", ErrPeerDead, a.RemoteAddr(), quiet.Round(time.Millisecond)))
				return
			}
			if now.Sub(lastSent) >= interval {
				a.sctp.Heartbeat()
			}
		}
	}
}
