// Command invalidate is lab 10's program: bob has one protection domain
// with two queue pairs, one connected to alice and one to carol, a
// 64-octet region with remote write rights, and a memory window bound to
// alice's queue pair alone. Each step starts afresh (new queue pairs,
// new STags), does one thing, and prints what each peer sees:
//
//	window     alice and carol both Write through the window
//	send-inv   alice Sends with Invalidate for the window, then Writes to it
//	shared     alice Sends with Invalidate for the region, which both
//	           queue pairs can reach
//	local-inv  bob invalidates the region himself (Local Invalidate), then
//	           alice Writes to it
//
// The queue pairs are connected by in-memory lower layers (as in the
// tour): what is shown is RDMAP's and DDP's behaviour (RFC 5040 §5.3,
// §8.1.1; RFC 5041 §8.2), the same over MPA or SCTP.
//
//	go run ./docs/labs/code/invalidate --step window
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/rdmap"
)

func main() {
	step := flag.String("step", "window", "window, send-inv, shared or local-inv")
	flag.Parse()
	steps := map[string]func(context.Context, *world) error{
		"window": stepWindow, "send-inv": stepSendInv, "shared": stepShared, "local-inv": stepLocalInv,
	}
	f, ok := steps[*step]
	if !ok {
		fmt.Fprintf(os.Stderr, "invalidate: no step %q (window, send-inv, shared, local-inv)\n", *step)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := newWorld()
	if err == nil {
		err = f(ctx, w)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "invalidate:", err)
		os.Exit(1)
	}
}

// peer is one end of a connection: its queue pair and completion queue.
type peer struct {
	name string
	qp   *rdmap.QueuePair
	cq   *rdmap.CompletionQueue
	pd   *rdmap.ProtectionDomain
}

// world is bob's domain with two queue pairs (toAlice, toCarol), their
// peers, bob's region and a window bound to toAlice.
type world struct {
	alice, carol, toAlice, toCarol *peer
	region                         *rdmap.MemoryRegion
	window                         *rdmap.MemoryWindow
	src                            map[*peer]*rdmap.MemoryRegion
}

func newWorld() (*world, error) {
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	bobPD := dev.NewProtectionDomain()
	newPeer := func(name string, pd *rdmap.ProtectionDomain) (*peer, error) {
		if pd == nil {
			pd = dev.NewProtectionDomain()
		}
		cq := dev.NewCompletionQueue(64)
		qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
		return &peer{name: name, qp: qp, cq: cq, pd: pd}, err
	}
	connect := func(a, b *peer) error {
		ea, eb := ddptest.New(ddptest.Options{})
		ea.Attach(a.qp.Stream())
		eb.Attach(b.qp.Stream())
		if err := a.qp.Start(ea, ddp.Start{}); err != nil {
			return err
		}
		return b.qp.Start(eb, ddp.Start{})
	}
	w := &world{src: map[*peer]*rdmap.MemoryRegion{}}
	var err error
	for _, p := range []struct {
		pp   **peer
		name string
		pd   *rdmap.ProtectionDomain
	}{{&w.alice, "alice", nil}, {&w.carol, "carol", nil}, {&w.toAlice, "bob (queue pair to alice)", bobPD}, {&w.toCarol, "bob (queue pair to carol)", bobPD}} {
		if *p.pp, err = newPeer(p.name, p.pd); err != nil {
			return nil, err
		}
	}
	if err := connect(w.alice, w.toAlice); err != nil {
		return nil, err
	}
	if err := connect(w.carol, w.toCarol); err != nil {
		return nil, err
	}
	if w.region, err = bobPD.RegisterMemory(make([]byte, 64), 0x1000, rdmap.RemoteWrite); err != nil {
		return nil, err
	}
	if w.window, err = w.toAlice.qp.BindWindow(w.region, 16, 16, rdmap.RemoteWrite); err != nil {
		return nil, err
	}
	for _, p := range []*peer{w.alice, w.carol} {
		if w.src[p], err = p.pd.RegisterMemory([]byte(p.name+" was here!!!!!!"), 0, 0); err != nil {
			return nil, err
		}
	}
	// Each of bob's queue pairs has two receive buffers for Sends.
	for _, p := range []*peer{w.toAlice, w.toCarol} {
		for id := uint64(100); id < 102; id++ {
			buf, err := bobPD.RegisterMemory(make([]byte, 64), 0, rdmap.LocalWrite)
			if err != nil {
				return nil, err
			}
			if err := p.qp.PostRecv(rdmap.RecvWR{ID: id, SGL: []rdmap.SGE{{MR: buf, Length: 64}}}); err != nil {
				return nil, err
			}
		}
	}
	fmt.Printf("bob's region: STag %#08x, TO 0x1000, 64 octets, remote write, for both queue pairs\n", w.region.STag())
	fmt.Printf("bob's window: STag %#08x, TO %#x, 16 octets, remote write, bound to the queue pair to alice\n\n", w.window.STag(), w.window.Base())
	return w, nil
}

