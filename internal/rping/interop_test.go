package rping

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestInteropGuestClient: stock "rping -c" in the guest pings our server.
func TestInteropGuestClient(t *testing.T) {
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, time.Minute)
	h := startHostServer(t, ctx, mpa.Config{}, Config{Validate: true})
	out, err := g.Run(ctx, fmt.Sprintf("rping -c -a %s -p %d -C 5 -v -V", linuxguest.HostFromGuest, h.port))
	t.Logf("rping -c:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.wait(t, ctx); err != nil {
		t.Errorf("our server: %v", err)
	}
	if got, want := onlyLines(out, "ping data: "), rpingLines("ping data: ", 5, DefaultSize); got != want {
		t.Errorf("rping -c printed\n%s\nwant\n%s", got, want)
	}
	if got, want := h.out.String(), rpingLines("server ping data: ", 5, DefaultSize); got != want {
		t.Errorf("our server printed\n%s\nwant\n%s", got, want)
	}
	checkCapture(t, h.cap, 5, true)
}

// TestInteropGuestServer: our client pings stock "rping -s" in the guest.
func TestInteropGuestServer(t *testing.T) {
	g := linuxguest.Shared(t)
	ctx := ctxFor(t, time.Minute)
	const port = 7174
	srv, err := g.Start(fmt.Sprintf("rping -s -a %s -p %d -v", linuxguest.GuestIP, port))
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
	cap := &capture{}
	ep, err := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuf
	c, err := NewClient(ep, Config{Count: 5, Validate: true, Verbose: &out})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := mpa.Dial(ctx, "tcp4", addr, ep.QP, &mpa.Config{ClientServer: true, FirstFPDUDelay: siwDelay, Trace: cap.trace(true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("connected: %+v", mc.Negotiated())
	if err := c.Run(ctx); err != nil {
		t.Errorf("our client: %v", err)
	}
	sout, err := srv.Wait(ctx)
	t.Logf("rping -s:\n%s", sout)
	if err != nil {
		t.Errorf("rping -s: %v", err)
	}
	if got, want := out.String(), rpingLines("ping data: ", 5, DefaultSize); got != want {
		t.Errorf("our client printed\n%s\nwant\n%s", got, want)
	}
	if got, want := onlyLines(sout, "server ping data: "), rpingLines("server ping data: ", 5, DefaultSize); got != want {
		t.Errorf("rping -s printed\n%s\nwant\n%s", got, want)
	}
	checkCapture(t, cap, 5, true)
	_ = errors.Is
}
