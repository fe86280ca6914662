//go:build !js

package docs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/term"
)

// The examples of docs/guide.md. Every ```go block of the guide is a run
// of lines of this file (TestGuideSnippets checks it), and go test runs
// the examples and compares their output.

// node is one side's verbs resources: a device, a protection domain, a
// send and a receive completion queue, and a queue pair.
type node struct {
	dev      *rdmap.Device
	pd       *rdmap.ProtectionDomain
	scq, rcq *rdmap.CompletionQueue
	qp       *rdmap.QueuePair
}

func newNode() *node {
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	scq := dev.NewCompletionQueue(256) // send-side completions
	rcq := dev.NewCompletionQueue(256) // receive completions
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq})
	if err != nil {
		log.Fatal(err)
	}
	return &node{dev: dev, pd: pd, scq: scq, rcq: rcq, qp: qp}
}

// connectTCP joins client to server with MPA over TCP on loopback.
func connectTCP(ctx context.Context, client, server *node) {
	l, err := mpa.Listen("tcp", "127.0.0.1:0", &mpa.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx) // the MPA Request Frame has arrived
		if err == nil {
			_, err = req.Accept(server.qp, nil) // send the Reply, start the QP
		}
		accepted <- err
	}()

	_, err = mpa.Dial(ctx, "tcp", l.Addr().String(), client.qp, &mpa.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
}

// connectSCTP joins client to server with DDP over SCTP over DTLS on
// loopback, both ends authenticated by a pre-shared key.
func connectSCTP(ctx context.Context, client, server *node) {
	cfg := &sctpddp.Config{
		PSK:         []byte("a key both ends know"),
		PSKIdentity: []byte("guide"),
		MTU:         sctpddp.LoopbackMTU,
	}
	l, err := sctpddp.Listen(ctx, "udp", "127.0.0.1:0", cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan error, 1)
	go func() {
		a, err := l.Accept(ctx) // a DTLS/SCTP association
		if err != nil {
			accepted <- err
			return
		}
		req, err := a.Sessions(0).Accept(ctx) // a DDP Stream Session Initiate
		if err == nil {
			_, err = req.Accept(server.qp, sctpddp.SessionConfig{})
		}
		accepted <- err
	}()

	a, err := sctpddp.Dial(ctx, "udp", l.Addr().String(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	// DDP stream 1 of the association carries this queue pair.
	if _, err := sctpddp.Connect(ctx, a, 1, client.qp, sctpddp.SessionConfig{}); err != nil {
		log.Fatal(err)
	}
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
}

// Write, Read, Send and receive over MPA/TCP.
func Example_guideTCP() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, bob := newNode(), newNode()
	connectTCP(ctx, alice, bob)
	operations(ctx, alice, bob)
	// Output:
	// RDMA_WRITE SUCCESS 5
	// RDMA_READ SUCCESS "hello"
	// RDMA_READ 13 "hell"
	// SEND SUCCESS
	// RECV 7 11 "how are you"
	// RECV WR_FLUSH_ERR
}

// The same operations over DDP over SCTP over DTLS.
func Example_guideSCTP() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, bob := newNode(), newNode()
	connectSCTP(ctx, alice, bob)
	operations(ctx, alice, bob)
	// Output:
	// RDMA_WRITE SUCCESS 5
	// RDMA_READ SUCCESS "hello"
	// RDMA_READ 13 "hell"
	// SEND SUCCESS
	// RECV 7 11 "how are you"
	// RECV WR_FLUSH_ERR
}

