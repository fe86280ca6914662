package mpa

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
)

// receiveToken decides which goroutine reads a Conn's socket: its
// receive goroutine (readLoop), or a goroutine waiting for completions
// that only this connection's FPDUs can bring (Poll, from rdmap's
// CompletionQueue.Wait), because on a small machine waking a waiter from
// the receive goroutine costs about as much again as the round trip it
// waits for (docs/performance.md, "MPA's receive and send paths").
//
// The holder reads FPDUs and owns the Reader and Conn.seq. A waiter that
// finds the token taken asks for it (want) and sleeps on its completion
// queue; the receive goroutine gives the token up after the first FPDU
// that gives that waiter what it waits for, and sleeps. It takes the
// token back when a whole lease has passed with the token free and no
// waiter letting go of it (so FPDUs nobody waits for wait at most two
// leases), at once when a waiter sleeps without reading (Unpoll) and
// finds the token free, and at Close. While it sleeps it looks at the
// holder every lease and interrupts the holder's read (a read deadline
// in the past) when the holder's context has ended or what it waits for
// has come another way; the Reader keeps a partial FPDU for the next
// holder.
type receiveToken struct {
	free     chan struct{} // 1-buffered: holds the token while nobody reads
	want     atomic.Bool   // a waiter asks for the token
	releases atomic.Uint64 // the times a waiter let go of the token
	handed   atomic.Bool   // the token was given up for a waiter that has not called since
	resume   chan struct{} // 1-buffered: a waiter that will not read found the token free
	kicked   atomic.Bool   // the read deadline is in the past (kickIfDone)

	mu         sync.Mutex      // guards the three below; serialises kickIfDone and unkick
	holderCtx  context.Context // the context of the waiter holding the token
	holderDone func() bool     // and what it waits for
	wanterDone func() bool     // what the waiter that asked for the token waits for
}

// init makes the token, held by the receive goroutine, which starts
// reading with it: no waiter reads before it has started.
func (t *receiveToken) init() {
	t.free = make(chan struct{}, 1)
	t.resume = make(chan struct{}, 1)
}

// tryTake takes the token if it is free.
func (t *receiveToken) tryTake() bool {
	select {
	case <-t.free:
		return true
	default:
		return false
	}
}

// give lets go of the token. Only its holder calls it.
func (t *receiveToken) give() { t.free <- struct{}{} }

// ask records the request of a waiter that found the token taken;
// withdraw forgets it.
func (t *receiveToken) ask(done func() bool) {
	t.mu.Lock()
	t.wanterDone = done
	t.want.Store(true)
	t.mu.Unlock()
}

func (t *receiveToken) withdraw() {
	t.mu.Lock()
	t.want.Store(false)
	t.wanterDone = nil
	t.mu.Unlock()
}

// asked reports whether a waiter asked for the token and now has what
// it waits for: the receive goroutine then gives the token up.
func (t *receiveToken) asked() bool {
	if !t.want.Load() {
		return false
	}
	t.mu.Lock()
	done := t.wanterDone
	t.mu.Unlock()
	return done != nil && done()
}

// hold and unhold record the waiter that holds the token, for
// kickIfDone.
func (t *receiveToken) hold(ctx context.Context, done func() bool) {
	t.handed.Store(false)
	t.mu.Lock()
	t.holderCtx, t.holderDone = ctx, done
	t.mu.Unlock()
}

func (t *receiveToken) unhold() {
	t.mu.Lock()
	t.holderCtx, t.holderDone = nil, nil
	t.mu.Unlock()
	t.give()
	t.releases.Add(1)
}

// kickIfDone interrupts the holding waiter's read on nc if its context
// has ended or its done reports true; with force, in any case (Close).
func (t *receiveToken) kickIfDone(nc net.Conn, force bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.holderCtx == nil || t.kicked.Load() {
		return
	}
	if force || t.holderCtx.Err() != nil || t.holderDone() {
		t.kicked.Store(true)
		nc.SetReadDeadline(longAgo)
	}
}

// unkick clears what kickIfDone set. The caller holds the token.
func (t *receiveToken) unkick(nc net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kicked.Swap(false) {
		nc.SetReadDeadline(time.Time{})
	}
}

