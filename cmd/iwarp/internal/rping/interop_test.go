package rping

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/linuxguest"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

func TestMain(m *testing.M) {
	code := linuxguest.Main(m)
	if builtIwarp {
		if bin, err := iwarpBinary(); err == nil {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}

// siwDelay is the pause our initiator makes between siw's MPA Reply and
// its first FPDU (mpa.Config.FirstFPDUDelay): siw's responder sends the
// Reply before it hooks the socket to the queue pair, and an FPDU that
// arrives in between is not read until more data comes.
// TestRpingInteropSiwAcceptRaceSweep measures it: 5 ms is the smallest pause
// that no run of the sweep saw stall, but one connection stalled at 5 ms in
// the full race-detector suite, so this is cmd/iwarp's default of 20 ms
// (rpingFirstFPDUDelay has the figures).
const siwDelay = 20 * time.Millisecond

// hostServer is our rping server on the host's loopback, for a stock
// rping client in the guest (which reaches it at HostFromGuest).
type hostServer struct {
	port int
	cap  *capture
	out  syncBuf
	done chan error
	srv  *Server
	conn *mpa.Conn
	ep   *Endpoint
}

// startHostServer listens on 127.0.0.1 and serves one connection.
func startHostServer(t *testing.T, ctx context.Context, mcfg mpa.Config, cfg Config) *hostServer {
	t.Helper()
	h := &hostServer{cap: &capture{}, done: make(chan error, 1)}
	mcfg.Trace = h.cap.trace(false)
	l, err := mpa.Listen(context.Background(), "tcp4", "127.0.0.1:0", &mcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h.port = l.Addr().(*net.TCPAddr).Port
	if cfg.Verbose == nil {
		cfg.Verbose = &h.out
	}
	h.ep, err = NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
	if err != nil {
		t.Fatal(err)
	}
	h.srv, err = NewServer(h.ep, cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			h.done <- err
			return
		}
		c, err := req.Accept(h.ep.QP, nil)
		if err != nil {
			h.done <- err
			return
		}
		h.conn = c
		h.done <- h.srv.Run(ctx)
	}()
	return h
}

func (h *hostServer) wait(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-ctx.Done():
		t.Fatalf("our server did not end: %v", ctx.Err())
		return nil
	}
}

// rpingLines returns what rping -v prints for n pings of size octets,
// with prefix "ping data: " (client) or "server ping data: ".
func rpingLines(prefix string, n, size int) string {
	var b strings.Builder
	buf := make([]byte, size)
	for i := range n {
		Fill(buf, i)
		fmt.Fprintf(&b, "%s%s\n", prefix, CString(buf))
	}
	return b.String()
}

// onlyLines returns the lines of out that start with prefix.
func onlyLines(out, prefix string) string {
	var b strings.Builder
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// checkCapture decodes a capture of n pings and checks rping's exchange
// in it, writes it as a pcap file and has tshark check its CRCs. It
// returns the decoded capture.
func checkCapture(t *testing.T, c *capture, n int, wantCRC bool) *decoded {
	t.Helper()
	d, err := c.decode()
	if err != nil {
		t.Errorf("decoding the capture: %v", err)
	}
	if d == nil {
		return nil
	}
	if d.crc != wantCRC {
		t.Errorf("CRC %v, want %v (Request %v, Reply %v)", d.crc, wantCRC, d.req, d.rep)
	}
	if n >= 0 {
		// Per ping: two Sends and a Read Response from the client; a
		// Read Request, a Write and two Sends from the server.
		for _, w := range []struct {
			fromClient bool
			op         rdmap.Opcode
			n          int
		}{
			{true, rdmap.OpSend, 2 * n}, {true, rdmap.OpReadResponse, n},
			{false, rdmap.OpReadRequest, n}, {false, rdmap.OpWrite, n}, {false, rdmap.OpSend, 2 * n},
		} {
			if got := d.count(w.fromClient, w.op); got != w.n {
				t.Errorf("%d %v from the %s, want %d", got, w.op, side(w.fromClient), w.n)
			}
		}
	}
	file := filepath.Join(t.TempDir(), "rping.pcap")
	if err := c.writePcap(file, netip.MustParseAddrPort("10.0.2.15:40000"), netip.MustParseAddrPort("10.0.2.2:7174")); err != nil {
		t.Fatal(err)
	}
	tsharkCheck(t, file, d.fpdus, wantCRC)
	return d
}

// siwParamNames are siw's MPA module parameters the tests change, and
// siwDefaultParams their values at boot. Each case writes all of them in
// sysfs (siw reads them at each connection's set-up), so that no case
// depends on the one before; the tests end with the defaults back.
var siwParamNames = []string{"mpa_version", "mpa_crc_required", "mpa_crc_strict", "peer_to_peer", "rtr_type"}

const siwDefaultParams = "mpa_version=2 mpa_crc_required=0 mpa_crc_strict=0 peer_to_peer=0 rtr_type=3"

// setSiw sets siw's parameters: the defaults overridden by params.
func setSiw(t *testing.T, ctx context.Context, g *linuxguest.Guest, params string) {
	t.Helper()
	vals := map[string]string{}
	for _, kv := range strings.Fields(siwDefaultParams + " " + params) {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	var cmd []string
	for _, k := range siwParamNames {
		cmd = append(cmd, fmt.Sprintf("echo %s >/sys/module/siw/parameters/%s", vals[k], k))
	}
	if _, err := g.Run(ctx, strings.Join(cmd, "; ")); err != nil {
		t.Fatal(err)
	}
}

// firstRTR returns the RTR indication the client sent first, if its
// first segment is one: a zero-length RDMA Write, RDMA Read Request or
// Send.
func firstRTR(d *decoded) ddp.RTR {
	for _, s := range d.segs {
		if !s.fromClient {
			continue
		}
		switch {
		case s.op == rdmap.OpWrite && len(s.payload) == 0:
			return ddp.RTRWrite
		case s.op == rdmap.OpReadRequest:
			if rr, _, err := rdmap.ParseReadRequest(s.payload); err == nil && rr.RDMARDSZ == 0 {
				return ddp.RTRRead
			}
		case s.op == rdmap.OpSend && len(s.payload) == 0:
			return ddp.RTRSend
		}
		return ddp.RTRNone
	}
	return ddp.RTRNone
}

// checkNegotiated compares what the capture's startup frames and our
// connection settled with what a case wants. A responder learns the RTR
// when it arrives (Negotiated().RTR stays RTRNone there): its Reply's
// flags say which it took.
func checkNegotiated(t *testing.T, d *decoded, n mpa.Negotiated, responder bool, rev int, crc bool, rtr ddp.RTR) {
	t.Helper()
	if d == nil {
		return
	}
	if int(d.req.Rev) != rev || int(d.rep.Rev) != rev || n.Revision != rev {
		t.Errorf("revision: Request %d, Reply %d, negotiated %d; want %d", d.req.Rev, d.rep.Rev, n.Revision, rev)
	}
	if n.CRC != crc {
		t.Errorf("negotiated CRC %v, want %v", n.CRC, crc)
	}
	wire := firstRTR(d)
	if wire != rtr {
		t.Errorf("RTR on the wire %v, want %v", wire, rtr)
	}
	if !responder {
		if n.RTR != rtr {
			t.Errorf("negotiated RTR %v, want %v", n.RTR, rtr)
		}
		return
	}
	e := n.LocalIRDORD
	took := e != nil && e.PeerToPeer && ((rtr == ddp.RTRWrite && e.WriteRTR) || (rtr == ddp.RTRRead && e.ReadRTR) || (rtr == ddp.RTRSend && e.SendRTR))
	if (rtr == ddp.RTRNone) != (e == nil || !e.PeerToPeer) || (rtr != ddp.RTRNone && !took) {
		t.Errorf("our Reply's enhanced data %v does not take the RTR %v", e, rtr)
	}
}

const pings = 3

// TestRpingInteropGuestClient: stock "rping -c -C 3 -v -V" in the guest pings
// our server on the host, with siw as initiator in each MPA mode it has.
func TestRpingInteropGuestClient(t *testing.T) {
	g := linuxguest.Shared(t)
	defer setSiw(t, ctxFor(t, time.Minute), g, "")
	for _, c := range []struct {
		name string
		siw  string     // siw's parameters
		srv  mpa.Config // our server's
		rev  int
		crc  bool
		rtr  ddp.RTR
	}{
		// siw's defaults: revision 2, client-server, C=0; our Reply's C=1
		// turns CRCs on.
		{"rev2 client-server", "", mpa.Config{}, 2, true, ddp.RTRNone},
		{"rev2 no CRC", "", mpa.Config{NoCRC: true}, 2, false, ddp.RTRNone},
		{"rev2 siw requires CRC", "mpa_crc_required=1", mpa.Config{}, 2, true, ddp.RTRNone},
		{"p2p write RTR", "peer_to_peer=1 rtr_type=1", mpa.Config{}, 2, true, ddp.RTRWrite},
		{"p2p read RTR", "peer_to_peer=1 rtr_type=2", mpa.Config{}, 2, true, ddp.RTRRead},
		{"p2p write or read", "peer_to_peer=1 rtr_type=3", mpa.Config{NoCRC: true}, 2, false, ddp.RTRWrite},
		{"rev1", "mpa_version=1", mpa.Config{}, 1, true, ddp.RTRNone},
		{"rev1 no CRC", "mpa_version=1", mpa.Config{NoCRC: true}, 1, false, ddp.RTRNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			setSiw(t, ctx, g, c.siw)
			h := startHostServer(t, ctx, c.srv, Config{Validate: true})
			out, err := g.Run(ctx, fmt.Sprintf("rping -c -a %s -p %d -C %d -v -V", linuxguest.HostFromGuest, h.port, pings))
			if err = rpingExit(t, out, err); err != nil {
				t.Fatalf("rping -c: %v", err)
			}
			if err := h.wait(t, ctx); err != nil {
				t.Errorf("our server: %v", err)
			}
			if got, want := onlyLines(out, "ping data: "), rpingLines("ping data: ", pings, DefaultSize); got != want {
				t.Errorf("rping -c printed\n%s\nwant\n%s", out, want)
			}
			if got, want := h.out.String(), rpingLines("server ping data: ", pings, DefaultSize); got != want {
				t.Errorf("our server printed\n%s\nwant\n%s", got, want)
			}
			d := checkCapture(t, h.cap, pings, c.crc)
			if h.conn != nil {
				checkNegotiated(t, d, h.conn.Negotiated(), true, c.rev, c.crc, c.rtr)
			}
		})
	}
}

// TestRpingInteropGuestClientCRCRequired: siw as initiator with
// mpa_crc_required refuses a Reply with C=0, although CRCs are then in use
// (RFC 5044 §7.1.1: C "declares an endpoint's preferred CRC usage", and
// one C=1 turns CRCs on both ways). Our server with NoCRC repeats the
// Request's C=1 in its Reply, declaring the CRCs that will be used, so
// siw takes it and rping runs, with CRCs.
func TestRpingInteropGuestClientCRCRequired(t *testing.T) {
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, time.Minute)
	setSiw(t, ctx, g, "mpa_crc_required=1")
	defer setSiw(t, ctx, g, "")
	h := startHostServer(t, ctx, mpa.Config{NoCRC: true}, Config{})
	out, err := g.Run(ctx, fmt.Sprintf("rping -c -a %s -p %d -C 1", linuxguest.HostFromGuest, h.port))
	if err = rpingExit(t, out, err); err != nil {
		t.Errorf("rping -c: %v\n%s", err, out)
	}
	if err := h.wait(t, ctx); err != nil || h.srv.Pings() != 1 {
		t.Errorf("our server: %d pings, %v; want 1 ping and the client's disconnect", h.srv.Pings(), err)
	}
	if d := checkCapture(t, h.cap, 1, true); d != nil && (!d.req.CRC || !d.rep.CRC) {
		t.Errorf("want a Request and a Reply with C=1: %+v", d)
	}
}

// rpingExit returns err, rping's exit, unless it is rping's own teardown
// race (linuxguest.RpingTeardownRace), which it logs.
func rpingExit(t *testing.T, out string, err error) error {
	t.Helper()
	if linuxguest.RpingTeardownRace(out, err) {
		t.Logf("rping %v at its teardown (rdma-core f3ae6534a); taken as its exit 0", err)
		return nil
	}
	return err
}

// guestPorts hands out a guest port per rping server, so that no server
// starts on a port that the one before may still hold.
var guestPorts atomic.Int32

// guestServer starts a stock "rping -s" with flags in the guest on a port
// of its own, forwarded from the host, and returns it once it listens
// with the host address that reaches it; the test's end kills it if it
// still runs.
func guestServer(t *testing.T, ctx context.Context, g *linuxguest.Guest, flags string) (*linuxguest.Proc, string) {
	t.Helper()
	port := 7200 + int(guestPorts.Add(1))
	addr, err := g.Forward(port)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := g.Start(fmt.Sprintf("rping -s -a %s -p %d %s", linuxguest.GuestIP, port, flags))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-srv.Done():
		default:
			srv.Kill()
		}
	})
	if err := g.WaitListening(ctx, port); err != nil {
		t.Fatalf("rping -s does not listen: %v (%s)", err, srv.Output())
	}
	return srv, addr
}

