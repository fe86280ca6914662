// Command readflow is lab 9's program: alice posts RDMA Reads (or Atomic
// FetchAdds) from bob's memory, and every Read Request she sends, every
// Request bob receives and every completion is printed as it happens,
// with the number of Requests outstanding. With --ord below --reads the
// later Reads wait in alice's send queue until a Response frees a slot
// (RFC 5040 §6.1); with --ird below --ord, alice sends more Requests than
// bob accepts and bob terminates the stream with DDP's "no buffer
// available" on queue 1.
//
// The two queue pairs are connected by an in-memory lower layer, so the
// ORD and IRD are each end's own settings: over MPA or SCTP they are
// negotiated at connection set-up (RFC 6581 §9.1) and a requester's ORD
// never exceeds its peer's IRD. --ird below --ord plays a requester that
// ignores the negotiation.
//
//	go run ./docs/labs/code/readflow --reads 6 --ord 2
//	go run ./docs/labs/code/readflow --reads 4 --ord 4 --ird 1
//	go run ./docs/labs/code/readflow --atomic --reads 4 --ord 2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

type config struct {
	reads, size, ord, ird, mulpdu int
	atomic                        bool
}

func main() {
	var c config
	flag.IntVar(&c.reads, "reads", 6, "RDMA Reads (or Atomics) alice posts at once")
	flag.IntVar(&c.size, "size", 64<<10, "octets each Read reads")
	flag.IntVar(&c.ord, "ord", 2, "alice's ORD: Requests she may have outstanding")
	flag.IntVar(&c.ird, "ird", 8, "bob's IRD: Requests he accepts outstanding")
	flag.IntVar(&c.mulpdu, "mulpdu", 1500, "largest DDP segment of the lower layer")
	flag.BoolVar(&c.atomic, "atomic", false, "post Atomic FetchAdds (RFC 7306) on bob's counter instead of Reads")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "readflow:", err)
		os.Exit(1)
	}
}

// log prints what happens, with the time since the start and the number
// of Requests alice has sent whose completion she has not yet seen.
type log struct {
	mu          sync.Mutex
	start       time.Time
	outstanding int
	most        int
}

func (l *log) printf(format string, args ...any) {
	fmt.Printf("%7.3f ms  ", float64(time.Since(l.start).Microseconds())/1000)
	fmt.Printf(format, args...)
	fmt.Println()
}

func isRequest(op uint8) bool {
	return rdmap.Opcode(op) == rdmap.OpReadRequest || rdmap.Opcode(op) == rdmap.OpAtomicRequest
}

func (l *log) alice(e trace.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Kind {
	case trace.SegmentSent:
		if isRequest(e.Opcode) && e.Last {
			l.outstanding++
			l.most = max(l.most, l.outstanding)
			l.printf("alice sends   %v MSN %d (outstanding %d)", rdmap.Opcode(e.Opcode), e.MSN, l.outstanding)
		}
	case trace.Completion:
		if op := rdmap.WorkOp(e.Opcode); op == rdmap.WorkRead || op == rdmap.WorkFetchAdd {
			if rdmap.Status(e.Status) == rdmap.StatusSuccess {
				l.outstanding--
			}
			l.printf("alice completion: %v wr %d %v (outstanding %d)", op, e.WRID, rdmap.Status(e.Status), l.outstanding)
		}
	case trace.Terminate:
		l.printf("alice TERMINATE %v", e.Err)
	}
}

func (l *log) bob(e trace.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Kind {
	case trace.MessageDelivered:
		if isRequest(e.Opcode) {
			l.printf("bob   receives %v", rdmap.Opcode(e.Opcode))
		}
	case trace.Error:
		l.printf("bob   error detected: %v", e.Err)
	}
}

