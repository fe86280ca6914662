package llp

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Result is one transfer as the sender and the receiver saw it.
type Result struct {
	Sent     int64         // bytes the sender handed to the transport
	Verified int64         // bytes the receiver verified
	Dups     int64         // units that arrived twice (message transports)
	Elapsed  time.Duration // from the first write to the last verified byte
}

// Quiet is how long Wait waits for more bytes of a Lossy transport once
// none come: what has not come by then is lost. A reliable transport's
// bytes are waited for until Stalled.
const (
	Quiet   = 500 * time.Millisecond
	Stalled = 60 * time.Second
)

// Wait waits until c has verified want bytes, or has verified nothing
// new for quiet, or ctx ends; it returns c's error, if any.
func Wait(ctx context.Context, c *Counter, want int64, quiet time.Duration) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	last, since := c.Bytes(), time.Now()
	for {
		if err := c.Err(); err != nil {
			return err
		}
		n := c.Bytes()
		if n >= want {
			return nil
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > quiet {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Transfer moves msgs messages over t in this process: a listener on
// 127.0.0.1, one connection, the receiver checking every byte.
func Transfer(ctx context.Context, t Transport, sec *Security, msgs int) (Result, error) {
	l, err := t.Listen(ctx, "127.0.0.1:0", sec)
	if err != nil {
		return Result{}, err
	}
	defer l.Close()
	p, err := Connect(ctx, t, l, l.Addr().String(), sec)
	if err != nil {
		return Result{}, err
	}
	r, err := p.Move(ctx, msgs)
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return r, err
}

// A Pair is a connected sender and receiver in one process.
type Pair struct {
	S     Sender
	R     Receiver
	C     *Counter
	done  chan error
	quiet time.Duration
}

// Connect dials addr (l's address, or a relay in front of it) and
// accepts on l, and starts the receiver.
func Connect(ctx context.Context, t Transport, l Listener, addr string, sec *Security) (*Pair, error) {
	type acc struct {
		r   Receiver
		err error
	}
	ch := make(chan acc, 1)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		r, err := l.Accept(actx)
		ch <- acc{r, err}
	}()
	s, err := t.Dial(ctx, addr, sec)
	if err != nil {
		cancel()
		if a := <-ch; a.r != nil {
			a.r.Close()
		}
		return nil, fmt.Errorf("%s: dial: %w", t.Name, err)
	}
	var a acc
	select {
	case a = <-ch:
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	if a.err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: accept: %w", t.Name, a.err)
	}
	p := &Pair{S: s, R: a.r, C: &Counter{}, done: make(chan error, 1), quiet: Stalled}
	if t.Lossy {
		p.quiet = Quiet
	}
	go func() { p.done <- a.r.Receive(p.C) }()
	return p, nil
}

// Move sends msgs more messages and waits until the receiver has them.
func (p *Pair) Move(ctx context.Context, msgs int) (Result, error) {
	start := time.Now()
	sent0, got0, dups0 := p.S.Sent(), p.C.Bytes(), p.C.Dups()
	for msgs > 0 {
		k := min(msgs, Batch)
		if err := p.S.Send(ctx, k); err != nil {
			return Result{}, err
		}
		msgs -= k
	}
	err := Wait(ctx, p.C, p.S.Sent(), p.quiet)
	r := Result{
		Sent:     p.S.Sent() - sent0,
		Verified: p.C.Bytes() - got0,
		Dups:     p.C.Dups() - dups0,
		Elapsed:  p.C.Last().Sub(start),
	}
	return r, err
}

// Close closes both ends and waits for the receiver to stop.
func (p *Pair) Close() error {
	err := p.S.Close()
	p.R.Close()
	select {
	case rerr := <-p.done:
		if err == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = rerr
		}
	case <-time.After(5 * time.Second):
		err = errors.New("llp: the receiver did not stop")
	}
	return err
}