// TestRpingInteropGuestServer: our client pings a stock "rping -s -v" in the
// guest, with siw as responder, in each MPA mode our initiator has.
func TestRpingInteropGuestServer(t *testing.T) {
	g := linuxguest.Shared(t)
	defer setSiw(t, ctxFor(t, time.Minute), g, "")
	rejected := func(t *testing.T, err error) {
		var re *ddp.RejectedError
		if !errors.As(err, &re) {
			t.Errorf("dial: %v, want a rejection (MPA Reply with R=1)", err)
		}
	}
	for _, c := range []struct {
		name string
		siw  string
		cfg  mpa.Config // our client's (FirstFPDUDelay and Trace added)
		rev  int
		crc  bool
		rtr  ddp.RTR
		fail func(*testing.T, error) // the dial's error, for cases that cannot connect
		// siwFails is in rping -s's output when siw cannot serve the
		// connection once it is up.
		siwFails string
	}{
		// siw's responder echoes the Request's C bit.
		{name: "rev2 client-server", cfg: mpa.Config{ClientServer: true, PrivateData: []byte("iwarp rping")}, rev: 2, crc: true},
		{name: "rev2 no CRC", cfg: mpa.Config{ClientServer: true, NoCRC: true}, rev: 2},
		// As responder siw takes Write if offered, else Read.
		{name: "p2p offering write, read, send", cfg: mpa.Config{}, rev: 2, crc: true, rtr: ddp.RTRWrite},
		{name: "p2p offering send, read", cfg: mpa.Config{RTR: []ddp.RTR{ddp.RTRSend, ddp.RTRRead}}, rev: 2, crc: true, rtr: ddp.RTRRead},
		{name: "p2p offering write", cfg: mpa.Config{RTR: []ddp.RTR{ddp.RTRWrite}, NoCRC: true}, rev: 2, rtr: ddp.RTRWrite},
		// Revision 1 carries no IRD/ORD: rping's rdma_accept(NULL) then
		// has ORD 0 and siw refuses its RDMA Read (ibv_post_send fails).
		{name: "rev1", cfg: mpa.Config{Revision: 1}, rev: 1, crc: true, siwFails: "post send error"},
		// siw refuses Markers (R=1 in its Reply).
		{name: "markers refused", cfg: mpa.Config{ClientServer: true, Markers: true}, fail: rejected},
		// With mpa_crc_strict siw refuses a Request with C=1.
		{name: "siw crc strict refuses C", siw: "mpa_crc_strict=1", cfg: mpa.Config{ClientServer: true}, fail: rejected},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			setSiw(t, ctx, g, c.siw)
			srv, addr := guestServer(t, ctx, g, "-v")
			cap := &capture{}
			cfg := c.cfg
			cfg.FirstFPDUDelay, cfg.Trace = siwDelay, cap.trace(true)
			var out syncBuf
			cl, _, mc, err := dialGuest(t, ctx, addr, &cfg, Config{Count: pings, Validate: true, Verbose: &out})
			if c.fail != nil {
				c.fail(t, err)
				return
			}
			if err != nil {
				t.Fatalf("dial: %v (rping -s: %s)", err, srv.Output())
			}
			if c.siwFails != "" {
				err := cl.Run(ctx)
				sout := waitOrKill(ctx, srv)
				if !errors.Is(err, rdmap.ErrDisconnected) || cl.Pings() != 0 || !strings.Contains(sout, c.siwFails) {
					t.Errorf("our client: %d pings, %v; rping -s:\n%s\nwant 0 pings, the server's disconnect and %q", cl.Pings(), err, sout, c.siwFails)
				}
				return
			}
			if err := cl.Run(ctx); err != nil {
				t.Errorf("our client: %v", err)
			}
			sout, err := srv.Wait(ctx)
			if err = rpingExit(t, sout, err); err != nil {
				t.Errorf("rping -s: %v", err)
			}
			if got, want := out.String(), rpingLines("ping data: ", pings, DefaultSize); got != want {
				t.Errorf("our client printed\n%s\nwant\n%s", got, want)
			}
			if got, want := onlyLines(sout, "server ping data: "), rpingLines("server ping data: ", pings, DefaultSize); got != want {
				t.Errorf("rping -s printed\n%s\nwant\n%s", sout, want)
			}
			d := checkCapture(t, cap, pings, c.crc)
			checkNegotiated(t, d, mc.Negotiated(), false, c.rev, c.crc, c.rtr)
			if d != nil && len(c.cfg.PrivateData) > 0 {
				if _, pd, _ := d.req.Enhancement(); string(pd) != string(c.cfg.PrivateData) {
					t.Errorf("the Request's Private Data is %q, want %q", pd, c.cfg.PrivateData)
				}
			}
		})
	}
}

