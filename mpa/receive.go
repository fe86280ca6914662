//go:build !js

package mpa

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// The receive side of Full Operation. One goroutine at a time holds the
// receive token (Conn.rx) and with it the Reader and the DDP stream's
// receive state: normally the connection's receive goroutine (readLoop);
// while a goroutine waits for a completion that only received FPDUs can
// bring, that goroutine itself (Poll). A waiter that reads the socket is
// woken by the network, as a plain TCP reader is, instead of by the
// receive goroutine: on two cores that hand-off is about a third of a
// small message's round trip.
//
// The token moves between them like this. A waiter that finds the token
// held asks for it (wantRx); the receive goroutine gives it up after the
// FPDU that satisfies the waiter, and sleeps. The waiter reads only while
// the next FPDU is small enough to arrive whole in the Reader's buffer, so
// that it never stops in the middle of one; when it has what it waited
// for, it lets go. The receive goroutine takes the token back when a
// waiter gives up, or once a lease has passed in which no waiter let go
// of the token: a waiter that comes back for its next completion within
// that time (a ping-pong) keeps reading without waking anyone. If the
// token is then held, its holder has been waiting in a read for that
// long: the receive goroutine interrupts the read (a read deadline in the
// past) and the waiter hands the token back and sleeps on its completion
// queue, where its context is watched.
//
// The lease starts at leaseFor and doubles, up to maxLease, each time the
// receive goroutine finds a waiter came back: a waiter that keeps coming
// back costs the receive goroutine a wake-up every maxLease rather than
// every leaseFor. Those wake-ups are what a small ping-pong feels most:
// each is a context switch, and on a virtual machine a timer firing every
// millisecond or two also keeps the idle CPUs from polling for the next
// packet (Linux's guest haltpoll governor shrinks its polling window after
// long halts): between two processes on a 2-core KVM guest the typical
// Send half round trip was 23–27 µs with a 1.6 ms maximum lease and
// 14–17 µs with 12.8 ms. A waiter that stops coming back, for one that
// came back for a long while, leaves FPDUs that nobody waits for (and a
// context that ends during its read) waiting at most 2 × maxLease, once;
// a waiter of a few completions, at most 2 × leaseFor. Nothing on a
// waiter's round trip sets a timer or reads the clock.
type receiveSide struct {
	rx      sync.Mutex  // the receive token
	rxEnded atomic.Bool // the receive side stopped: nobody reads any more
	resume  chan struct{}
	lease   *time.Timer

	wantRx  atomic.Bool // a waiter asked for the token
	wantMu  sync.Mutex
	wantFor func() bool // what the waiter waits for

	// releases counts the times a waiter let go of the token; the
	// receive goroutine, woken by the lease timer, takes the token back
	// only if none did for a whole lease. The timer is armed by the
	// first release after the receive goroutine went to sleep, not by
	// every one, so that a waiter's round trip touches no timer.
	releases   atomic.Uint64
	leaseArmed atomic.Bool

	// skipPolls counts the calls of Poll that give up at once, after one
	// found the next FPDU too large to read whole.
	skipPolls atomic.Int32

	// Owned by the token holder.
	hdr     [ddp.MaxHeaderLen]byte
	seq     uint32
	stopped bool
}

const (
	// leaseFor is how long the token may first stay unused after a
	// waiter let go before the receive goroutine takes it back; maxLease
	// is how long it grows to while the waiter keeps coming back.
	leaseFor = 200 * time.Microsecond
	maxLease = 12800 * time.Microsecond
	// bulkSkip is how many waits leave the reading to the receive
	// goroutine after one met an FPDU too large to read whole.
	bulkSkip = 64
)

func (rs *receiveSide) init() {
	rs.resume = make(chan struct{}, 1)
	rs.lease = time.NewTimer(time.Hour)
	rs.lease.Stop()
}

// canPoll reports whether a waiter may read the connection itself: on a
// plain TCP connection (whose reads time out cleanly) without Markers.
func (c *Conn) canPoll() bool {
	_, tcp := c.nc.(*net.TCPConn)
	return tcp && !c.neg.MarkersRx
}

// Poll implements ddp.Poller: it runs the receive side on the calling
// goroutine until done reports true, and then returns true. It returns
// false, leaving the receive goroutine to read, when it cannot go on
// without blocking for long: another goroutine is receiving (which then
// lets the caller have the token after the FPDU that makes done true),
// the next FPDU is too large to wait for whole (and then for the next
// bulkSkip calls: large messages keep coming in bulk transfers), the
// receive goroutine interrupted a read that waited a whole lease, or the
// connection failed (the receive goroutine meets the error again and
// reports it). done must be cheap and safe to call from any goroutine.
func (c *Conn) Poll(done func() bool) bool {
	if !c.canPoll() || c.rxEnded.Load() {
		return false
	}
	if c.skipPolls.Load() > 0 {
		c.skipPolls.Add(-1)
		return false
	}
	if !c.rx.TryLock() {
		c.wantMu.Lock()
		c.wantFor = done
		c.wantMu.Unlock()
		c.wantRx.Store(true)
		return false
	}
	// The lease runs whenever a waiter holds the token, so that a read
	// that waits for long is interrupted (readLoop). It usually runs
	// already: this is one atomic operation.
	c.armLease()
	ds := c.ep.Stream()
	for !done() {
		whole, room := c.r.Whole()
		if !room {
			// Taking the token for FPDUs the receive goroutine must
			// read costs two goroutine hand-offs per completion.
			c.skipPolls.Store(bulkSkip)
			c.handBack()
			return false
		}
		if !whole {
			if err := c.r.ReadMore(); err != nil {
				c.handBack()
				return false
			}
			continue
		}
		if !c.receive(ds) {
			c.handBack()
			return done()
		}
	}
	c.rx.Unlock()
	c.releases.Add(1)
	c.armLease()
	return true
}

