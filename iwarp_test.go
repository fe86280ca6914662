//go:build !js

package iwarp_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

type side struct {
	dev *rdmap.Device
	pd  *rdmap.ProtectionDomain
	cq  *rdmap.CompletionQueue
	qp  *rdmap.QueuePair
}

// writeReadBack Writes text into rb at off from cli and Reads it back
// into a region of its own, checking every octet and both completions.
func writeReadBack(t *testing.T, cli *side, rb rdmap.RemoteBuffer, off uint64, text string) {
	t.Helper()
	src, _ := cli.pd.RegisterMemory([]byte(text), 0, 0)
	sink, _ := cli.pd.RegisterMemory(make([]byte, src.Len()), 0, rdmap.LocalWrite)
	wr, _ := rb.Write(1, src, off, uint32(src.Len()))
	rr, _ := rb.Read(2, sink, off, uint32(src.Len()))
	if err := cli.qp.PostWrite(wr); err != nil {
		t.Fatal(err)
	}
	if err := cli.qp.PostRead(rr); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if cp, err := cli.cq.Wait(ctxT(t)); err != nil || cp.Status != rdmap.StatusSuccess {
			t.Fatalf("completion %+v, %v", cp, err)
		}
	}
	if !bytes.Equal(sink.Bytes(), src.Bytes()) {
		t.Fatal("read back other bytes")
	}
}

func newSide(t *testing.T) *side {
	s := &side{dev: rdmap.NewDevice(rdmap.DeviceConfig{})}
	s.pd = s.dev.NewProtectionDomain()
	s.cq = s.dev.NewCompletionQueue(64)
	qp, err := s.pd.NewQueuePair(rdmap.QPConfig{SendCQ: s.cq, RecvCQ: s.cq})
	if err != nil {
		t.Fatal(err)
	}
	s.qp = qp
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func psk() *sctpddp.Config {
	return &sctpddp.Config{PSK: []byte("lab key"), PSKIdentity: []byte("iwarp"), MTU: sctpddp.LoopbackMTU}
}

// openFDs counts the process's open file descriptors (Linux).
func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd here")
	}
	return len(es)
}

// settle waits for the goroutine count to come down to at most n.
func settle(n int) int {
	waitfor.Until(2*time.Second, func() bool { return runtime.NumGoroutine() <= n })
	return runtime.NumGoroutine()
}

// The lifecycle over each transport: the server advertises a region in
// its Accept's private data (an rdmap.RemoteBuffer), the client Writes
// into it and Reads it back, both see the events, and after Close
// nothing of either connection remains: no goroutine, no socket.
func TestDialListen(t *testing.T) {
	for _, url := range []string{"tcp://127.0.0.1:0", "sctp://127.0.0.1:0"} {
		t.Run(url[:strings.Index(url, ":")], func(t *testing.T) {
			goroutines, fds := runtime.NumGoroutine(), openFDs(t)
			var mu sync.Mutex
			var events []iwarp.EventType
			cfg := &iwarp.Config{SCTP: psk(), OnEvent: func(e iwarp.Event) {
				mu.Lock()
				events = append(events, e.Type)
				mu.Unlock()
			}}
			l, err := iwarp.Listen(ctxT(t), url, cfg)
			if err != nil {
				t.Fatal(err)
			}
			srv, cli := newSide(t), newSide(t)
			region, _ := srv.pd.RegisterMemory(make([]byte, 4096), 0x1000, rdmap.RemoteWrite|rdmap.RemoteRead)
			accepted := make(chan *iwarp.Conn, 1)
			go func() {
				r, err := l.Accept(ctxT(t))
				if err != nil {
					t.Error(err)
					close(accepted)
					return
				}
				if string(r.PrivateData()) != "hello" {
					t.Errorf("request private data %q", r.PrivateData())
				}
				c, err := r.Accept(ctxT(t), srv.qp, region.Remote().Append(nil))
				if err != nil {
					t.Error(err)
				}
				accepted <- c
			}()
			c, err := iwarp.Dial(ctxT(t), l.URL(), cli.qp, &iwarp.Config{SCTP: psk(), PrivateData: []byte("hello")})
			if err != nil {
				t.Fatal(err)
			}
			sc := <-accepted
			// Closing the Listener leaves the accepted connections alone.
			closed := make(chan struct{})
			go func() { l.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Listener.Close waits for the connections it accepted")
			}
			if c.Transport() != url[:len(url)-len("://127.0.0.1:0")] || sc == nil {
				t.Fatalf("transport %q", c.Transport())
			}
			rb, _, err := rdmap.ParseRemoteBuffer(c.PeerPrivateData())
			if err != nil || rb != region.Remote() {
				t.Fatalf("advertised %v, %v", rb, err)
			}
			writeReadBack(t, cli, rb, 100, "placed by an RDMA Write")
			// The client closes: the server's stream ends as a
			// disconnect.
			if err := c.Shutdown(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-sc.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the server did not see the disconnect")
			}
			if !errors.Is(sc.Err(), rdmap.ErrDisconnected) {
				t.Fatalf("the server's stream ended with %v", sc.Err())
			}
			sc.Close()
			if g := settle(goroutines); g > goroutines {
				buf := make([]byte, 1<<20)
				t.Fatalf("%d goroutines, %d before:\n%s", g, goroutines, buf[:runtime.Stack(buf, true)])
			}
			if f := openFDs(t); f > fds {
				t.Fatalf("%d file descriptors open, %d before", f, fds)
			}
			// The events of a stream's end are told from a goroutine of
			// their own, once Done is closed: they may come a moment later.
			seen := func() ([]iwarp.EventType, bool) {
				mu.Lock()
				defer mu.Unlock()
				want := map[iwarp.EventType]bool{iwarp.Established: true, iwarp.Disconnected: true}
				for _, e := range events {
					delete(want, e)
				}
				return slices.Clone(events), len(want) == 0
			}
			if !waitfor.Until(5*time.Second, func() bool { _, ok := seen(); return ok }) {
				got, _ := seen()
				t.Fatalf("events %v", got)
			}
		})
	}
}