// dialGuest connects a new client to addr with cfg and returns it with
// its endpoint; ccfg is the rping Config.
func dialGuest(t *testing.T, ctx context.Context, addr string, mcfg *mpa.Config, ccfg Config) (*Client, *Endpoint, *mpa.Conn, error) {
	t.Helper()
	ep, err := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ep, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := mpa.Dial(ctx, "tcp4", addr, ep.QP, mcfg)
	if err != nil {
		ep.QP.Close(ctx)
		return nil, nil, nil, err
	}
	return c, ep, mc, nil
}

// hog pins QEMU (this process's child) to CPU 0 beside hogs busy
// processes, and this process to CPU 1, until the test ends.
func hog(t *testing.T, hogs int) {
	kids, _ := filepath.Glob("/proc/[0-9]*/stat")
	qemu := ""
	for _, k := range kids {
		b, err := os.ReadFile(k)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 3 && f[1] == "(qemu-system-x86)" && f[3] == strconv.Itoa(os.Getpid()) {
			qemu = f[0]
		}
	}
	if qemu == "" {
		t.Fatal("no QEMU child found")
	}
	for _, args := range [][]string{{"-a", "-p", "1", qemu}, {"-a", "-p", "2", strconv.Itoa(os.Getpid())}} {
		if out, err := exec.Command("taskset", args...).CombinedOutput(); err != nil {
			t.Fatalf("taskset %v: %v %s", args, err, out)
		}
	}
	for range hogs {
		h := exec.Command("taskset", "-c", "0", "sh", "-c", "while :; do :; done")
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Process.Kill(); h.Wait() })
	}
	t.Cleanup(func() { exec.Command("taskset", "-a", "-p", "3", strconv.Itoa(os.Getpid())).Run() })
}

