package perftest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
)

// loopback runs a Go server and a Go client of cfg over loopback TCP.
func loopback(t *testing.T, cfg Config, lcfg *mpa.Config) (cli, srv *Result, cerr, serr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := mpa.Listen(context.Background(), "tcp", "127.0.0.1:0", lcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type out struct {
		r   *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := Serve(ctx, l, cfg)
		done <- out{r, err}
	}()
	ccfg := cfg
	ccfg.FirstFPDUDelay = -1
	cli, cerr = Dial(ctx, l.Addr().String(), ccfg)
	o := <-done
	return cli, o.r, cerr, o.err
}

// TestPerftestWriteLatServer: Serve refuses ib_write_lat at once, saying
// why, without taking a connection.
func TestPerftestWriteLatServer(t *testing.T) {
	l, err := mpa.Listen(context.Background(), "tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Serve(context.Background(), l, Config{Test: WriteLat})
	if !errors.Is(err, ErrWriteLatServer) || !strings.Contains(err.Error(), "rule 4") {
		t.Fatalf("Serve(write_lat) = %v, want ErrWriteLatServer", err)
	}
}

func TestPerftestLoopback(t *testing.T) {
	for _, tc := range []struct {
		test  Test
		size  int
		iters int
	}{
		{WriteBW, 4096, 50}, {WriteBW, 100, 300}, {ReadBW, 4096, 50}, {ReadBW, 70000, 20}, {SendBW, 4096, 100}, {SendBW, 64, 2000},
		{ReadLat, 4096, 30}, {SendLat, 4096, 30}, {SendLat, 2, 30},
	} {
		t.Run(tc.test.String(), func(t *testing.T) {
			cfg := Config{Test: tc.test, Size: tc.size, Iters: tc.iters, Pattern: true}
			cli, srv, cerr, serr := loopback(t, cfg, nil)
			if cerr != nil || serr != nil {
				t.Fatalf("client: %v\nserver: %v", cerr, serr)
			}
			t.Logf("client %+v %+v %+v", cli.BW, cli.Lat, cli.Moved)
			t.Logf("server %+v %+v %+v", srv.BW, srv.Lat, srv.Moved)
		})
	}
}

// controlScript is the length of each control message of a test, in
// order, each way (one queue pair, one size, iterations): the version,
// check_sys_data's two ints, check_mtu, the two handshakes around the data
// connection, then each test's own handshakes and reports.
func controlScript(test Test) []int {
	s := []int{VersionLen, IntLen, IntLen, MTULen, DestLen, DestLen}
	switch test {
	case WriteBW, ReadBW:
		s = append(s, DestLen, DestLen, DestLen, DestLen, 8, 8, 8, 8, 8, DestLen)
	case SendBW, SendLat, ReadLat:
		s = append(s, DestLen, DestLen, DestLen, DestLen, DestLen)
	case WriteLat:
		s = append(s, DestLen, DestLen, DestLen, DestLen)
	}
	return s
}

// checkCapture decodes a session's recorded connections (control first,
// then data) and checks the control messages against the test's script
// and the data connection's messages against the test; it returns the
// number of FPDUs.
func checkCapture(t *testing.T, cap *capture, cfg Config, crc bool) int {
	t.Helper()
	cap.mu.Lock()
	conns := append([]*capConn(nil), cap.conns...)
	cap.mu.Unlock()
	var live []*capConn
	for _, cc := range conns {
		if cc.bound && len(cc.stream(false)) > 0 {
			live = append(live, cc)
		}
	}
	if len(live) != 2 {
		t.Fatalf("%d connections with a reply in the capture, want 2 (control, data)", len(live))
	}
	fpdus := 0
	script := controlScript(cfg.Test)
	for _, dir := range []bool{true, false} {
		fr, msgs, err := decodeStream(live[0].stream(dir), crc)
		if err != nil {
			t.Fatalf("control connection, from client %v: %v", dir, err)
		}
		if e, _, ok := fr.Enhancement(); !ok || fr.Rev != 2 || e.IRD != 0 || e.ORD != 0 || e.PeerToPeer {
			t.Errorf("control connection's %v: want revision 2, S, client-server, IRD/ORD 0/0", fr)
		}
		var lens []int
		for _, m := range msgs {
			if m.op != 3 || m.tagged {
				t.Errorf("control connection: a message with opcode %d", m.op)
			}
			lens = append(lens, m.len)
		}
		if fmt.Sprint(lens) != fmt.Sprint(script) {
			t.Errorf("control messages from client %v: %v, want %v", dir, lens, script)
		}
		fpdus += len(msgs)
	}
	ird := 0
	if cfg.Test.reads() {
		ird = cfg.OutReads
		if ird == 0 {
			ird = DefaultOutReads
		}
	}
	up, down := live[1].stream(true), live[1].stream(false)
	fr, msgs, err := decodeStream(up, crc)
	if err != nil {
		t.Fatalf("data connection, from the client: %v", err)
	}
	if e, _, ok := fr.Enhancement(); !ok || fr.Rev != 2 || int(e.IRD) != ird || int(e.ORD) != ird || e.PeerToPeer {
		t.Errorf("data connection's %v %+v: want revision 2, S, client-server, IRD/ORD %d/%d", fr, e, ird, ird)
	}
	_, back, err := decodeStream(down, crc)
	if err != nil {
		t.Fatalf("data connection, from the server: %v", err)
	}
	count := func(ms []wireMsg, op uint8, size int) int {
		n := 0
		for _, m := range ms {
			if m.op == op && (size < 0 || m.len == size) {
				n++
			}
		}
		return n
	}
	n := cfg.Iters
	var want [4]int // Writes, Read Requests, Read Responses, Sends: up / down
	switch cfg.Test {
	case WriteBW:
		if got := count(msgs, 0, cfg.Size); got != n || len(msgs) != n || len(back) != 0 {
			t.Errorf("data connection: %d RDMA Writes of %d octets up (%d messages), %d messages down; want %d, 0", got, cfg.Size, len(msgs), len(back), n)
		}
	case ReadBW, ReadLat:
		if got, resp := count(msgs, 1, 28), count(back, 2, cfg.Size); got != n || resp != n || len(msgs) != n || len(back) != n {
			t.Errorf("data connection: %d RDMA Read Requests up, %d Read Responses of %d octets down; want %d", got, resp, cfg.Size, n)
		}
	case SendBW:
		if got := count(msgs, 3, cfg.Size); got != n || len(msgs) != n {
			t.Errorf("data connection: %d Sends of %d octets up (%d messages), want %d", got, cfg.Size, len(msgs), n)
		}
		// Credits: RDMA Writes of 4 octets with the count received.
		for _, m := range back {
			if m.op != 0 || m.len != CreditLen {
				t.Errorf("data connection: a message down with opcode %d, %d octets: want credits only", m.op, m.len)
			}
		}
		if len(back) == 0 {
			t.Errorf("data connection: no credit written")
		}
	case SendLat:
		if up, dn := count(msgs, 3, cfg.Size), count(back, 3, cfg.Size); up != n || dn != n {
			t.Errorf("data connection: %d Sends up and %d down, want %d", up, dn, n)
		}
	case WriteLat:
		if up, dn := count(msgs, 0, cfg.Size), count(back, 0, cfg.Size); up != n || dn != n {
			t.Errorf("data connection: %d RDMA Writes up and %d down, want %d", up, dn, n)
		}
	}
	_ = want
	// FPDUs, for tshark: count them again.
	for _, b := range [][]byte{up, down} {
		us := units(b)
		fpdus += len(us) - 1
	}
	return fpdus
}

// TestPerftestLoopbackCapture records Go-to-Go sessions (the client's
// connections traced, the server's through a relay) and checks the
// capture: the control messages each test's script has, the data
// connection's operations, and every FPDU with a good CRC in tshark.
func TestPerftestLoopbackCapture(t *testing.T) {
	for _, test := range []Test{WriteBW, ReadBW, SendBW, ReadLat, SendLat} {
		t.Run(test.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			l, err := mpa.Listen(context.Background(), "tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			srvCap, cliCap := &capture{}, &capture{}
			addr := relay(t, srvCap, l.Addr().String())
			cfg := Config{Test: test, Size: 3000, Iters: 12, Pattern: true}
			done := make(chan error, 1)
			go func() {
				_, err := Serve(ctx, l, cfg)
				done <- err
			}()
			ccfg := cfg
			ccfg.FirstFPDUDelay = -1
			ccfg.MPA = &mpa.Config{Trace: func(local, remote net.Addr) mpa.Tracer {
				cc := cliCap.conn()
				cc.bind(local, remote)
				return mpa.TraceFunc(cc.record)
			}}
			if _, err := Dial(ctx, addr, ccfg); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for name, cp := range map[string]*capture{"client": cliCap, "relay": srvCap} {
				n := checkCapture(t, cp, cfg, true)
				file := filepath.Join(t.TempDir(), name+".pcap")
				if err := cp.writePcap(file); err != nil {
					t.Fatal(err)
				}
				tsharkCheck(t, file, n, true)
			}
		})
	}
}

// TestPerftestServerLimits: the server holds what the peer asks for to
// its memory budget, refusing (by closing the control connection) a cycle
// buffer that would exceed it, and refuses at once a configuration of its
// own that would.
func TestPerftestServerLimits(t *testing.T) {
	cfg := Config{Test: WriteBW, Size: 4096, Iters: 10, MemoryBudget: 1 << 20}
	ccfg := Config{Test: WriteBW, Size: 4096, Iters: 10, CycleBuffer: 2 << 20}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := mpa.Listen(context.Background(), "tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Serve(ctx, l, cfg)
		done <- err
	}()
	ccfg.FirstFPDUDelay = -1
	res, cerr := Dial(ctx, l.Addr().String(), ccfg)
	serr := <-done
	if !errors.Is(serr, ErrBudget) || !strings.Contains(serr.Error(), "the peer's 2097152") {
		t.Errorf("server: %v, want ErrBudget naming the peer's cycle buffer", serr)
	}
	if cerr == nil || !strings.Contains(cerr.Error(), "closed the control connection") {
		t.Errorf("client: %v, want the control connection closed", cerr)
	}
	if res == nil || res.PeerCycleBuffer != DefaultCycleBuffer {
		t.Errorf("client's result %+v", res)
	}
	t.Logf("server: %v\nclient: %v", serr, cerr)

	// What the server's own parameters need is checked before any
	// connection: 512 receive buffers of 1 MiB.
	big := Config{Test: SendBW, Size: 1 << 20, Iters: 1000}
	if err := big.Check(); !errors.Is(err, ErrBudget) {
		t.Errorf("Check(%+v) = %v, want ErrBudget", big, err)
	}
	if _, err := Serve(ctx, l, big); !errors.Is(err, ErrBudget) {
		t.Errorf("Serve = %v, want ErrBudget", err)
	}
	for _, bad := range []Config{{Test: WriteBW, Size: MaxSize + 1}, {Test: SendBW, Iters: 4}, {Test: ReadBW, OutReads: -1}, {Test: WriteBW, CycleBuffer: 3000}, {}} {
		if err := bad.Check(); err == nil {
			t.Errorf("Check(%+v) accepted it", bad)
		}
	}
}

// TestPerftestMismatch: ends that run different tests stop, each with an
// error, within their step timeouts, instead of hanging.
func TestPerftestMismatch(t *testing.T) {
	for _, p := range [][2]Test{{WriteBW, SendBW}, {SendLat, ReadLat}, {ReadBW, WriteBW}} {
		t.Run(fmt.Sprint(p[0], "-vs-", p[1]), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := mpa.Listen(context.Background(), "tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			lim := Config{Size: 64, Iters: 20, StepTimeout: 2 * time.Second, RunTimeout: 3 * time.Second, FirstFPDUDelay: -1}
			scfg, ccfg := lim, lim
			scfg.Test, ccfg.Test = p[1], p[0]
			done := make(chan error, 1)
			go func() {
				_, err := Serve(ctx, l, scfg)
				done <- err
			}()
			start := time.Now()
			_, cerr := Dial(ctx, l.Addr().String(), ccfg)
			serr := <-done
			if cerr == nil && serr == nil {
				t.Fatalf("client %v and server %v agreed", p[0], p[1])
			}
			if time.Since(start) > 20*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			t.Logf("client: %v\nserver: %v", cerr, serr)
		})
	}
}
