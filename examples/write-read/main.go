// Write-read is the program people write first: a server registers a
// region and advertises it when it accepts; a client RDMA Writes 1 MiB
// into it, RDMA Reads it back and checks it. One process plays both
// roles, over the address given (tcp:// by default; sctp:// with a
// pre-shared key): go run ./examples/write-read [sctp://127.0.0.1:0]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

func main() {
	url := "tcp://127.0.0.1:0"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := &iwarp.Config{SCTP: &sctpddp.Config{PSK: []byte("lab key"), PSKIdentity: []byte("lab")}}
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	newQP := func() (*rdmap.QueuePair, *rdmap.CompletionQueue) {
		cq := dev.NewCompletionQueue(16)
		qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
		check(err)
		return qp, cq
	}

	// The server: a 1 MiB region the peer may write and read, advertised
	// in the accept's private data.
	l, err := iwarp.Listen(ctx, url, cfg)
	check(err)
	defer l.Close()
	region, err := pd.RegisterMemory(make([]byte, 1<<20), 0, rdmap.RemoteWrite|rdmap.RemoteRead)
	check(err)
	go func() {
		req, err := l.Accept(ctx)
		check(err)
		sqp, _ := newQP()
		conn, err := req.Accept(ctx, sqp, region.Remote().Append(nil))
		check(err)
		defer conn.Close()
		<-conn.Done() // until the client disconnects
	}()

	// The client: Write 1 MiB into the advertised region, Read it back.
	qp, cq := newQP()
	conn, err := iwarp.Dial(ctx, l.URL(), qp, cfg)
	check(err)
	remote, _, err := rdmap.ParseRemoteBuffer(conn.PeerPrivateData())
	check(err)
	data, back := make([]byte, 1<<20), make([]byte, 1<<20)
	rand.Read(data)
	src, err := pd.RegisterMemory(data, 0, 0)
	check(err)
	sink, err := pd.RegisterMemory(back, 0, rdmap.LocalWrite)
	check(err)
	write, _ := remote.Write(1, src, 0, 1<<20)
	read, _ := remote.Read(2, sink, 0, 1<<20)
	check(qp.PostWrite(write))
	check(qp.PostRead(read))
	for range 2 {
		c, err := cq.Wait(ctx)
		check(err)
		if c.Status != rdmap.StatusSuccess {
			log.Fatalf("%v: %v %v", c.Op, c.Status, c.Err)
		}
	}
	fmt.Printf("%s: wrote and read back 1 MiB, equal: %v\n", conn.Transport(), bytes.Equal(data, back))
	check(conn.Shutdown(ctx))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
