//go:build !js

package rdmap_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// An atomic counter in Bob's memory that Alice increments with FetchAdd
// (RFC 7306 §5.1.1), as IBV_WR_ATOMIC_FETCH_AND_ADD does: each completes
// once the peer's Atomic Response has arrived, and the counter's value
// before the addition lands in Alice's 8-octet local buffer. CmpSwap then
// takes a lock word only if it is free.
func ExampleQueuePair_PostAtomic() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, bob := newEndpoint(), newEndpoint()
	connect(ctx, alice, bob)
	defer alice.qp.Close(ctx)
	defer bob.qp.Close(ctx)

	// Bob's counter (TO 0) and lock (TO 8): 64-bit words, 64-bit aligned,
	// in the machine's byte order, with remote atomic rights.
	shared := make([]byte, 16)
	binary.NativeEndian.PutUint64(shared, 100)
	mr, err := bob.pd.RegisterMemory(shared, 0, rdmap.RemoteAtomic)
	if err != nil {
		log.Fatal(err)
	}

	orig, _ := alice.pd.RegisterMemory(make([]byte, 8), 0, rdmap.LocalWrite)
	for i := range 3 {
		err := alice.qp.PostAtomic(rdmap.AtomicWR{ID: uint64(i), Op: rdmap.FetchAdd, Add: 10,
			Local: rdmap.SGE{MR: orig, Length: 8}, RemoteSTag: mr.STag(), RemoteTO: 0})
		if err != nil {
			log.Fatal(err)
		}
		c, err := alice.scq.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.Op, c.Status, binary.NativeEndian.Uint64(orig.Bytes()))
	}
	// Take the lock: swap in 1 if it holds 0.
	for _, try := range []string{"first", "second"} {
		err := alice.qp.PostAtomic(rdmap.AtomicWR{Op: rdmap.CmpSwap, Compare: 0, Swap: 1,
			Local: rdmap.SGE{MR: orig, Length: 8}, RemoteSTag: mr.STag(), RemoteTO: 8})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := alice.scq.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println(try, "CmpSwap took the lock:", binary.NativeEndian.Uint64(orig.Bytes()) == 0)
	}
	// Bob's memory changes under his feet: he would read it with
	// sync/atomic. Alice reads it with a FetchAdd of 0, which changes
	// nothing (RFC 7306 §1.1).
	err = alice.qp.PostAtomic(rdmap.AtomicWR{Op: rdmap.FetchAdd, Add: 0,
		Local: rdmap.SGE{MR: orig, Length: 8}, RemoteSTag: mr.STag(), RemoteTO: 0})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := alice.scq.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("counter", binary.NativeEndian.Uint64(orig.Bytes()))
	// Output:
	// FETCH_ADD SUCCESS 100
	// FETCH_ADD SUCCESS 110
	// FETCH_ADD SUCCESS 120
	// first CmpSwap took the lock: true
	// second CmpSwap took the lock: false
	// counter 130
}

// RDMA Write with Immediate Data (RFC 7306 §1: an RDMA Write followed by
// an Immediate Data message): the data is placed silently, and the 8
// octets of Immediate Data complete a receive at the peer once the data is
// there, as IBV_WR_RDMA_WRITE_WITH_IMM does. A SendWR with WithImm sends
// Immediate Data alone.
func Example_writeWithImmediate() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, bob := newEndpoint(), newEndpoint()
	connect(ctx, alice, bob)
	defer alice.qp.Close(ctx)
	defer bob.qp.Close(ctx)

	board, _ := bob.pd.RegisterMemory(make([]byte, 16), 0, rdmap.RemoteWrite)
	// Each Immediate Data message consumes a receive buffer of 8 octets or more.
	rbuf, _ := bob.pd.RegisterMemory(make([]byte, 16), 0, rdmap.LocalWrite)
	for i := range 2 {
		bob.qp.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(8 * i), Length: 8}}})
	}

	src, _ := alice.pd.RegisterMemory([]byte("hello, bob"), 0, 0)
	err := alice.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 10}}, RemoteSTag: board.STag(),
		WithImm: true, Imm: 10})
	if err != nil {
		log.Fatal(err)
	}
	if err := alice.qp.PostSend(rdmap.SendWR{ID: 2, WithImm: true, Imm: 0xc0ffee, Solicited: true}); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		c, err := bob.rcq.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		// The first one's Immediate Data says how much Alice wrote; it is
		// all on the board when the receive completes.
		fmt.Printf("%v imm=%#x solicited=%v board=%q\n", c.Op, c.Imm, c.Flags&rdmap.FlagSolicited != 0, board.Bytes()[:10])
	}
	// Output:
	// RECV_WITH_IMM imm=0xa solicited=false board="hello, bob"
	// RECV_WITH_IMM imm=0xc0ffee solicited=true board="hello, bob"
}