// TestRpingInteropSiwAcceptRaceSweep measures siw's accept race: how many
// connections to a stock "rping -s -P" stall for each FirstFPDUDelay, one
// ping each, round robin over the delays so that each sees the same
// guest. It runs only when asked, through the environment:
//
//	IWARP_RPING_SWEEP=N           N connections per delay
//	IWARP_RPING_SWEEP_DELAYS=...  the delays (default 0,250us,1ms,5ms,20ms,50ms)
//	IWARP_RPING_SWEEP_P2P=1       the peer-to-peer model (the RTR is the first FPDU)
//	IWARP_RPING_SWEEP_HOG=K       QEMU on CPU 0 with K busy processes, this
//	                              test on CPU 1: the guest's vCPU is
//	                              descheduled at random while this side
//	                              answers at once, the worst case
//	IWARP_RPING_SWEEP_TIMEOUT=D   a connection without its ping after D is
//	                              counted as stalled (default 6s; a good one
//	                              takes 20-70 ms idle, up to 2.5 s loaded)
//
// Results (2 cores, Debian 6.1 siw under TCG) are in cmd/iwarp's
// rpingFirstFPDUDelay.
func TestRpingInteropSiwAcceptRaceSweep(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IWARP_RPING_SWEEP"))
	if n <= 0 {
		t.Skip("IWARP_RPING_SWEEP=N runs N connections per delay")
	}
	delays := []time.Duration{0, 250 * time.Microsecond, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond}
	if s := os.Getenv("IWARP_RPING_SWEEP_DELAYS"); s != "" {
		delays = nil
		for _, f := range strings.Split(s, ",") {
			d, err := time.ParseDuration(f)
			if err != nil {
				t.Fatal(err)
			}
			delays = append(delays, d)
		}
	}
	timeout := 6 * time.Second
	if s := os.Getenv("IWARP_RPING_SWEEP_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		timeout = d
	}
	p2p := os.Getenv("IWARP_RPING_SWEEP_P2P") != ""
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, 2*time.Hour)
	_, addr := guestServer(t, ctx, g, "-P")
	if k, _ := strconv.Atoi(os.Getenv("IWARP_RPING_SWEEP_HOG")); k > 0 {
		hog(t, k)
	}
	stalls := make([]int, len(delays))
	slowest := make([]time.Duration, len(delays))
	for range n {
		for k, d := range delays {
			t0 := time.Now()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			c, _, _, err := dialGuest(t, cctx, addr, &mpa.Config{ClientServer: !p2p, FirstFPDUDelay: d}, Config{Count: 1, Validate: true})
			if err == nil {
				err = c.Run(cctx)
			}
			cancel()
			if err != nil {
				stalls[k]++
			} else {
				slowest[k] = max(slowest[k], time.Since(t0))
			}
		}
	}
	for k, d := range delays {
		t.Logf("FirstFPDUDelay %v: %d of %d connections stalled (no ping in %v); slowest good one %v", d, stalls[k], n, timeout, slowest[k].Round(time.Millisecond))
	}
}