func run(c config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := &log{start: time.Now()}
	ea, eb := ddptest.New(ddptest.Options{MULPDU: c.mulpdu, Depth: 16})
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	mk := func(end *ddptest.End, cfg rdmap.QPConfig, obs trace.Func) (*rdmap.QueuePair, *rdmap.ProtectionDomain, *rdmap.CompletionQueue, error) {
		pd := dev.NewProtectionDomain()
		cq := dev.NewCompletionQueue(256)
		cfg.SendCQ, cfg.RecvCQ, cfg.Observer = cq, cq, obs
		qp, err := pd.NewQueuePair(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		end.Attach(qp.Stream())
		return qp, pd, cq, qp.Start(end, ddp.Start{})
	}
	// The ORD and IRD of Reads and of Atomics are separate limits
	// (QPConfig); this program sets the pair it uses.
	acfg := rdmap.QPConfig{ORD: c.ord, AtomicORD: c.ord}
	bcfg := rdmap.QPConfig{IRD: c.ird, AtomicIRD: c.ird}
	alice, apd, acq, err := mk(ea, acfg, l.alice)
	if err != nil {
		return err
	}
	bob, bpd, _, err := mk(eb, bcfg, l.bob)
	if err != nil {
		return err
	}
	defer alice.Close(ctx)
	defer bob.Close(ctx)

	what := fmt.Sprintf("%d RDMA Reads of %d octets", c.reads, c.size)
	if c.atomic {
		what = fmt.Sprintf("%d Atomic FetchAdds of 1", c.reads)
	}
	_, ord := alice.ReadLimits()
	ird, _ := bob.ReadLimits()
	if c.atomic {
		_, ord = alice.AtomicLimits()
		ird, _ = bob.AtomicLimits()
	}
	fmt.Printf("alice ORD %d, bob IRD %d: alice posts %s at once\n", ord, ird, what)

	src, err := bpd.RegisterMemory(make([]byte, c.size), 0x10000, rdmap.RemoteRead)
	if err != nil {
		return err
	}
	counter, err := bpd.RegisterMemory(make([]byte, 8), 0x8000, rdmap.RemoteAtomic)
	if err != nil {
		return err
	}
	sinks := make([]*rdmap.MemoryRegion, c.reads)
	for i := range sinks {
		n := c.size
		if c.atomic {
			n = 8
		}
		if sinks[i], err = apd.RegisterMemory(make([]byte, n), 0, rdmap.LocalWrite); err != nil {
			return err
		}
	}
	for i, sink := range sinks {
		wr := uint64(i + 1)
		if c.atomic {
			err = alice.PostAtomic(rdmap.AtomicWR{ID: wr, Op: rdmap.FetchAdd, Add: 1,
				Local: rdmap.SGE{MR: sink, Length: 8}, RemoteSTag: counter.STag(), RemoteTO: counter.Base()})
		} else {
			err = alice.PostRead(rdmap.ReadWR{ID: wr, Local: rdmap.SGE{MR: sink, Length: uint32(c.size)},
				RemoteSTag: src.STag(), RemoteTO: src.Base()})
		}
		if errors.Is(err, rdmap.ErrNotRunning) {
			// bob's Terminate came back before this Request was
			// posted: the stream has ended, and it is refused.
			l.mu.Lock()
			l.printf("alice wr %d refused: %v", wr, err)
			l.mu.Unlock()
			sinks = sinks[:i]
			break
		}
		if err != nil {
			return err
		}
	}
	var order []uint64
	for range sinks {
		comp, err := acq.Wait(ctx)
		if err != nil {
			return err
		}
		order = append(order, comp.WRID)
		if comp.Status != rdmap.StatusSuccess {
			// The stream is gone: the rest complete flushed.
			continue
		}
		if c.atomic {
			l.mu.Lock()
			l.printf("alice wr %d: the counter held %d before this FetchAdd", comp.WRID, word(sinks[comp.WRID-1].Bytes()))
			l.mu.Unlock()
		}
	}
	l.mu.Lock()
	most := l.most
	l.mu.Unlock()
	fmt.Printf("completions in the order wr %v; at most %d Requests outstanding\n", order, most)
	if err := alice.Err(); err != nil {
		fmt.Printf("alice's stream: %v, %v\n", alice.State(), err)
	}
	if err := bob.Err(); err != nil {
		fmt.Printf("bob's stream:   %v, %v\n", bob.State(), err)
	}
	return nil
}

// word reads the 8-octet Original Remote Data Value as the number it is,
// in the byte order of the machine (the responder's word is in its host
// order; both ends are one machine here).
func word(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
