package rping

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/linuxguest"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

func TestMain(m *testing.M) { os.Exit(linuxguest.Main(m)) }

// siwDelay is the pause our initiator makes between siw's MPA Reply and
// its first FPDU (mpa.Config.FirstFPDUDelay): siw's responder sends the
// Reply before it hooks the socket to the queue pair, and an FPDU that
// arrives in between is not read until more data comes.
const siwDelay = 100 * time.Millisecond

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
	l, err := mpa.Listen("tcp4", "127.0.0.1:0", &mcfg)
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
			if got := d.count(w.fromClient, w.op); got < w.n || got > w.n+1 { // +1: an RTR
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
// connection settled with what a case wants. On the responder side,
// Negotiated().RTR is not filled in (mpa's accept leaves it RTRNone): the
// RTR our Reply accepted is in LocalIRDORD.
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
	got := n.RTR
	if responder {
		got = ddp.RTRNone
		if e := n.LocalIRDORD; e != nil && e.PeerToPeer {
			switch {
			case e.WriteRTR:
				got = ddp.RTRWrite
			case e.ReadRTR:
				got = ddp.RTRRead
			case e.SendRTR:
				got = ddp.RTRSend
			}
		}
	}
	if wire := firstRTR(d); wire != rtr || got != rtr {
		t.Errorf("RTR on the wire %v, negotiated %v; want %v", wire, got, rtr)
	}
}

const pings = 3

// TestInteropGuestClient: stock "rping -c -C 3 -v -V" in the guest pings
// our server on the host, with siw as initiator in each MPA mode it has.
func TestInteropGuestClient(t *testing.T) {
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
			if err != nil {
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

// TestInteropGuestClientCRCRequired: siw as initiator with
// mpa_crc_required refuses a Reply with C=0, although CRCs are then in use
// (RFC 5044 §7.1.1: C "declares an endpoint's preferred CRC usage", and
// one C=1 turns CRCs on both ways). Our server with NoCRC therefore
// cannot serve it; rping sees the connection rejected.
func TestInteropGuestClientCRCRequired(t *testing.T) {
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, time.Minute)
	setSiw(t, ctx, g, "mpa_crc_required=1")
	defer setSiw(t, ctx, g, "")
	h := startHostServer(t, ctx, mpa.Config{NoCRC: true}, Config{})
	out, err := g.Run(ctx, fmt.Sprintf("rping -c -a %s -p %d -C 1", linuxguest.HostFromGuest, h.port))
	if err == nil || !strings.Contains(out, "RDMA_CM_EVENT_REJECTED") {
		t.Errorf("rping -c: %v, want RDMA_CM_EVENT_REJECTED in its output:\n%s", err, out)
	}
	err = h.wait(t, ctx)
	if !h.cap.dirs[1].frame || err != nil || h.srv.Pings() != 0 {
		t.Errorf("our server: a Reply sent %v, %d pings, %v; want a Reply, 0 pings and the client's disconnect", h.cap.dirs[1].frame, h.srv.Pings(), err)
	}
	if d, err := h.cap.decode(); err != nil || !d.req.CRC || d.rep.CRC {
		t.Errorf("the Request's C should be 1 and our Reply's 0: %v %+v", err, d)
	}
}

// guestServer starts a stock "rping -s -v" in the guest on port and
// returns it once it listens; the test's end kills it if it still runs.
func guestServer(t *testing.T, ctx context.Context, g *linuxguest.Guest, port int, flags string) *linuxguest.Proc {
	t.Helper()
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
		t.Fatal(err)
	}
	return srv
}

// TestInteropGuestServer: our client pings a stock "rping -s -v" in the
// guest, with siw as responder, in each MPA mode our initiator has.
func TestInteropGuestServer(t *testing.T) {
	g := linuxguest.Shared(t)
	defer setSiw(t, ctxFor(t, time.Minute), g, "")
	const port = 7174
	addr, err := g.Forward(port)
	if err != nil {
		t.Fatal(err)
	}
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
			srv := guestServer(t, ctx, g, port, "-v")
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
				sout, _ := srv.Wait(ctx)
				if !errors.Is(err, rdmap.ErrDisconnected) || cl.Pings() != 0 || !strings.Contains(sout, c.siwFails) {
					t.Errorf("our client: %d pings, %v; rping -s:\n%s\nwant 0 pings, the server's disconnect and %q", cl.Pings(), err, sout, c.siwFails)
				}
				return
			}
			if err := cl.Run(ctx); err != nil {
				t.Errorf("our client: %v", err)
			}
			sout, err := srv.Wait(ctx)
			if err != nil {
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

// hog pins QEMU (this process's child) to CPU 0 beside two busy
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

// TestInteropSiwAcceptRaceSweep measures how often a connection to siw's
// responder stalls for each FirstFPDUDelay (IWARP_RPING_SWEEP=N runs N
// connections per delay; skipped otherwise).
func TestInteropSiwAcceptRaceSweep(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IWARP_RPING_SWEEP"))
	if n <= 0 {
		t.Skip("IWARP_RPING_SWEEP=N runs N connections per delay")
	}
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, 30*time.Minute)
	const port = 7180
	srv, err := g.Start(fmt.Sprintf("rping -s -P -a %s -p %d", linuxguest.GuestIP, port))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := g.Forward(port)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WaitListening(ctx, port); err != nil {
		t.Fatal(err)
	}
	// IWARP_RPING_SWEEP_LOAD=K keeps K goroutines busy meanwhile, as other
	// work on the machine would.
	load, _ := strconv.Atoi(os.Getenv("IWARP_RPING_SWEEP_LOAD"))
	stop := make(chan struct{})
	defer close(stop)
	for range load {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e6; i++ {
				}
			}
		}()
	}
	// IWARP_RPING_SWEEP_HOG=1 puts QEMU on CPU 0 with two busy
	// processes and this test on CPU 1: the guest's vCPU is then
	// descheduled at random while this side answers at once, the worst
	// case for the race.
	if n, _ := strconv.Atoi(os.Getenv("IWARP_RPING_SWEEP_HOG")); n > 0 {
		hog(t, n)
	}
	p2p := os.Getenv("IWARP_RPING_SWEEP_P2P") != ""
	// Round robin over the delays, so that each sees the same guest.
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
	stalls := make([]int, len(delays))
	worst := make([]time.Duration, len(delays))
	for i := 0; i < n; i++ {
		for k, d := range delays {
			t0 := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			c, _, _, err := dialGuest(t, cctx, addr, &mpa.Config{ClientServer: !p2p, FirstFPDUDelay: d}, Config{Count: 1, Validate: true})
			if err == nil {
				err = c.Run(cctx)
			}
			cancel()
			if err != nil {
				stalls[k]++
			} else if el := time.Since(t0); el > worst[k] {
				worst[k] = el
			}
		}
	}
	for k, d := range delays {
		t.Logf("FirstFPDUDelay %v: %d of %d connections stalled; slowest good one %v", d, stalls[k], n, worst[k].Round(time.Millisecond))
	}
	srv.Kill()
}