// Each way a set-up fails has its own error, and the queue pair stays
// ready for another attempt.
func TestDialErrors(t *testing.T) {
	// Nobody listens.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	tcpAddr := dead.Addr().String()
	dead.Close()
	udp, _ := net.ListenPacket("udp", "127.0.0.1:0")
	udpAddr := udp.LocalAddr().String()
	udp.Close()
	cli := newSide(t)
	if _, err := iwarp.Dial(ctxT(t), "tcp://"+tcpAddr, cli.qp, nil); !errors.Is(err, iwarp.ErrUnreachable) {
		t.Fatalf("tcp, nobody: %v", err)
	}
	start := time.Now()
	if _, err := iwarp.Dial(context.Background(), "sctp://"+udpAddr, cli.qp, &iwarp.Config{SCTP: psk(), ConnectTimeout: time.Second}); !errors.Is(err, iwarp.ErrUnreachable) {
		t.Fatalf("sctp, nobody: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v", d)
	}
	// Rejected, with the reason.
	l, err := iwarp.Listen(ctxT(t), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if r, err := l.Accept(ctxT(t)); err == nil {
			r.Reject([]byte("full"))
		}
	}()
	_, err = iwarp.Dial(ctxT(t), l.URL(), cli.qp, nil)
	var re *ddp.RejectedError
	if !errors.Is(err, iwarp.ErrRejected) || !errors.As(err, &re) || string(re.PrivateData) != "full" {
		t.Fatalf("rejected: %v", err)
	}
	// A wrong pre-shared key: the handshake fails.
	sl, err := iwarp.Listen(ctxT(t), "sctp://127.0.0.1:0", &iwarp.Config{SCTP: psk()})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	bad := psk()
	bad.PSK = []byte("wrong")
	if _, err := iwarp.Dial(ctxT(t), sl.URL(), cli.qp, &iwarp.Config{SCTP: bad, ConnectTimeout: time.Second}); !errors.Is(err, iwarp.ErrHandshake) {
		t.Fatalf("wrong key: %v", err)
	}
	if cli.qp.State() != rdmap.StateIdle {
		t.Fatalf("after failed attempts the queue pair is %v", cli.qp.State())
	}
}

// DialFirst falls back from an sctp:// address whose path does not come
// up to a tcp:// one, and says which it used; when neither comes up, its
// error carries each attempt's.
func TestDialFirst(t *testing.T) {
	l, err := iwarp.Listen(ctxT(t), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := newSide(t)
	go func() {
		if r, err := l.Accept(ctxT(t)); err == nil {
			r.Accept(ctxT(t), srv.qp, nil)
		}
	}()
	udp, _ := net.ListenPacket("udp", "127.0.0.1:0")
	dead := "sctp://" + udp.LocalAddr().String()
	udp.Close()
	cli := newSide(t)
	cfg := &iwarp.Config{SCTP: psk(), ConnectTimeout: 500 * time.Millisecond}
	c, err := iwarp.DialFirst(ctxT(t), []string{dead, l.URL()}, cli.qp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Transport() != "tcp" || c.URL() != l.URL() {
		t.Fatalf("fell back to %s (%s)", c.URL(), c.Transport())
	}
	// Neither comes up.
	tl, _ := net.Listen("tcp", "127.0.0.1:0")
	deadTCP := "tcp://" + tl.Addr().String()
	tl.Close()
	other := newSide(t)
	_, err = iwarp.DialFirst(ctxT(t), []string{dead, deadTCP}, other.qp, cfg)
	if !errors.Is(err, iwarp.ErrUnreachable) {
		t.Fatalf("both unreachable: %v", err)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 2 {
		t.Fatalf("%d attempts reported", n)
	}
}
