//go:build !js

package docs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/iwarpgo/iwarp"
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
	conn     *iwarp.Conn // once connected
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

// connect joins alice's queue pair (the client) to bob's (the server) at
// url. Bob accepts with a description of region as private data; connect
// returns what Alice decodes from it.
func connect(ctx context.Context, url string, cfg *iwarp.Config, alice, bob *node, region *rdmap.MemoryRegion) rdmap.RemoteBuffer {
	l, err := iwarp.Listen(ctx, url, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // stops listening; accepted connections stay
	accepted := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx) // a peer asks to connect
		if err == nil {
			// Accept starts Bob's queue pair and answers with 16 octets:
			// the region's STag, Tagged Offset and length.
			bob.conn, err = req.Accept(ctx, bob.qp, region.Remote().Append(nil))
		}
		accepted <- err
	}()

	alice.conn, err = iwarp.Dial(ctx, l.URL(), alice.qp, cfg)
	if err != nil {
		log.Fatal(err) // errors.Is: iwarp.ErrUnreachable, ErrRejected, ErrHandshake, ...
	}
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
	remote, _, err := rdmap.ParseRemoteBuffer(alice.conn.PeerPrivateData())
	if err != nil {
		log.Fatal(err)
	}
	return remote
}

// Write, Read, Send and receive over MPA/TCP.
func Example_guideTCP() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, bob := newNode(), newNode()
	// Bob registers 64 bytes that the peer may write and read.
	region, err := bob.pd.RegisterMemory(make([]byte, 64), 0x1000, rdmap.RemoteWrite|rdmap.RemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	remote := connect(ctx, "tcp://127.0.0.1:0", nil, alice, bob, region)
	operations(ctx, alice, bob, remote)
	region.Deregister()
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
	region, err := bob.pd.RegisterMemory(make([]byte, 64), 0x1000, rdmap.RemoteWrite|rdmap.RemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	cfg := &iwarp.Config{SCTP: &sctpddp.Config{
		PSK:         []byte("a key both ends know"),
		PSKIdentity: []byte("guide"),
		MTU:         sctpddp.LoopbackMTU,
	}}
	remote := connect(ctx, "sctp://127.0.0.1:0", cfg, alice, bob, region)
	operations(ctx, alice, bob, remote)
	region.Deregister()
	// Output:
	// RDMA_WRITE SUCCESS 5
	// RDMA_READ SUCCESS "hello"
	// RDMA_READ 13 "hell"
	// SEND SUCCESS
	// RECV 7 11 "how are you"
	// RECV WR_FLUSH_ERR
}

func operations(ctx context.Context, alice, bob *node, remote rdmap.RemoteBuffer) {
	// RDMA Write: Alice's bytes land in Bob's region, 16 octets in.
	src, _ := alice.pd.RegisterMemory([]byte("hello"), 0, 0)
	err := alice.qp.PostWrite(rdmap.WriteWR{
		ID:         1,
		SGL:        []rdmap.SGE{{MR: src, Length: 5}},
		RemoteSTag: remote.STag,
		RemoteTO:   remote.TO + 0x10,
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
		RemoteSTag: remote.STag,
		RemoteTO:   remote.TO + 0x10,
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
				RemoteSTag: remote.STag,
				RemoteTO:   remote.TO + 0x10 + uint64(i),
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

	// Closing: Shutdown lets the send queue drain (until ctx ends), Close
	// does not wait; both flush what is left and release the transport
	// (socket, association, goroutines).
	bob.qp.PostRecv(rdmap.RecvWR{ID: 8, SGL: []rdmap.SGE{{MR: rbuf, Length: 256}}})
	alice.conn.Shutdown(ctx)
	bob.conn.Close()
	flushed, _ := bob.rcq.Wait(ctx)
	fmt.Println(flushed.Op, flushed.Status) // the unused receive buffer
}

// Errors: an RDMA Write past the end of the region the peer advertised.
// The peer's DDP layer refuses the segment and sends a Terminate; the
// writer's work requests complete with an error that carries the
// Terminate triple.
func Example_guideErrors() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice, bob := newNode(), newNode()
	region, _ := bob.pd.RegisterMemory(make([]byte, 64), 0x1000, rdmap.RemoteWrite|rdmap.RemoteRead)
	remote := connect(ctx, "tcp://127.0.0.1:0", nil, alice, bob, region)
	defer alice.conn.Close()
	defer bob.conn.Close()

	src, _ := alice.pd.RegisterMemory([]byte("x"), 0, 0)
	sink, _ := alice.pd.RegisterMemory(make([]byte, 1), 0, rdmap.LocalWrite)
	// An RDMA Write has no reply: it completes once sent, or is flushed
	// if the Terminate comes first. A Read posted with it needs the
	// peer's answer, and is flushed. (Posted after the Write alone, the
	// Read could find the stream stopped: PostRead fails, ErrNotRunning.)
	err := alice.qp.PostBatch(func() error {
		alice.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 1}},
			RemoteSTag: remote.STag, RemoteTO: remote.TO + uint64(remote.Len)})
		return alice.qp.PostRead(rdmap.ReadWR{ID: 2, Local: rdmap.SGE{MR: sink, Length: 1},
			RemoteSTag: remote.STag, RemoteTO: remote.TO})
	})
	if err != nil {
		log.Fatal(err)
	}
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

	// The stream has stopped; Err says why, as a *term.Error.
	<-alice.conn.Done()
	err = alice.conn.Err()
	var te *term.Error
	if errors.As(err, &te) {
		fmt.Println(te.Remote, te.Name())
	}
	if errors.Is(err, term.DDPBaseBounds) {
		fmt.Println("out of bounds")
	} else {
		fmt.Println("stopped:", err)
	}
	// Output:
	// WR_FLUSH_ERR
	// true Tagged Buffer Error / Base or bounds violation
	// out of bounds
}

// Under sctp:// addresses: two queue pairs share one SCTP association,
// each on a DDP stream of its own.
func Example_guideAssociation() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := &sctpddp.Config{
		PSK:         []byte("a key both ends know"),
		PSKIdentity: []byte("guide"),
		MTU:         sctpddp.LoopbackMTU,
	}
	clients := []*node{newNode(), newNode()}
	servers := []*node{newNode(), newNode()}

	l, err := sctpddp.Listen(ctx, "udp", "127.0.0.1:0", cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *sctpddp.Association, 1)
	go func() {
		a, err := l.Accept(ctx) // a DTLS/SCTP association
		if err != nil {
			log.Fatal(err)
		}
		sessions := a.Sessions(0)
		for _, n := range servers {
			req, err := sessions.Accept(ctx) // a DDP Stream Session Initiate
			if err == nil {
				_, err = req.Accept(n.qp, sctpddp.SessionConfig{})
			}
			if err != nil {
				log.Fatal(err)
			}
		}
		accepted <- a
	}()

	a, err := sctpddp.Dial(ctx, "udp", l.Addr().String(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range clients {
		// Connect picks a DDP stream no session of a uses.
		s, err := a.Connect(ctx, n.qp, sctpddp.SessionConfig{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("DDP stream", s.ID())
	}
	peer := <-accepted

	// Closing a queue pair ends its session; the association would
	// shut itself down a LingerTimeout after the last one.
	// Shutdown ends it now, delivering what is queued first.
	for _, n := range append(clients, servers...) {
		n.qp.Close(ctx)
	}
	a.Shutdown(ctx)
	<-peer.Done()
	// Output:
	// DDP stream 1
	// DDP stream 3
}