// lease is how long the token may stay free before the receive
// goroutine takes it back, and how often it looks at a waiter that holds
// it (a variable for tests): each look wakes a sleeping thread, which a
// stream of RDMA Reads between two processes feels at 5 ms.
var lease = 20 * time.Millisecond

// longAgo is a read deadline that has passed: it interrupts a read.
var longAgo = time.Unix(1, 0)

// errInterrupted is what receive returns for a read that kickIfDone
// interrupted.
var errInterrupted = errors.New("mpa: read interrupted")

// canPoll reports whether a waiter may read the connection itself: a
// plain TCP connection, whose reads a past deadline interrupts cleanly.
func (c *Conn) canPoll() bool {
	_, ok := c.nc.(*net.TCPConn)
	return ok
}

// Poll implements ddp.Poller: it receives on the calling goroutine until
// done reports true (then it returns true), ctx ends, or the stream
// ends; false at once when it cannot (not plain TCP, the token taken).
func (c *Conn) Poll(ctx context.Context, done func() bool) bool {
	if !c.canPoll() || c.rxEnded.Load() || c.isClosed() {
		return false
	}
	t := &c.tok
	if !t.tryTake() {
		t.ask(done)
		return false
	}
	t.hold(ctx, done)
	ok := true
	for ok && !done() {
		ok = !c.rxEnded.Load() && !c.isClosed() && ctx.Err() == nil && c.receive() == nil
	}
	t.unhold()
	return ok
}

// Unpoll implements ddp.Poller. There is one request at a time, the last
// made; withdrawing another waiter's costs that waiter only the
// hand-over (its completion still wakes it). A token just given up for
// a waiter is kept for its next Poll; otherwise the token may not stay
// free while this waiter sleeps, since what it waits for may be an FPDU
// that nobody would read for up to two leases.
func (c *Conn) Unpoll() {
	t := &c.tok
	t.withdraw()
	if !t.handed.Swap(false) && t.tryTake() {
		t.give()
		select {
		case t.resume <- struct{}{}:
		default:
		}
	}
}

// readLoop is the receive goroutine. While it holds the token it reads
// each FPDU whole, verified (RFC 5044 §6), and hands its DDP segment to
// the stream, which places it then; it gives the token up for a waiter
// that asked for it once that waiter has what it waits for. After the
// stream stops it reads on, placing nothing ("DDP MUST silently drop any
// subsequent incoming DDP Segments", RFC 5041 §7.1), until the peer
// closes.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer close(c.rxDone)
	t := &c.tok
	for {
		for c.isClosed() || !t.asked() {
			if c.rxEnded.Load() {
				return
			}
			if err := c.receive(); err != nil && err != errInterrupted {
				return
			}
		}
		t.withdraw()
		// A resume sent before this goroutine last took the token asked
		// for what it has done since.
		select {
		case <-t.resume:
		default:
		}
		t.handed.Store(true)
		seen := t.releases.Load()
		t.give()
		c.sleep(seen)
		t.handed.Store(false)
	}
}

// sleep returns holding the token again: once the token has been free for
// a whole lease in which no waiter let go of it, or when the connection
// closes (it then reads until the peer's FIN).
func (c *Conn) sleep(seen uint64) {
	t := &c.tok
	tick := time.NewTicker(lease)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-t.resume:
			// A waiter sleeps without reading and found the token
			// free: take it now, unless a waiter took it since.
			if t.tryTake() {
				return
			}
			continue
		case <-c.closed:
			<-t.free
			return
		}
		if r := t.releases.Load(); r != seen {
			seen = r
			continue
		}
		if t.tryTake() {
			return
		}
		// A waiter holds the token, in a read: its context may have
		// ended since, or what it waits for come by another way.
		t.kickIfDone(c.nc, false)
	}
}

// receive reads one FPDU and hands its segment to the stream. The caller
// holds the token. It returns errInterrupted when kickIfDone interrupted
// the read, and any other error once the receive side has ended (it
// reported why to the stream).
func (c *Conn) receive() error {
	seg, err := c.r.Next()
	if err != nil {
		if errors.Is(err, errInterrupted) {
			c.tok.unkick(c.nc)
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

var (
	_ ddp.LLP       = (*Conn)(nil)
	_ ddp.Poller    = (*Conn)(nil)
	_ ddp.NowWriter = (*Conn)(nil)
)
