// Command tour shows direct data placement happening: two RDMAP queue
// pairs connected by an in-memory lower layer that reorders segments (as
// SCTP's unordered delivery does) exchange an RDMA Write, a Send, an RDMA
// Read and finally a Write to an STag that does not exist. Every segment
// sent and placed, every message delivered, every completion and the
// resulting Terminate are printed as they happen.
//
//	go run ./examples/tour
package main

import (
	"context"
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

func main() {
	mulpdu := flag.Int("mulpdu", 64, "largest DDP segment (header and payload), in octets")
	reorder := flag.Int("reorder", 4, "reorder segments within windows of this many (1: in order)")
	flag.Parse()
	if err := run(*mulpdu, *reorder); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

var printMu sync.Mutex

func observer(name string) trace.Observer {
	return trace.Func(func(e trace.Event) {
		printMu.Lock()
		defer printMu.Unlock()
		op := rdmap.Opcode(e.Opcode)
		switch e.Kind {
		case trace.SegmentSent, trace.SegmentPlaced:
			verb := "sent  "
			if e.Kind == trace.SegmentPlaced {
				verb = "placed"
			}
			last := ""
			if e.Last {
				last = " L"
			}
			if e.Tagged {
				fmt.Printf("%s %s seg #%-3d %-22v STag %#08x TO %#06x len %3d%s\n", name, verb, e.Seq, op, e.STag, e.TO, e.Len, last)
			} else {
				fmt.Printf("%s %s seg #%-3d %-22v QN %d MSN %d MO %4d len %3d%s\n", name, verb, e.Seq, op, e.QN, e.MSN, e.MO, e.Len, last)
			}
		case trace.MessageDelivered:
			fmt.Printf("%s DELIVERED %v (%d octets)\n", name, op, e.Len)
		case trace.Completion:
			fmt.Printf("%s completion: %v wr %d %v, %d octets\n", name, rdmap.WorkOp(e.Opcode), e.WRID, rdmap.Status(e.Status), e.Len)
		case trace.Terminate:
			fmt.Printf("%s TERMINATE %v\n", name, e.Err)
		case trace.StateChange:
			fmt.Printf("%s state %s\n", name, e.State)
		case trace.Error:
			fmt.Printf("%s error detected: %v\n", name, e.Err)
		}
	})
}

func run(mulpdu, reorder int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ea, eb := ddptest.New(ddptest.Options{MULPDU: mulpdu, Reorder: reorder, Seed: 1})
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	mk := func(name string, end *ddptest.End) (*rdmap.QueuePair, *rdmap.ProtectionDomain, *rdmap.CompletionQueue, *rdmap.CompletionQueue, error) {
		pd := dev.NewProtectionDomain()
		scq, rcq := dev.NewCompletionQueue(64), dev.NewCompletionQueue(64)
		qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq, Window: 64, Observer: observer(name)})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		end.Attach(qp.Stream())
		return qp, pd, scq, rcq, qp.Start(end, ddp.Start{})
	}
	alice, apd, ascq, _, err := mk("alice", ea)
	if err != nil {
		return err
	}
	bob, bpd, _, brcq, err := mk("bob  ", eb)
	if err != nil {
		return err
	}
	defer alice.Close(ctx)
	defer bob.Close(ctx)

	// Bob registers memory the peer may write and read, and a receive
	// buffer. Connected by package iwarp, he would advertise the region
	// in the private data of his Accept (examples/server).
	mem, _ := bpd.RegisterMemory(make([]byte, 256), 0x1000, rdmap.RemoteWrite|rdmap.RemoteRead)
	rbuf, _ := bpd.RegisterMemory(make([]byte, 128), 0, rdmap.LocalWrite)
	bob.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 128}}})
	fmt.Printf("bob registered 256 octets: STag %#08x at TO 0x1000\n\n", mem.STag())

	src, _ := apd.RegisterMemory([]byte("Direct data placement puts these bytes straight into bob's memory, segment by segment, in any order.  "), 0, 0)
	fmt.Println("== alice: RDMA Write of", src.Len(), "octets to TO 0x1010, then a Send")
	alice.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: uint32(src.Len())}}, RemoteSTag: mem.STag(), RemoteTO: 0x1010})
	alice.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: src, Length: 6}}})
	if _, err := brcq.Wait(ctx); err != nil {
		return err
	}
	fmt.Printf("\nbob's memory now: %q\n\n", mem.Bytes()[0x10:0x10+src.Len()])

	fmt.Println("== alice: RDMA Read of 32 octets from bob's TO 0x1010")
	sink, _ := apd.RegisterMemory(make([]byte, 32), 0, rdmap.LocalWrite)
	ascq.Wait(ctx)
	ascq.Wait(ctx)
	alice.PostRead(rdmap.ReadWR{ID: 3, Local: rdmap.SGE{MR: sink, Length: 32}, RemoteSTag: mem.STag(), RemoteTO: 0x1010})
	if _, err := ascq.Wait(ctx); err != nil {
		return err
	}
	fmt.Printf("\nalice read: %q\n\n", sink.Bytes())

	fmt.Println("== alice: RDMA Write to an STag bob never registered")
	alice.PostWrite(rdmap.WriteWR{ID: 4, SGL: []rdmap.SGE{{MR: src, Length: 8}}, RemoteSTag: 0x00abcd01})
	select {
	case <-alice.Terminated():
	case <-ctx.Done():
		return ctx.Err()
	}
	time.Sleep(50 * time.Millisecond)
	fmt.Printf("\nalice's stream: %v, %v\n", alice.State(), alice.Err())
	fmt.Printf("bob's stream:   %v, %v\n", bob.State(), bob.Err())
	return nil
}
