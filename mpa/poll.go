package mpa

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
)

// The receive side of Full Operation is held by one goroutine at a time,
// the one holding the receive token (Conn.rx): the connection's receive
// goroutine (readLoop), or a goroutine that waits for completions that
// only this connection's FPDUs can bring (Poll, from rdmap's
// CompletionQueue.Wait). A waiter that holds the token reads the socket
// itself, so that the network wakes it as it wakes a plain TCP reader;
// otherwise the receive goroutine wakes and then wakes the waiter, and on
// a small machine that hand-off is a large part of a small message's
// round trip (docs/performance.md).
//
// A waiter that finds the token taken asks for it (want) and waits on its
// completion queue as usual; the receive goroutine hands the token over
// after the first FPDU that gives the waiter what it waits for (its done
// reports true, so it wakes and comes back for the token) and sleeps. A
// waiter that has taken its completion before the receive goroutine looked
// (done reports false again) withdraws its request as it leaves (Poll
// with a nil done): kept, it would make the receive goroutine hand the
// token to nobody at the next completion.
// Handed over after an FPDU that brought the waiter nothing (a peer's
// RDMA Write while it waits for its Read Response), the token would stay
// with nobody, the waiter asleep, until the lease below ended. The
// receive goroutine takes the token back when a whole lease has passed
// in which the token was free and no waiter came back for it: FPDUs
// that nobody waits for (RDMA Writes, Read Requests, a Terminate) then
// wait at most two leases. It takes it back at once when a waiter goes
// to sleep without reading (Poll with a nil done, from a waiter whose
// next completion the send route brings) and finds the token free,
// unless the token was handed to that waiter and this is its first call
// since: the token is kept for the waiter's next wait. While it sleeps
// it looks at the token holder every lease and interrupts the holder's
// read (a read deadline in the past) when the holder's context has ended
// or what it waits for has come by another way (its done reports true:
// a completion the queue pair's send side or a flush reported); Close
// interrupts it at once. The Reader keeps whatever part of an FPDU it
// had read for the next holder. So a waiter's round trip sets no timer
// and allocates nothing, and a waiter sees its context end, or a
// completion that no FPDU brought, within a lease.

// lease is how long the token may stay unused before the receive
// goroutine takes it back, and how often it looks at a waiter that holds
// the token (a variable for tests). Each look wakes a sleeping thread:
// with 5 ms, those wake-ups cost a window of RDMA Reads about 4 % of its
// bandwidth between two processes on a two-core machine, where nearly
// every look found nothing to do (docs/performance.md, "The receive
// goroutine looks at the token every 20 ms").
var lease = 20 * time.Millisecond

// longAgo is a read deadline that has passed: it interrupts a read.
var longAgo = time.Unix(1, 0)

// errInterrupted is what receive returns for a read that a waiter's
// context interrupted.
var errInterrupted = errors.New("mpa: read interrupted")

// canPoll reports whether a waiter may read the connection itself: a
// plain TCP connection, whose reads a past deadline interrupts cleanly.
func (c *Conn) canPoll() bool {
	_, ok := c.nc.(*net.TCPConn)
	return ok
}

// Poll implements ddp.LLP: it receives on the calling goroutine until done
// reports true (then it returns true), ctx ends, or the stream ends.
func (c *Conn) Poll(ctx context.Context, done func() bool) bool {
	if done == nil {
		// The waiter leaves, or sleeps without reading: a request it
		// left must not make the receive goroutine hand the token to
		// nobody later. There is one request at a time, the last made;
		// withdrawing another waiter's costs that waiter only the
		// hand-over (its completion still wakes it).
		c.kmu.Lock()
		c.want.Store(false)
		c.wanterDone = nil
		c.kmu.Unlock()
		// A token just handed over is kept for the waiter's next
		// call, when it comes back to read. Otherwise the token may
		// not stay free while this waiter sleeps: what it waits for
		// may be an FPDU (a Send's, after the last Read Response it
		// read itself), which would then wait for the receive
		// goroutine's next look, up to two leases later.
		if !c.handed.Swap(false) && c.rx.TryLock() {
			c.rx.Unlock()
			select {
			case c.resume <- struct{}{}:
			default:
			}
		}
		return false
	}
	if !c.canPoll() || c.rxEnded.Load() || c.isClosed() {
		return false
	}
	if !c.rx.TryLock() {
		c.kmu.Lock()
		c.wanterDone = done
		c.want.Store(true)
		c.kmu.Unlock()
		return false
	}
	c.handed.Store(false)
	c.kmu.Lock()
	c.holderCtx, c.holderDone = ctx, done
	c.kmu.Unlock()
	ok := true
	for ok && !done() {
		ok = !c.rxEnded.Load() && !c.isClosed() && ctx.Err() == nil && c.receive() == nil
	}
	c.kmu.Lock()
	c.holderCtx, c.holderDone = nil, nil
	c.kmu.Unlock()
	c.rx.Unlock()
	c.releases.Add(1)
	return ok
}