// write has from RDMA Write 16 octets to stag at to, then waits to see
// what happened: the Write's completion at from, then either bob's
// memory changed or a stream terminated.
func (w *world) write(ctx context.Context, from, at *peer, stag uint32, to uint64) error {
	fmt.Printf("%s: RDMA Write of 16 octets to STag %#08x at TO %#x\n", from.name, stag, to)
	if err := from.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: w.src[from], Length: 16}}, RemoteSTag: stag, RemoteTO: to}); err != nil {
		return err
	}
	// A Send after the Write: bob's RECV completes only once the Write
	// before it is placed (RFC 5040 §5.5), or never, if bob refused the
	// Write and terminated the stream. His Terminate may already have
	// stopped from's stream, and the Send is then refused.
	posted := 2
	if err := from.qp.PostSend(rdmap.SendWR{ID: 2}); errors.Is(err, rdmap.ErrNotRunning) {
		posted = 1
	} else if err != nil {
		return err
	}
	for range posted {
		c, err := from.cq.Wait(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("  %s's completion: %v %v\n", from.name, c.Op, c.Status)
	}
	return w.outcome(ctx, from, at)
}

// outcome reports what bob's queue pair at saw last: a receive
// completed (everything before it placed), or a Terminate.
func (w *world) outcome(ctx context.Context, from, at *peer) error {
	c, err := at.cq.Wait(ctx)
	if err == nil && c.Status == rdmap.StatusSuccess {
		fmt.Printf("  %s's completion: %v %v", at.name, c.Op, c.Status)
		if c.InvalidatedSTag != 0 {
			fmt.Printf(", invalidated STag %#08x", c.InvalidatedSTag)
		}
		fmt.Printf("\n  bob's region now: %s\n", shown(w.region.Bytes()))
		return nil
	}
	if err == nil {
		fmt.Printf("  %s's completion: %v %v\n", at.name, c.Op, c.Status)
	}
	// bob refused something and terminated the stream; the peer hears of
	// it in the Terminate.
	for _, p := range []*peer{at, from} {
		select {
		case <-p.qp.Terminated():
		case <-ctx.Done():
			return ctx.Err()
		}
		fmt.Printf("  %s: %v, %v\n", p.name, p.qp.State(), p.qp.Err())
	}
	return nil
}

// shown prints memory as text, a dot for each zero octet.
func shown(b []byte) string {
	return string(bytes.ReplaceAll(b, []byte{0}, []byte(".")))
}

// sendInvalidate has from Send with Invalidate for stag to bob.
func (w *world) sendInvalidate(ctx context.Context, from, at *peer, stag uint32) error {
	fmt.Printf("%s: Send with Invalidate, Invalidate STag %#08x\n", from.name, stag)
	if err := from.qp.PostSend(rdmap.SendWR{ID: 3, Invalidate: true, InvalidateSTag: stag}); err != nil {
		return err
	}
	c, err := from.cq.Wait(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  %s's completion: %v %v\n", from.name, c.Op, c.Status)
	return w.outcome(ctx, from, at)
}

func stepWindow(ctx context.Context, w *world) error {
	if err := w.write(ctx, w.alice, w.toAlice, w.window.STag(), w.window.Base()); err != nil {
		return err
	}
	return w.write(ctx, w.carol, w.toCarol, w.window.STag(), w.window.Base())
}

func stepSendInv(ctx context.Context, w *world) error {
	if err := w.sendInvalidate(ctx, w.alice, w.toAlice, w.window.STag()); err != nil {
		return err
	}
	return w.write(ctx, w.alice, w.toAlice, w.window.STag(), w.window.Base())
}

func stepShared(ctx context.Context, w *world) error {
	return w.sendInvalidate(ctx, w.alice, w.toAlice, w.region.STag())
}

func stepLocalInv(ctx context.Context, w *world) error {
	// A region with a window bound to it cannot be invalidated: bob
	// invalidates the window first, then the region, both as work
	// requests on his queue pair's send queue.
	for _, stag := range []uint32{w.window.STag(), w.region.STag()} {
		fmt.Printf("bob: Local Invalidate of STag %#08x\n", stag)
		if err := w.toAlice.qp.PostInvalidate(4, stag, false); err != nil {
			return err
		}
		c, err := w.toAlice.cq.Wait(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("  bob's completion: %v %v\n", c.Op, c.Status)
	}
	return w.write(ctx, w.alice, w.toAlice, w.region.STag(), w.region.Base())
}