func operations(ctx context.Context, alice, bob *node) {
	// Bob registers 64 bytes that the peer may write and read.
	buf := make([]byte, 64)
	mr, err := bob.pd.RegisterMemory(buf, 0x1000, rdmap.RemoteWrite|rdmap.RemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	stag, to := mr.STag(), uint64(0x1000) // what Bob advertises to Alice

	// RDMA Write: Alice's bytes land in Bob's buf at TO 0x1010.
	src, _ := alice.pd.RegisterMemory([]byte("hello"), 0, 0)
	err = alice.qp.PostWrite(rdmap.WriteWR{
		ID:         1,
		SGL:        []rdmap.SGE{{MR: src, Length: 5}},
		RemoteSTag: stag,
		RemoteTO:   to + 0x10,
	})
	if err != nil {
		log.Fatal(err)
	}
	c, err := alice.scq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Op, c.Status, c.ByteLen)

	// RDMA Read: Bob's bytes land in Alice's sink.
	sink, _ := alice.pd.RegisterMemory(make([]byte, 5), 0, rdmap.LocalWrite)
	err = alice.qp.PostRead(rdmap.ReadWR{
		ID:         2,
		Local:      rdmap.SGE{MR: sink, Length: 5},
		RemoteSTag: stag,
		RemoteTO:   to + 0x10,
	})
	if err != nil {
		log.Fatal(err)
	}
	c, err = alice.scq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %v %q\n", c.Op, c.Status, sink.Bytes())

	// A batch: four Reads leave together, and only the last asks for a
	// completion (Reads complete in order).
	parts, _ := alice.pd.RegisterMemory(make([]byte, 4), 0, rdmap.LocalWrite)
	err = alice.qp.PostBatch(func() error {
		for i := range 4 {
			err := alice.qp.PostRead(rdmap.ReadWR{
				ID:         uint64(10 + i),
				Local:      rdmap.SGE{MR: parts, Offset: uint64(i), Length: 1},
				RemoteSTag: stag,
				RemoteTO:   to + 0x10 + uint64(i),
				Unsignaled: i < 3,
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	c, err = alice.scq.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %d %q\n", c.Op, c.WRID, parts.Bytes())

	// Send and receive: Bob posts a buffer before Alice sends.
	rbuf, _ := bob.pd.RegisterMemory(make([]byte, 256), 0, rdmap.LocalWrite)
	err = bob.qp.PostRecv(rdmap.RecvWR{ID: 7, SGL: []rdmap.SGE{{MR: rbuf, Length: 256}}})
	if err != nil {
		log.Fatal(err)
	}
	msg, _ := alice.pd.RegisterMemory([]byte("how are you"), 0, 0)
	err = alice.qp.PostSend(rdmap.SendWR{ID: 3, SGL: []rdmap.SGE{{MR: msg, Length: 11}}})
	if err != nil {
		log.Fatal(err)
	}
	sent, _ := alice.scq.Wait(ctx)
	fmt.Println(sent.Op, sent.Status)
	got, _ := bob.rcq.Wait(ctx)
	fmt.Printf("%v %d %d %q\n", got.Op, got.WRID, got.ByteLen, rbuf.Bytes()[:got.ByteLen])

	// Closing: Close drains the send queue, then flushes what is left.
	bob.qp.PostRecv(rdmap.RecvWR{ID: 8, SGL: []rdmap.SGE{{MR: rbuf, Length: 256}}})
	alice.qp.Close(ctx)
	bob.qp.Close(ctx)
	flushed, _ := bob.rcq.Wait(ctx)
	fmt.Println(flushed.Op, flushed.Status) // the unused receive buffer
	mr.Deregister()
}

// Errors: an RDMA Write to an STag the peer never registered. The peer's
// DDP layer refuses the segment and sends a Terminate; the writer's work
// request completes with an error that carries the Terminate triple.
func Example_guideErrors() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, bob := newNode(), newNode()
	connectTCP(ctx, alice, bob)
	defer alice.qp.Close(ctx)
	defer bob.qp.Close(ctx)

	src, _ := alice.pd.RegisterMemory([]byte("x"), 0, 0)
	alice.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 1}},
		RemoteSTag: 0x12345600, RemoteTO: 0})
	// An RDMA Write has no reply: it completes once sent, or is flushed
	// if the Terminate comes first. A Read posted after it needs the
	// peer's answer, and is flushed.
	sink, _ := alice.pd.RegisterMemory(make([]byte, 1), 0, rdmap.LocalWrite)
	alice.qp.PostRead(rdmap.ReadWR{ID: 2, Local: rdmap.SGE{MR: sink, Length: 1},
		RemoteSTag: 0x12345600, RemoteTO: 0})
	for {
		c, err := alice.scq.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if c.Status != rdmap.StatusSuccess {
			fmt.Println(c.Status)
			break
		}
	}

	// The queue pair has stopped; Err says why, as a *term.Error.
	err := alice.qp.Err()
	var te *term.Error
	if errors.As(err, &te) {
		fmt.Println(te.Remote, te.Name())
	}
	if errors.Is(err, term.DDPInvalidSTag) {
		fmt.Println("invalid STag")
	} else {
		fmt.Println("stopped:", err)
	}
	// Output:
	// WR_FLUSH_ERR
	// true Tagged Buffer Error / Invalid Steering Tag
	// invalid STag
}