// waitOrKill waits a few seconds for a guest process to end, kills it if
// it has not, and returns its output. Stock rping does not always end
// after a Terminate: its CQ thread, which only exits on a flush it sees
// after the disconnect, can keep waiting for a completion event, and
// pthread_join waits for it.
func waitOrKill(ctx context.Context, p *linuxguest.Proc) string {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := p.Wait(wctx)
	if errors.Is(err, context.DeadlineExceeded) {
		p.Kill()
		out, _ = p.Wait(ctx)
		out += "(it did not exit: killed)\n"
	}
	return out
}

// guestTerminates returns what the guest's kernel logged for each
// Terminate siw received ("siw: got TERMINATE. layer %d, type %d, code
// %d", read with siw's own struct iwarp_terminate), and clears the log.
func guestTerminates(t *testing.T, ctx context.Context, g *linuxguest.Guest) []string {
	t.Helper()
	out, err := g.Run(ctx, "dmesg -c | grep -o 'siw: got TERMINATE.*' || true")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(out), " ", "_"))
}

// terminateOf returns the one Terminate the client (or the server) sent
// in a capture, failing the test if there is not exactly one.
func terminateOf(t *testing.T, c *capture, fromClient bool) (raw []byte, th rdmap.TerminateHeader) {
	t.Helper()
	d, err := c.decode()
	if err != nil {
		t.Fatalf("decoding the capture: %v", err)
	}
	ts := d.terminates(fromClient)
	if len(ts) != 1 {
		t.Fatalf("%d Terminates from the %s in the capture, want 1", len(ts), side(fromClient))
	}
	th, _, err = rdmap.ParseTerminate(ts[0].payload)
	if err != nil {
		t.Fatalf("the Terminate from the %s: %v (% x)", side(fromClient), err, ts[0].payload)
	}
	return ts[0].payload, th
}

