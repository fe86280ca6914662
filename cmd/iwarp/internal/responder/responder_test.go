package responder

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

// pipeRequest is a Request over an in-memory pipe: Accept starts the
// responder's queue pair on one end and hands the private data to the
// client.
type pipeRequest struct {
	end      *ddptest.End
	pd       chan []byte
	rejected chan struct{}
	closed   chan struct{}
	fail     error // Accept's error, if set
}

func (r *pipeRequest) Accept(_ context.Context, qp *rdmap.QueuePair, privateData []byte) (Conn, error) {
	if r.fail != nil {
		return nil, r.fail
	}
	r.end.Attach(qp.Stream())
	if err := qp.Start(r.end, ddp.Start{}); err != nil {
		return nil, err
	}
	r.pd <- append([]byte(nil), privateData...)
	return &pipeConn{qp: qp, closed: r.closed}, nil
}

func (r *pipeRequest) Reject() { close(r.rejected) }

type pipeConn struct {
	qp     *rdmap.QueuePair
	closed chan struct{}
}

type pipeInfo struct {
	Transport string `json:"transport"`
}

func (i pipeInfo) String() string { return i.Transport }

func (c *pipeConn) Info() fmt.Stringer                 { return pipeInfo{"pipe"} }
func (c *pipeConn) PeerDead() (time.Time, error, bool) { return time.Time{}, nil, false }
func (c *pipeConn) Close(ctx context.Context)          { c.qp.Close(ctx); close(c.closed) }

// syncBuffer is the Log's writer, read by the test while Serve writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) events(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var evs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%q: %v", sc.Bytes(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// A client reads the advertised region, Writes into it and Sends twice;
// the responder reports the connection, each Send with its MSN and
// SHA-256, and the region's final SHA-256, and reposts its buffers.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := ddptest.New(ddptest.Options{MULPDU: 512})
	client := rdmaptest.NewPeer(t, rdmap.QPConfig{})
	a.Attach(client.QP.Stream())
	if err := client.QP.Start(a, ddp.Start{}); err != nil {
		t.Fatal(err)
	}
	req := &pipeRequest{end: b, pd: make(chan []byte, 1), rejected: make(chan struct{}), closed: make(chan struct{})}
	out := &syncBuffer{}
	cfg := &Config{MRSize: 4096, RecvDepth: 1, RecvSize: 256}
	served := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { served <- Serve(sctx, rdmap.NewDevice(rdmap.DeviceConfig{}), req, 7, cfg, NewLog(out, true)) }()

	rb, _, err := rdmap.ParseRemoteBuffer(<-req.pd)
	if err != nil {
		t.Fatal(err)
	}
	if rb.TO != TO || rb.Len != 4096 {
		t.Fatalf("advertised %v, want TO %#x length 4096", rb, TO)
	}
	sink := client.Reg(t, 4096, rdmap.LocalWrite)
	rd, err := rb.Read(1, sink, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.QP.PostRead(rd); err != nil {
		t.Fatal(err)
	}
	if c := rdmaptest.Wait(t, client.SCQ); c.Status != rdmap.StatusSuccess {
		t.Fatalf("Read: %v", c.Status)
	}
	for i, v := range sink.Bytes() {
		if v != byte(i%251) {
			t.Fatalf("octet %d of the region is %d, want %d", i, v, i%251)
		}
	}
	src := client.Reg(t, 100, 0)
	rdmaptest.Fill(src.Bytes(), 3)
	wr, err := rb.Write(2, src, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.QP.PostWrite(wr); err != nil {
		t.Fatal(err)
	}
	// Two Sends through one receive buffer: the first is reposted.
	for i := range 2 {
		if err := client.QP.PostSend(rdmap.SendWR{ID: uint64(10 + i), SGL: []rdmap.SGE{{MR: src, Length: uint32(50 + i)}}}); err != nil {
			t.Fatal(err)
		}
		if c := rdmaptest.Wait(t, client.SCQ); c.Status != rdmap.StatusSuccess {
			t.Fatalf("completion %d: %v", i, c.Status)
		}
		if !waitfor.Until(5*time.Second, func() bool { return countEvents(out.events(t), "recv") >= i+1 }) {
			t.Fatalf("Send %d not reported: %v", i, out.events(t))
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	select {
	case <-req.closed:
	default:
		t.Error("Serve returned with the connection open")
	}
	want := make([]byte, 4096)
	for i := range want {
		want[i] = byte(i % 251)
	}
	copy(want[1000:], src.Bytes())
	region := sha256.Sum256(want)
	evs := out.events(t)
	var recvs int
	for _, ev := range evs {
		switch ev["event"] {
		case "connected":
			if ev["conn"] != 7.0 || ev["transport"] != "pipe" || ev["to"] != float64(TO) || ev["length"] != 4096.0 {
				t.Errorf("connected event %v", ev)
			}
		case "recv":
			n := 50 + recvs
			sum := sha256.Sum256(src.Bytes()[:n])
			if ev["msn"] != float64(recvs+1) || ev["len"] != float64(n) || ev["sha256"] != hex.EncodeToString(sum[:]) {
				t.Errorf("recv event %v, want MSN %d, %d octets", ev, recvs+1, n)
			}
			recvs++
		case "closed":
			if ev["mr_sha256"] != hex.EncodeToString(region[:]) {
				t.Errorf("closed event %v: the region's SHA-256 is not that of the octets Written", ev)
			}
		}
	}
	if countEvents(evs, "connected") != 1 || recvs != 2 || countEvents(evs, "closed") != 1 {
		t.Errorf("events %v; want one connected, two recv, one closed", evs)
	}
}

func countEvents(evs []map[string]any, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev["event"] == kind {
			n++
		}
	}
	return n
}

// A connection whose Accept fails is reported by Serve's error, and
// nothing is logged.
func TestServeAcceptFails(t *testing.T) {
	_, b := ddptest.New(ddptest.Options{})
	req := &pipeRequest{end: b, pd: make(chan []byte, 1), rejected: make(chan struct{}), closed: make(chan struct{}), fail: errors.New("the peer left")}
	out := &syncBuffer{}
	err := Serve(context.Background(), rdmap.NewDevice(rdmap.DeviceConfig{}), req, 1, &Config{MRSize: 64, RecvDepth: 1, RecvSize: 16}, NewLog(out, true))
	if err != req.fail {
		t.Fatalf("Serve: %v, want %v", err, req.fail)
	}
	if evs := out.events(t); len(evs) != 0 {
		t.Errorf("events %v", evs)
	}
}

// Idle closes a connection on which nothing moved for IdleTimeout.
func TestServeIdle(t *testing.T) {
	a, b := ddptest.New(ddptest.Options{})
	client := rdmaptest.NewPeer(t, rdmap.QPConfig{})
	a.Attach(client.QP.Stream())
	if err := client.QP.Start(a, ddp.Start{}); err != nil {
		t.Fatal(err)
	}
	req := &pipeRequest{end: b, pd: make(chan []byte, 1), rejected: make(chan struct{}), closed: make(chan struct{})}
	out := &syncBuffer{}
	start := time.Now()
	err := Serve(context.Background(), rdmap.NewDevice(rdmap.DeviceConfig{}), req, 1, &Config{MRSize: 64, RecvDepth: 1, RecvSize: 16, IdleTimeout: 100 * time.Millisecond}, NewLog(out, true))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("closed after %v, want about 100ms", d)
	}
	if evs := out.events(t); countEvents(evs, "idle") != 1 || countEvents(evs, "closed") != 1 {
		t.Errorf("events %v; want idle, then closed", evs)
	}
}
