//go:build !js

package rdmap_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// endpoint is one side's verbs resources.
type endpoint struct {
	pd       *rdmap.ProtectionDomain
	scq, rcq *rdmap.CompletionQueue
	qp       *rdmap.QueuePair
}

func newEndpoint() *endpoint {
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	e := &endpoint{pd: dev.NewProtectionDomain(), scq: dev.NewCompletionQueue(64), rcq: dev.NewCompletionQueue(64)}
	qp, err := e.pd.NewQueuePair(rdmap.QPConfig{SendCQ: e.scq, RecvCQ: e.rcq})
	if err != nil {
		log.Fatal(err)
	}
	e.qp = qp
	return e
}

// connect joins two endpoints with MPA over loopback TCP.
func connect(ctx context.Context, client, server *endpoint) {
	l, err := mpa.Listen(context.Background(), "tcp", "127.0.0.1:0", &mpa.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err == nil {
			_, err = req.Accept(server.qp, nil)
		}
		done <- err
	}()
	if _, err := mpa.Dial(ctx, "tcp", l.Addr().String(), client.qp, &mpa.Config{}); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
}

// Register memory on one side and write into it from the other: the bytes
// are placed straight into the registered buffer, and the writer's
// completion says they have left.
func Example_registerAndWrite() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, bob := newEndpoint(), newEndpoint()
	connect(ctx, alice, bob)
	defer alice.qp.Close(ctx)
	defer bob.qp.Close(ctx)

	// Bob registers 64 octets the peer may write, and would advertise
	// its STag and TO to Alice (here: directly).
	buf := make([]byte, 64)
	mr, err := bob.pd.RegisterMemory(buf, 0x1000, rdmap.RemoteWrite)
	if err != nil {
		log.Fatal(err)
	}

	src, _ := alice.pd.RegisterMemory([]byte("placed directly"), 0, 0)
	err = alice.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: uint32(src.Len())}},
		RemoteSTag: mr.STag(), RemoteTO: 0x1008})
	if err != nil {
		log.Fatal(err)
	}
	c, err := alice.scq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Op, c.Status, c.ByteLen)

	// An RDMA Write is placed silently: Bob learns of it from a later
	// Send (RFC 5040 §5.5 rule 10).
	rbuf, _ := bob.pd.RegisterMemory(make([]byte, 16), 0, rdmap.LocalWrite)
	bob.qp.PostRecv(rdmap.RecvWR{ID: 7, SGL: []rdmap.SGE{{MR: rbuf, Length: 16}}})
	alice.qp.PostSend(rdmap.SendWR{ID: 2})
	if _, err := bob.rcq.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", buf[8:8+src.Len()])
	// Output:
	// RDMA_WRITE SUCCESS 15
	// "placed directly"
}

// Read a peer's registered memory: the RDMA Read completes when the data
// has been placed locally.
func Example_read() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, bob := newEndpoint(), newEndpoint()
	connect(ctx, alice, bob)
	defer alice.qp.Close(ctx)
	defer bob.qp.Close(ctx)

	remote, _ := bob.pd.RegisterMemory([]byte("remote memory, read without bob's CPU"), 0, rdmap.RemoteRead)
	local, _ := alice.pd.RegisterMemory(make([]byte, 13), 0, rdmap.LocalWrite)
	err := alice.qp.PostRead(rdmap.ReadWR{ID: 1, Local: rdmap.SGE{MR: local, Length: 13},
		RemoteSTag: remote.STag(), RemoteTO: 0})
	if err != nil {
		log.Fatal(err)
	}
	c, err := alice.scq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Op, c.Status, string(local.Bytes()))
	// Output: RDMA_READ SUCCESS remote memory
}

// Send and receive: the receiver posts a buffer, the Send consumes it,
// and the receive completion says how long the message was.
func Example_sendReceive() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, bob := newEndpoint(), newEndpoint()
	connect(ctx, alice, bob)
	defer alice.qp.Close(ctx)
	defer bob.qp.Close(ctx)

	rbuf, _ := bob.pd.RegisterMemory(make([]byte, 64), 0, rdmap.LocalWrite)
	if err := bob.qp.PostRecv(rdmap.RecvWR{ID: 42, SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}}); err != nil {
		log.Fatal(err)
	}
	msg := binary.BigEndian.AppendUint32([]byte("count="), 7)
	src, _ := alice.pd.RegisterMemory(msg, 0, 0)
	if err := alice.qp.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: uint32(len(msg))}}, Solicited: true}); err != nil {
		log.Fatal(err)
	}
	c, err := bob.rcq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Op, c.WRID, c.ByteLen, c.Flags&rdmap.FlagSolicited != 0, string(rbuf.Bytes()[:6]), binary.BigEndian.Uint32(rbuf.Bytes()[6:10]))
	// Output: RECV 42 10 true count= 7
}

// Post a list of work requests at once: the Writes and the Send after
// them start together when the function returns (over MPA, in one gather
// write), and only the Send asks for a completion. Completions come in
// posting order, so the Send's stands for the Writes before it.
func ExampleQueuePair_PostBatch() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, bob := newEndpoint(), newEndpoint()
	connect(ctx, alice, bob)
	defer alice.qp.Close(ctx)
	defer bob.qp.Close(ctx)

	board, _ := bob.pd.RegisterMemory(make([]byte, 12), 0, rdmap.RemoteWrite)
	rbuf, _ := bob.pd.RegisterMemory(make([]byte, 8), 0, rdmap.LocalWrite)
	if err := bob.qp.PostRecv(rdmap.RecvWR{ID: 9, SGL: []rdmap.SGE{{MR: rbuf, Length: 8}}}); err != nil {
		log.Fatal(err)
	}
	src, _ := alice.pd.RegisterMemory([]byte("red tan bluedone"), 0, 0)
	err := alice.qp.PostBatch(func() error {
		for i := range 3 {
			off := uint64(4 * i)
			err := alice.qp.PostWrite(rdmap.WriteWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: src, Offset: off, Length: 4}},
				RemoteSTag: board.STag(), RemoteTO: off, Unsignaled: true})
			if err != nil {
				return err
			}
		}
		return alice.qp.PostSend(rdmap.SendWR{ID: 3, SGL: []rdmap.SGE{{MR: src, Offset: 12, Length: 4}}})
	})
	if err != nil {
		log.Fatal(err)
	}
	sent, err := alice.scq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	got, err := bob.rcq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The Send was delivered after the Writes were placed (RFC 5040 §5.5).
	fmt.Println(sent.Op, sent.WRID, got.Op, string(rbuf.Bytes()[:got.ByteLen]), string(board.Bytes()))
	// Output: SEND 3 RECV done red tan blue
}