// pingByHand does one ping of rping's client protocol on c, step by
// step, and checks the data that came back.
func pingByHand(t *testing.T, ctx context.Context, c *Client, ping int) {
	t.Helper()
	Fill(c.startMR.Bytes(), ping)
	if err := c.advertise(c.Source()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.recv(ctx); err != nil {
		t.Fatalf("go ahead: %v", err)
	}
	if err := c.advertise(c.Sink()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.recv(ctx); err != nil {
		t.Fatalf("done: %v", err)
	}
	if !bytes.Equal(c.startMR.Bytes(), c.rdmaMR.Bytes()) {
		t.Fatalf("ping %d came back as %q", ping, CString(c.rdmaMR.Bytes()))
	}
}

// waitStopped waits until qp has stopped on an error and returns it as a
// *term.Error.
func waitStopped(t *testing.T, ctx context.Context, qp *rdmap.QueuePair) *term.Error {
	t.Helper()
	select {
	case <-qp.Terminated():
	case <-ctx.Done():
		t.Fatalf("the queue pair did not stop (state %v, err %v)", qp.State(), qp.Err())
	}
	var te *term.Error
	if err := qp.Err(); !errors.As(err, &te) {
		t.Fatalf("the queue pair stopped with %v, want a *term.Error", err)
	}
	return te
}

var updateTestdata = flag.Bool("update", false, "write the captures that cmd/iwarp's tests read (cmd/iwarp/testdata/)")

// overrunSends is how many Sends TestRpingInteropTerminateFromSiw posts at
// once against rping -s's one receive buffer.
const overrunSends = 8

// TestRpingInteropTerminateFromSiw makes siw send us a Terminate: after one
// ping, our client Sends eight times at once while rping's server has one
// receive buffer posted. siw reports RFC 5041's "no buffer available"
// (DDP, untagged buffer error, 0x02), but its struct iwarp_terminate uses
// little-endian bitfields on x86: the Layer and Error Type nibbles go out
// swapped (first octet 0x21) and the M, D and R bits land in the reserved
// bits. Our queue pair decodes by RFC 5040 §4.8: LLP (2), Error Type 1,
// code 0x02, with M, D and R clear.
func TestRpingInteropTerminateFromSiw(t *testing.T) {
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, time.Minute)
	srv, addr := guestServer(t, ctx, g, "-v")
	cap := &capture{}
	c, ep, _, err := dialGuest(t, ctx, addr, &mpa.Config{ClientServer: true, FirstFPDUDelay: siwDelay, Trace: cap.trace(true)}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	pingByHand(t, ctx, c, 0)
	// Eight Sends at once against one posted buffer: rping -s cannot
	// post its buffer again seven times before they reach siw.
	err = ep.QP.PostBatch(func() error {
		for range overrunSends {
			if err := c.advertise(c.Source()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ep.QP.Terminated():
	case <-ctx.Done():
		t.Fatalf("the queue pair did not stop (state %v, err %v)", ep.QP.State(), ep.QP.Err())
	}
	var te *term.Error
	if err := ep.QP.Err(); !errors.As(err, &te) {
		n := -1 // Terminates from siw in the capture
		if d, derr := cap.decode(); derr == nil {
			n = len(d.terminates(false))
		}
		t.Logf("rping -s:\n%s", waitOrKill(ctx, srv))
		t.Fatalf("the queue pair stopped with %v, want a *term.Error (%d Terminates from siw in the capture)", err, n)
	}
	if l, et, code := te.Triple(); !te.Remote || l != term.LayerLLP || et != 1 || code != 0x02 {
		t.Errorf("the queue pair stopped with %v (remote %v, triple %v/%d/%#02x), want siw's LLP/1/0x02 as reported by the peer", te, te.Remote, l, et, code)
	}
	ep.QP.Close(ctx)
	t.Logf("rping -s:\n%s", waitOrKill(ctx, srv))

	raw, th := terminateOf(t, cap, false)
	if raw[0] != 0x21 || raw[1] != 0x02 || raw[2]&0xe0 != 0 {
		t.Errorf("siw's Terminate Control is % x, want 21 02 with the RFC's M, D, R clear", raw[:4])
	}
	if th.Layer != term.LayerLLP || th.EType != 1 || th.Code != 2 || th.M || th.D || th.R {
		t.Errorf("ParseTerminate reads %v", &th)
	}
	// The RFC reading is no registered triple; the swapped one is.
	if term.Known(th.Layer, th.EType, th.Code) || !errors.Is(term.New(term.Layer(th.EType), uint8(th.Layer), th.Code), term.DDPNoBuffer) {
		t.Errorf("the RFC reading %v/%d/%d should be unregistered and the swapped one DDP no buffer", th.Layer, th.EType, th.Code)
	}
	// siw's M, D and R (little-endian bitfields): bits 0-2 of octet 2.
	if raw[2]&0x07 != 0x03 {
		t.Errorf("siw's M and D should be in the low bits of octet 2: % x", raw[:4])
	}
	file := filepath.Join(t.TempDir(), "siw-terminate.pcap")
	if err := cap.writePcap(file, netip.MustParseAddrPort("10.0.2.2:40000"), netip.MustParseAddrPort("10.0.2.15:7174")); err != nil {
		t.Fatal(err)
	}
	d, _ := cap.decode()
	text := tsharkCheck(t, file, d.fpdus, true)
	if text != "" && !strings.Contains(text, "Terminate") {
		t.Errorf("tshark shows no Terminate")
	}
	if *updateTestdata {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../testdata/siw-terminate.pcap", b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRpingInteropTerminateToSiw makes us send siw a Terminate, with a client
// that lies to stock "rping -s" about its buffers: siw then reads or
// writes an STag we never registered. Our Terminate follows RFC 5040
// §4.8; siw logs what it reads with its swapped bitfields.
func TestRpingInteropTerminateToSiw(t *testing.T) {
	g := linuxguest.Shared(t)
	for _, c := range []struct {
		name  string
		lie   func(t *testing.T, ctx context.Context, c *Client)
		want  *term.Error
		octet byte   // the first octet of our Terminate Control
		siw   string // what siw logs
	}{
		{
			// siw's RDMA Read Request names a source STag we never
			// registered: RDMAP, Remote Protection Error, Invalid STag
			// (RFC 5040 §4.8, §7.2 item 4b).
			name: "read of an unknown STag",
			lie: func(t *testing.T, ctx context.Context, c *Client) {
				src := c.Source()
				src.RKey ^= 0xff // the key of no registration
				src.Append(c.sendMR.Bytes()[:0])
				if err := c.send(); err != nil {
					t.Fatal(err)
				}
			},
			want: term.RDMAPInvalidSTag, octet: 0x01,
			siw: "siw:_got_TERMINATE._layer_1,_type_0,_code_0",
		},
		{
			// siw's RDMA Write names a sink STag we never registered: DDP,
			// Tagged Buffer Error, Invalid STag (RFC 5041 §7.2).
			name: "write to an unknown STag",
			lie: func(t *testing.T, ctx context.Context, c *Client) {
				Fill(c.startMR.Bytes(), 0)
				if err := c.advertise(c.Source()); err != nil {
					t.Fatal(err)
				}
				if _, err := c.recv(ctx); err != nil {
					t.Fatalf("go ahead: %v", err)
				}
				sink := c.Sink()
				sink.RKey ^= 0xff
				if err := c.advertise(sink); err != nil {
					t.Fatal(err)
				}
			},
			want: term.DDPInvalidSTag, octet: 0x11,
			siw: "siw:_got_TERMINATE._layer_1,_type_1,_code_0",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			guestTerminates(t, ctx, g)
			srv, addr := guestServer(t, ctx, g, "-v")
			cap := &capture{}
			cl, ep, _, err := dialGuest(t, ctx, addr, &mpa.Config{ClientServer: true, FirstFPDUDelay: siwDelay, Trace: cap.trace(true)}, Config{})
			if err != nil {
				t.Fatal(err)
			}
			pingByHand(t, ctx, cl, 0)
			c.lie(t, ctx, cl)
			te := waitStopped(t, ctx, ep.QP)
			if te.Remote || !errors.Is(te, c.want) {
				t.Errorf("the queue pair stopped with %v (remote %v), want %v found here", te, te.Remote, c.want)
			}
			// Our side closes the connection after the Terminate; rping's
			// server sees the disconnect.
			ep.QP.Close(ctx)
			t.Logf("rping -s:\n%s", waitOrKill(ctx, srv))
			raw, th := terminateOf(t, cap, true)
			if raw[0] != c.octet || !errors.Is(th.Err(), c.want) {
				t.Errorf("our Terminate is % x (%v), want %v", raw[:4], &th, c.want)
			}
			if got := guestTerminates(t, ctx, g); len(got) != 1 || got[0] != c.siw {
				t.Errorf("siw logged %q, want %q", got, c.siw)
			}
			d, _ := cap.decode()
			file := filepath.Join(t.TempDir(), "terminate.pcap")
			if err := cap.writePcap(file, netip.MustParseAddrPort("10.0.2.2:40000"), netip.MustParseAddrPort("10.0.2.15:7174")); err != nil {
				t.Fatal(err)
			}
			tsharkCheck(t, file, d.fpdus, true)
		})
	}
}

// TestRpingInteropTerminateToSiwClient: our server forgets to post its receive
// again after the client's first Send, so stock "rping -c"'s second Send
// (its sink) finds no buffer: we send DDP, Untagged Buffer Error, no
// buffer available (RFC 5041 §7.2, 0x1/0x2/0x02), the triple siw sent us
// in TestRpingInteropTerminateFromSiw; siw reads it swapped.
func TestRpingInteropTerminateToSiwClient(t *testing.T) {
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, time.Minute)
	guestTerminates(t, ctx, g)
	cap := &capture{}
	l, err := mpa.Listen(context.Background(), "tcp4", "127.0.0.1:0", &mpa.Config{Trace: cap.trace(false)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ep, err := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(ep, Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := g.Start(fmt.Sprintf("rping -c -a %s -p %d -C 1 -v", linuxguest.HostFromGuest, l.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	req, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := req.Accept(ep.QP, nil); err != nil {
		t.Fatal(err)
	}
	// rping's server step by step, without reposting the receive.
	c, err := s.wait(ctx, rdmap.WorkRecv)
	if err != nil {
		t.Fatal(err)
	}
	src, err := ParseInfo(s.recvMR.Bytes()[:c.ByteLen])
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.QP.PostRead(rdmap.ReadWR{ID: wrRDMA, Local: rdmap.SGE{MR: s.rdmaMR, Length: src.Size}, RemoteSTag: src.RKey, RemoteTO: src.Buf}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wait(ctx, rdmap.WorkRead); err != nil {
		t.Fatal(err)
	}
	if err := s.send(); err != nil {
		t.Fatal(err)
	}
	te := waitStopped(t, ctx, ep.QP)
	if te.Remote || !errors.Is(te, term.DDPNoBuffer) {
		t.Errorf("our queue pair stopped with %v (remote %v), want DDP no buffer found here", te, te.Remote)
	}
	ep.QP.Close(ctx)
	// rping's client exits 0 whenever it ends disconnected, but it
	// printed no ping.
	out := waitOrKill(ctx, cl)
	t.Logf("rping -c:\n%s", out)
	if strings.Contains(out, "ping data: ") {
		t.Errorf("rping -c completed a ping")
	}
	raw, th := terminateOf(t, cap, false)
	if raw[0] != 0x12 || raw[1] != 0x02 || !errors.Is(th.Err(), term.DDPNoBuffer) {
		t.Errorf("our Terminate is % x (%v), want 12 02: DDP no buffer", raw[:4], &th)
	}
	if got := guestTerminates(t, ctx, g); len(got) != 1 || got[0] != "siw:_got_TERMINATE._layer_2,_type_1,_code_2" {
		t.Errorf("siw logged %q", got)
	}
	d, _ := cap.decode()
	file := filepath.Join(t.TempDir(), "terminate.pcap")
	if err := cap.writePcap(file, netip.MustParseAddrPort("10.0.2.15:40000"), netip.MustParseAddrPort("10.0.2.2:7174")); err != nil {
		t.Fatal(err)
	}
	tsharkCheck(t, file, d.fpdus, true)
}

// TestRpingInteropManyConnections: 20 connections in a row each way, two
// pings each, none may stall: stock "rping -c" in a shell loop against
// our server, and our client against a stock "rping -s -P" (siw as
// responder, with the accept race that siwDelay avoids).
func TestRpingInteropManyConnections(t *testing.T) {
	const conns = 20
	g := linuxguest.Shared(t)
	t.Run("guest to host", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		l, err := mpa.Listen(context.Background(), "tcp4", "127.0.0.1:0", &mpa.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		served := make(chan error, 1)
		var slowest time.Duration
		go func() {
			dev := rdmap.NewDevice(rdmap.DeviceConfig{})
			for i := range conns {
				ep, err := NewEndpoint(dev, DefaultIRD, DefaultORD)
				if err != nil {
					served <- err
					return
				}
				s, err := NewServer(ep, Config{Validate: true})
				if err != nil {
					served <- err
					return
				}
				req, err := l.Accept(ctx)
				if err != nil {
					served <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				t0 := time.Now()
				if _, err := req.Accept(ep.QP, nil); err != nil {
					served <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				if err := s.Run(ctx); err != nil || s.Pings() != 2 {
					served <- fmt.Errorf("connection %d: %d pings, %v", i, s.Pings(), err)
					return
				}
				slowest = max(slowest, time.Since(t0))
			}
			served <- nil
		}()
		start := time.Now()
		// rdma_cm picks the client's TCP port at random; when it picks one
		// whose connection to this port is still in TIME_WAIT, connect
		// fails with EADDRNOTAVAIL before anything is sent, and rping then
		// hangs in pthread_join: such a try is killed and made again.
		loop := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do
			out=$(timeout 5 rping -c -a %s -p %d -C 2 -V 2>&1); rc=$?
			if [ $rc -ne 0 ]; then
				case "$out" in *"Cannot assign requested address"*) echo "again: $out"; continue;; esac
				echo "$out"; exit 1
			fi
			i=$((i+1))
		done`, conns, linuxguest.HostFromGuest, l.Addr().(*net.TCPAddr).Port)
		out, err := g.Run(ctx, loop)
		if err != nil {
			// Our server's side of it, if it failed too.
			select {
			case serr := <-served:
				t.Fatalf("the rping -c loop: %v\n%s\nour server: %v", err, out, serr)
			case <-time.After(2 * time.Second):
				t.Fatalf("the rping -c loop: %v\n%s\nour server: still serving", err, out)
			}
		}
		if n := strings.Count(out, "again: "); n > 0 {
			t.Logf("%d tries of rping -c failed with EADDRNOTAVAIL and were made again:\n%s", n, out)
		}
		if err := <-served; err != nil {
			t.Fatalf("our server: %v", err)
		}
		t.Logf("%d connections from stock rping -c in %v; the slowest took %v", conns, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	})
	t.Run("host to guest", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		srv, addr := guestServer(t, ctx, g, "-P")
		start := time.Now()
		var slowest time.Duration
		for i := range conns {
			t0 := time.Now()
			// A stalled connection never ends; a good one takes 0.1 s,
			// but the emulated guest can stop for seconds while the
			// race-detector suite fills both cores (a connection once
			// ran out of 10 s there).
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			c, _, _, err := dialGuest(t, cctx, addr, &mpa.Config{ClientServer: true, FirstFPDUDelay: siwDelay}, Config{Count: 2, Validate: true})
			if err == nil {
				err = c.Run(cctx)
			}
			cancel()
			if err != nil {
				t.Fatalf("connection %d after %v: %v\nrping -s -P in the guest: %s", i, time.Since(t0).Round(time.Millisecond), err, srv.Output())
			}
			slowest = max(slowest, time.Since(t0))
		}
		t.Logf("%d connections to stock rping -s -P in %v; the slowest took %v", conns, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	})
}

// builtIwarp says iwarpBinary has built the command, which TestMain
// removes when every test (each -count) has run.
var builtIwarp bool

// iwarpBinary builds cmd/iwarp once for the tests that run it.
var iwarpBinary = sync.OnceValues(func() (string, error) {
	builtIwarp = true
	dir, err := os.MkdirTemp("", "rping-iwarp-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "iwarp")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ../../cmd/iwarp: %v\n%s", err, out)
	}
	return bin, nil
})

// TestRpingInteropCommand runs the iwarp command as a user would, with its
// defaults: "iwarp rping -s" pinged by stock "rping -c", and "iwarp
// rping -c" pinging stock "rping -s"; each records a capture that iwarp
// dump and tshark read.
func TestRpingInteropCommand(t *testing.T) {
	g := linuxguest.Shared(t)
	bin, err := iwarpBinary()
	if err != nil {
		t.Fatal(err)
	}
	dump := func(t *testing.T, file string) {
		t.Helper()
		out, err := exec.Command(bin, "dump", file).CombinedOutput()
		if err != nil {
			t.Fatalf("iwarp dump: %v\n%s", err, out)
		}
		fpdus := strings.Count(string(out), "FPDU len")
		if good := strings.Count(string(out), "CRC good"); fpdus < 21 || good != fpdus {
			t.Errorf("iwarp dump finds %d FPDUs, %d with a good CRC:\n%s", fpdus, good, out)
		}
		tsharkCheck(t, file, fpdus, true)
	}
	t.Run("rping -c to iwarp rping -s", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		file := filepath.Join(t.TempDir(), "server.pcap")
		cmd := exec.CommandContext(ctx, bin, "rping", "-s", "-a", "127.0.0.1", "-p", "0", "-v", "-V", "-d", "--pcap", file)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncBuf
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		sc := bufio.NewScanner(stdout)
		var port string
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening on tcp://127.0.0.1:"); ok {
				port = p
				break
			}
		}
		if port == "" {
			t.Fatalf("iwarp rping -s did not say where it listens: %s", stderr.String())
		}
		var out strings.Builder
		copied := make(chan struct{})
		go func() {
			for sc.Scan() {
				out.WriteString(sc.Text() + "\n")
			}
			close(copied)
		}()
		gout, err := g.Run(ctx, fmt.Sprintf("rping -c -a %s -p %s -C %d -v -V", linuxguest.HostFromGuest, port, pings))
		if err != nil {
			t.Fatalf("rping -c: %v", err)
		}
		<-copied
		if err := cmd.Wait(); err != nil {
			t.Fatalf("iwarp rping -s: %v\n%s%s", err, out.String(), stderr.String())
		}
		if got, want := onlyLines(gout, "ping data: "), rpingLines("ping data: ", pings, DefaultSize); got != want {
			t.Errorf("rping -c printed\n%s\nwant\n%s", gout, want)
		}
		if got, want := onlyLines(out.String(), "server ping data: "), rpingLines("server ping data: ", pings, DefaultSize); got != want {
			t.Errorf("iwarp rping -s printed\n%s\nwant\n%s", out.String(), want)
		}
		dump(t, file)
	})
	t.Run("iwarp rping -c to rping -s", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		srv, addr := guestServer(t, ctx, g, "-v")
		host, hport, _ := net.SplitHostPort(addr)
		file := filepath.Join(t.TempDir(), "client.pcap")
		out, err := exec.CommandContext(ctx, bin, "rping", "-c", "-a", host, "-p", hport, "-C", strconv.Itoa(pings), "-vV", "--pcap", file).CombinedOutput()
		if err != nil {
			t.Fatalf("iwarp rping -c: %v\n%s", err, out)
		}
		sout, err := srv.Wait(ctx)
		if err != nil {
			t.Errorf("rping -s: %v", err)
		}
		if got, want := string(out), rpingLines("ping data: ", pings, DefaultSize); got != want {
			t.Errorf("iwarp rping -c printed\n%s\nwant\n%s", got, want)
		}
		if got, want := onlyLines(sout, "server ping data: "), rpingLines("server ping data: ", pings, DefaultSize); got != want {
			t.Errorf("rping -s printed\n%s\nwant\n%s", sout, want)
		}
		dump(t, file)
	})
}
