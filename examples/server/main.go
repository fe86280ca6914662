// Server is the server half of a two-process example (examples/client is
// the other): it accepts connections until interrupted, gives each client
// a queue pair and a region of its own, advertised in the Accept's private
// data, prints every Send that arrives and reposts its receive buffer,
// and reports how each client's stream ended.
//
//	go run ./examples/server -listen tcp://127.0.0.1:4791
//	go run ./examples/server -listen sctp://127.0.0.1:4792 -psk "lab key"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/term"
)

const (
	regionSize = 1 << 20 // each client's region
	recvBufs   = 8       // receive buffers posted per client
	recvSize   = 4096
)

func main() {
	listen := flag.String("listen", "tcp://127.0.0.1:4791", "the `URL` to listen on: tcp://host:port or sctp://host:port")
	psk := flag.String("psk", "lab key", "sctp://: the pre-shared key both ends know")
	deadPeer := flag.Duration("dead-peer", 0, "sctp://: end a client's stream after this long without a word from it (0: the default, 30s)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := &iwarp.Config{SCTP: &sctpddp.Config{PSK: []byte(*psk), PSKIdentity: []byte("example"), DeadPeerTimeout: *deadPeer}}
	l, err := iwarp.Listen(ctx, *listen, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on", l.URL())

	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	var wg sync.WaitGroup
	for n := 1; ; n++ {
		req, err := l.Accept(ctx)
		if err != nil {
			break // interrupted
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := serve(ctx, dev, req, n); err != nil {
				fmt.Printf("client %d: %v\n", n, err)
			}
		}()
	}
	l.Close()
	wg.Wait()
}

// serve runs one client's connection until its stream ends.
func serve(ctx context.Context, dev *rdmap.Device, req *iwarp.Request, n int) error {
	// Each client has a protection domain of its own: its STags are
	// good on its queue pair only.
	pd := dev.NewProtectionDomain()
	region, err := pd.RegisterMemory(make([]byte, regionSize), 0, rdmap.RemoteWrite|rdmap.RemoteRead)
	if err != nil {
		req.Reject(nil)
		return err
	}
	defer region.Deregister()
	scq, rcq := dev.NewCompletionQueue(16), dev.NewCompletionQueue(recvBufs)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq, RecvDepth: recvBufs})
	if err != nil {
		req.Reject(nil)
		return err
	}
	// Receive buffers go up before the Accept: a Send may follow it at
	// once, and one with no buffer waiting ends the stream.
	bufs := make([]*rdmap.MemoryRegion, recvBufs)
	for i := range bufs {
		bufs[i], _ = pd.RegisterMemory(make([]byte, recvSize), 0, rdmap.LocalWrite)
		if err := qp.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: bufs[i], Length: recvSize}}}); err != nil {
			req.Reject(nil)
			return err
		}
	}
	// The region's STag, Tagged Offset and length ride in the Accept's
	// private data.
	conn, err := req.Accept(ctx, qp, region.Remote().Append(nil))
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Printf("client %d: connected from %v over %s\n", n, conn.RemoteAddr(), conn.Transport())

	for {
		// Wait returns the error the stream ended with once the queue
		// pair has ended and its completions have been taken.
		c, err := rcq.Wait(ctx)
		if err != nil {
			fmt.Printf("client %d: ended: %s\n", n, howEnded(conn, err))
			return nil
		}
		if c.Status != rdmap.StatusSuccess {
			continue // flushed as the stream stopped: Wait reports why next
		}
		fmt.Printf("client %d: Send of %d octets: %q\n", n, c.ByteLen, bufs[c.WRID].Bytes()[:c.ByteLen])
		if err := qp.PostRecv(rdmap.RecvWR{ID: c.WRID, SGL: []rdmap.SGE{{MR: bufs[c.WRID], Length: recvSize}}}); err != nil {
			continue // the stream has stopped
		}
	}
}

// howEnded names the kind of a stream's end.
func howEnded(conn *iwarp.Conn, err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	// The queue pair has ended: the Conn says why in iwarp's words.
	err = conn.Err()
	var te *term.Error
	switch {
	case errors.Is(err, rdmap.ErrDisconnected):
		return "disconnected in order"
	case errors.Is(err, iwarp.ErrPeerDead):
		return fmt.Sprintf("peer dead at %s: %v", time.Now().Format("15:04:05.000"), err)
	case errors.As(err, &te):
		return fmt.Sprintf("Terminate (%s): %v", te.Layer, err)
	case errors.Is(err, rdmap.ErrLLPLost):
		return fmt.Sprintf("transport lost: %v", err)
	}
	return err.Error()
}