// armLease starts the lease timer unless it runs.
func (c *Conn) armLease() {
	if !c.leaseArmed.Swap(true) {
		c.lease.Reset(leaseFor)
	}
}

// longAgo is a read deadline that has passed: it interrupts a read.
var longAgo = time.Unix(1, 0)

// handBack gives the token back to the receive goroutine at once.
func (c *Conn) handBack() {
	c.rx.Unlock()
	signal(c.resume)
}

// readLoop is the receive goroutine: it holds the token except while a
// waiter polls.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	ds := c.ep.Stream()
	var seen uint64 // c.releases when the lease was last looked at
	lease := leaseFor
	takeBack := false // a lease passed with no waiter letting go
	kicked := false   // the read deadline is in the past
	for {
		if c.rx.TryLock() {
			if kicked {
				c.nc.SetReadDeadline(time.Time{})
				kicked = false
			}
			for {
				if !c.receive(ds) {
					c.rx.Unlock()
					return
				}
				if c.wantRx.Load() && c.wanted() {
					break
				}
			}
			c.wantRx.Store(false)
			seen = c.releases.Load()
			c.rx.Unlock()
			c.leaseArmed.Store(true)
			lease = leaseFor
			c.lease.Reset(lease)
		} else if takeBack && !kicked {
			// The waiter holding the token has been in a read for a
			// whole lease: interrupt it; it hands the token back.
			c.nc.SetReadDeadline(longAgo)
			kicked = true
		}
		takeBack = false
		for {
			select {
			case <-c.resume:
			case <-c.lease.C:
				// A waiter that let go of the token within the last
				// lease is likely to come back for it: wait longer.
				if r := c.releases.Load(); r != seen {
					seen = r
					lease = min(2*lease, maxLease)
					c.lease.Reset(lease)
					continue
				}
				c.leaseArmed.Store(false)
				lease = leaseFor
				takeBack = true
			case <-c.closed:
				return
			}
			break
		}
	}
}

// wanted reports whether the waiter that asked for the token now has what
// it waits for: it is being woken, and will read from now on.
func (c *Conn) wanted() bool {
	c.wantMu.Lock()
	f := c.wantFor
	c.wantMu.Unlock()
	return f != nil && f()
}

// receive reads one FPDU and feeds its DDP segment to the stream. It
// returns false when the receive side has ended.
func (c *Conn) receive(ds *ddp.Stream) bool {
	hdr := &c.hdr
	n, err := c.r.Next()
	if err != nil {
		return c.fail(ds, err)
	}
	// The initiator is in Full Operation: rule 4 is met, and whatever
	// this FPDU holds may be answered, a Terminate included.
	c.firstOnce.Do(func() { close(c.firstRx) })
	hl := min(n, ddp.MaxHeaderLen)
	if err := c.r.ReadFull(hdr[:1]); err != nil {
		return c.fail(ds, err)
	}
	if want := ddp.Control(hdr[0]).HeaderLen(); want < hl {
		hl = want
	}
	if err := c.r.ReadFull(hdr[1:hl]); err != nil {
		return c.fail(ds, err)
	}
	if c.stopped {
		// "DDP MUST silently drop any subsequent incoming DDP
		// Segments." Keep the framing, place nothing.
		if err := c.drain(); err != nil {
			return c.fail(ds, err)
		}
		return true
	}
	_, t, err := ds.Check(c.seq, hdr[:hl], n-hl)
	if err != nil {
		// DDP or RDMAP refuses the segment, or the stream had already
		// stopped. The FPDU is verified first: a CRC error is what the
		// Terminate then reports (RFC 5044 §6).
		c.stopped = true
		if derr := c.drain(); derr != nil {
			return c.fail(ds, derr)
		}
		var te *term.Error
		if errors.As(err, &te) {
			ds.FailSegment(te, hdr[:hl], n)
		}
		return true
	}
	if err := t.Each(c.r.ReadFull); err != nil {
		ds.Abort()
		return c.fail(ds, err)
	}
	// The CRC covers what was just placed: only now may the segment
	// count as received (RFC 5044 §6).
	if err := c.r.Finish(); err != nil {
		ds.Abort()
		return c.fail(ds, err)
	}
	ds.End(c.seq, n-hl)
	c.seq++
	return true
}

func (c *Conn) drain() error {
	if err := c.r.Discard(c.r.Remaining()); err != nil {
		return err
	}
	return c.r.Finish()
}

// fail reports a receive error to the endpoint and ends the receive side;
// it returns false. An MPA error (CRC, Marker, framing) is answered with
// a Terminate by the endpoint, after which the connection is closed; "For
// Error codes 2 and 3, MPA MUST NOT close the TCP connection following a
// reported error. Closing the connection is the responsibility of DDP's
// ULP." (RFC 5044 §8). The end of the TCP stream is the LLP stream's
// loss.
func (c *Conn) fail(ds *ddp.Stream, err error) bool {
	c.rxEnded.Store(true)
	select {
	case <-c.closed:
		err = net.ErrClosed
	default:
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	var te *term.Error
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || !errors.As(err, &te) {
		te = term.MPAConnectionLost.With("%v", err)
	}
	ds.Fail(te)
	// The peer cannot be waiting for our first FPDU any more.
	c.firstOnce.Do(func() { close(c.firstRx) })
	return false
}
