// Client is the client half of a two-process example (examples/server is
// the other): it connects, takes the region the server advertised in its
// Accept's private data, and for each round RDMA Writes the region full,
// RDMA Reads it back, checks it, and tells the server with a small Send
// by value (SendWR.Data: no registered memory).
//
//	go run ./examples/client -connect tcp://127.0.0.1:4791 -rounds 3
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

func main() {
	url := flag.String("connect", "tcp://127.0.0.1:4791", "the server's `URL`")
	psk := flag.String("psk", "lab key", "sctp://: the pre-shared key both ends know")
	rounds := flag.Int("rounds", 3, "Write, Read back and Send this many times")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(16)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
	check(err)

	cfg := &iwarp.Config{SCTP: &sctpddp.Config{PSK: []byte(*psk), PSKIdentity: []byte("example")}}
	conn, err := iwarp.Dial(ctx, *url, qp, cfg)
	check(err) // errors.Is(err, iwarp.ErrUnreachable), ErrRejected, ErrHandshake, ...
	defer conn.Close()
	remote, _, err := rdmap.ParseRemoteBuffer(conn.PeerPrivateData())
	check(err)
	fmt.Printf("connected over %s: the server's region is %v\n", conn.Transport(), remote)

	data, back := make([]byte, remote.Len), make([]byte, remote.Len)
	src, err := pd.RegisterMemory(data, 0, 0)
	check(err)
	sink, err := pd.RegisterMemory(back, 0, rdmap.LocalWrite)
	check(err)
	for r := 1; r <= *rounds; r++ {
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		write, err := remote.Write(1, src, 0, remote.Len)
		check(err)
		read, err := remote.Read(2, sink, 0, remote.Len)
		check(err)
		check(qp.PostWrite(write))
		// RDMAP orders a Read after the Write before it on the stream:
		// what the Read brings back is what the Write placed.
		check(qp.PostRead(read))
		// A small Send by value: Data is copied when posted, from
		// memory that needs no registration.
		check(qp.PostSend(rdmap.SendWR{ID: 3, Data: fmt.Appendf(nil, "round %d done", r)}))
		for range 3 {
			c, err := cq.Wait(ctx)
			check(err)
			if c.Status != rdmap.StatusSuccess {
				log.Fatalf("%v: %v: %v", c.Op, c.Status, c.Err)
			}
		}
		if !bytes.Equal(data, back) {
			log.Fatalf("round %d: read back other bytes", r)
		}
		fmt.Printf("round %d: wrote %d octets and read them back\n", r, remote.Len)
	}
	check(conn.Shutdown(ctx))
	fmt.Printf("done: %d rounds\n", *rounds)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