// kickIfDone interrupts the token holder's read if its context has ended
// or its done reports true; with force, in any case (Close).
func (c *Conn) kickIfDone(force bool) {
	c.kmu.Lock()
	defer c.kmu.Unlock()
	if c.holderCtx == nil || c.kicked.Load() {
		return
	}
	if force || c.holderCtx.Err() != nil || c.holderDone() {
		c.kicked.Store(true)
		c.nc.SetReadDeadline(longAgo)
	}
}

// unkick clears what kick set. The caller holds the token.
func (c *Conn) unkick() {
	c.kmu.Lock()
	defer c.kmu.Unlock()
	if c.kicked.Swap(false) {
		c.nc.SetReadDeadline(time.Time{})
	}
}

// readLoop is the receive goroutine. While it holds the token it reads
// each FPDU whole, verified (RFC 5044 §6), and hands its DDP segment to
// the stream, which places it then; it gives the token to a waiter that
// asked for it once that waiter has what it waits for. After the stream
// stops it reads on, placing nothing ("DDP MUST silently drop any
// subsequent incoming DDP Segments", RFC 5041 §7.1), until the peer
// closes.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer close(c.rxDone)
	// run took the token for this goroutine.
	for {
		for c.isClosed() || !c.handOver() {
			if c.rxEnded.Load() {
				c.rx.Unlock()
				return
			}
			if err := c.receive(); err != nil && err != errInterrupted {
				c.rx.Unlock()
				return
			}
		}
		c.kmu.Lock()
		c.want.Store(false)
		c.wanterDone = nil
		c.kmu.Unlock()
		// A resume sent before this goroutine last took the token asked
		// for what it has done since.
		select {
		case <-c.resume:
		default:
		}
		c.handed.Store(true)
		seen := c.releases.Load()
		c.rx.Unlock()
		c.sleep(seen)
		c.handed.Store(false)
	}
}

// handOver reports whether the receive goroutine gives the token to the
// waiter that asked for it: once that waiter has what it waits for.
func (c *Conn) handOver() bool {
	if !c.want.Load() {
		return false
	}
	c.kmu.Lock()
	done := c.wanterDone
	c.kmu.Unlock()
	// nil: the waiter withdrew its request since want was read.
	return done != nil && done()
}

// sleep returns holding the token again: once the token has been free for
// a whole lease in which no waiter let go of it, or when the connection
// closes (it then reads until the peer's FIN).
func (c *Conn) sleep(seen uint64) {
	t := time.NewTicker(lease)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.resume:
			// A waiter sleeps without reading and found the token
			// free: take it now, unless a waiter took it since.
			if c.rx.TryLock() {
				return
			}
			continue
		case <-c.closed:
			c.rx.Lock()
			return
		}
		if r := c.releases.Load(); r != seen {
			seen = r
			continue
		}
		if c.rx.TryLock() {
			return
		}
		// A waiter holds the token, in a read: its context may have
		// ended since, or what it waits for come by another way.
		c.kickIfDone(false)
	}
}

// receive reads one FPDU and hands its segment to the stream. The caller
// holds the token. It returns errInterrupted when a waiter's context
// interrupted the read, and any other error once the receive side has
// ended (it reported why to the stream).
func (c *Conn) receive() error {
	seg, err := c.r.Next()
	if err != nil {
		if errors.Is(err, errInterrupted) {
			c.unkick()
			return errInterrupted
		}
		c.rxEnded.Store(true)
		c.fail(c.ep.Stream(), err)
		return err
	}
	// The initiator is in Full Operation: rule 4 is met, and whatever
	// this FPDU holds may be answered, a Terminate included.
	c.firstOnce.Do(func() { close(c.firstRx) })
	if c.ep.Stream().Receive(c.seq, seg) == nil {
		c.seq++
	}
	return nil
}

var _ ddp.LLP = (*Conn)(nil)
