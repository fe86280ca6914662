package linuxguest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestBootAndDevices boots the shared guest and checks that siw0 is an
// iWARP device on eth0, as ibv_devices, ibv_devinfo and rdma link see it.
func TestBootAndDevices(t *testing.T) {
	start := time.Now()
	g := Shared(t)
	t.Logf("guest ready after %v", time.Since(start).Round(time.Millisecond))
	ctx := ctxFor(t, time.Minute)

	t0 := time.Now()
	if _, err := g.Run(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	t.Logf("a command's round trip: %v", time.Since(t0).Round(time.Millisecond))

	out, err := g.Run(ctx, "ibv_devices; rdma link show; ibv_devinfo -d siw0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"siw0",
		"link siw0/1 state ACTIVE",
		"netdev eth0",
		"transport:\t\t\tiWARP",
		"PORT_ACTIVE",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	out, err = g.Run(ctx, "ip -4 addr show dev eth0")
	if err != nil || !strings.Contains(out, GuestIP+"/24") {
		t.Errorf("eth0 is not %s: %v\n%s", GuestIP, err, out)
	}
}

// TestRunExitStatus checks that a failing command's status and output
// come back in an *ExitError.
func TestRunExitStatus(t *testing.T) {
	g := Shared(t)
	ctx := ctxFor(t, time.Minute)
	out, err := g.Run(ctx, "echo to-stdout; echo to-stderr >&2; exit 3")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 3 {
		t.Fatalf("want exit status 3, got %v", err)
	}
	if !strings.Contains(out, "to-stdout") || !strings.Contains(out, "to-stderr") {
		t.Errorf("output %q lacks stdout or stderr", out)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "to-stderr") {
		t.Errorf("error %q lacks the status or the output", err)
	}
}

// TestBackgroundProc starts a command in the background, reads its output
// while it runs, kills it, and sees it gone.
func TestBackgroundProc(t *testing.T) {
	g := Shared(t)
	ctx := ctxFor(t, time.Minute)
	p, err := g.Start("echo started; while :; do sleep 1; done")
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.Output(), "started") {
		select {
		case <-ctx.Done():
			t.Fatal("no output from the background command")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	out, err := p.Wait(ctx)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 137 {
		t.Errorf("want exit status 137 after Kill, got %v (output %q)", err, out)
	}
	// Its process group is gone: no sleep is left.
	if out, err := g.Run(ctx, "ps | grep -c '[s]leep 1' || true"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("sleep still runs after Kill: %v %q", err, out)
	}

	// A Run whose context ends is killed too.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := g.Run(short, "sleep 30"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("want the deadline's error, got %v", err)
	}
	if out, err := g.Run(ctx, "ps | grep -c '[s]leep 30' || true"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("sleep 30 still runs after its Run's context ended: %v %q", err, out)
	}
}

// TestRpingLoopback runs stock rping as server and client inside the
// guest, over siw on eth0 (siw connects to its own address).
func TestRpingLoopback(t *testing.T) {
	g := Shared(t)
	ctx := ctxFor(t, time.Minute)
	s, err := g.Start("rping -s -a " + GuestIP + " -p 7174 -C 3 -v")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WaitListening(ctx, 7174); err != nil {
		t.Fatal(err)
	}
	out, err := g.Run(ctx, "rping -c -a "+GuestIP+" -p 7174 -C 3 -v -V")
	if err != nil && !RpingTeardownRace(out, err) {
		t.Fatalf("client: %v\nserver: %s", err, s.Output())
	}
	sout, err := s.Wait(ctx)
	if err != nil && !RpingTeardownRace(sout, err) {
		t.Fatalf("server: %v", err)
	}
	for i := 0; i < 3; i++ {
		want := fmt.Sprintf("rdma-ping-%d: ", i)
		if !strings.Contains(out, "ping data: "+want) || !strings.Contains(sout, "server ping data: "+want) {
			t.Errorf("ping %d missing:\nclient: %s\nserver: %s", i, out, sout)
		}
	}
}

// mpaRequest has rping in the guest connect to a plain TCP listener on
// the host (at HostFromGuest) and returns the first octets of its MPA
// Request Frame: the key, the flags and revision, the Private Data length,
// and the enhanced IRD and ORD words when there are any.
func mpaRequest(t *testing.T, g *Guest) []byte {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, err := g.Start(fmt.Sprintf("rping -c -a %s -p %d -C 1", HostFromGuest, l.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- result{nil, err}
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b := make([]byte, 20)
		if _, err := io.ReadFull(c, b); err != nil {
			got <- result{nil, err}
			return
		}
		if n := binary.BigEndian.Uint16(b[18:]); n >= 4 {
			e := make([]byte, 4)
			if _, err := io.ReadFull(c, e); err != nil {
				got <- result{nil, err}
				return
			}
			b = append(b, e...)
		}
		got <- result{b, nil}
	}()
	var r result
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatalf("no connection from the guest: %s", p.Output())
	}
	// rping fails once the listener closes; it has done its part.
	p.Wait(ctx)
	if r.err != nil {
		t.Fatalf("reading the MPA Request: %v (rping: %s)", r.err, p.Output())
	}
	if string(r.b[:16]) != "MPA ID Req Frame" {
		t.Fatalf("not an MPA Request: %q", r.b)
	}
	return r.b
}

// TestGuestToHostMPARequest checks that the guest reaches the host's
// loopback at HostFromGuest, and that siw's module parameters change its
// MPA Request as scripts/linux-guest/README.md says: at boot, written in
// /sys/module/siw/parameters, and through ReloadSiw.
func TestGuestToHostMPARequest(t *testing.T) {
	g := Shared(t)
	ctx := ctxFor(t, time.Minute)
	check := func(what string, b []byte, flags, rev byte, pdLen uint16, words ...uint16) {
		t.Helper()
		if b[16] != flags || b[17] != rev || binary.BigEndian.Uint16(b[18:]) != pdLen {
			t.Errorf("%s: flags %#02x rev %d pd_len %d, want %#02x %d %d", what, b[16], b[17], binary.BigEndian.Uint16(b[18:]), flags, rev, pdLen)
		}
		for i, w := range words {
			if got := binary.BigEndian.Uint16(b[20+2*i:]); got != w {
				t.Errorf("%s: enhanced word %d is %#04x, want %#04x", what, i, got, w)
			}
		}
	}
	// siw's defaults: revision 2 with S (0x10), no C; rping's IRD/ORD 1/1.
	check("defaults", mpaRequest(t, g), 0x10, 2, 4, 0x0001, 0x0001)

	set := func(kv ...string) {
		t.Helper()
		var cmd []string
		for i := 0; i < len(kv); i += 2 {
			cmd = append(cmd, "echo "+kv[i+1]+" >/sys/module/siw/parameters/"+kv[i])
		}
		if _, err := g.Run(ctx, strings.Join(cmd, "; ")); err != nil {
			t.Fatal(err)
		}
	}
	// Peer-to-peer: flag A in the IRD word, the RTRs of rtr_type in the ORD
	// word (C 0x8000 Write, D 0x4000 Read).
	set("peer_to_peer", "1", "rtr_type", "1")
	check("peer_to_peer rtr_type=1", mpaRequest(t, g), 0x10, 2, 4, 0x8001, 0x8001)
	set("rtr_type", "2", "mpa_crc_required", "1")
	check("peer_to_peer rtr_type=2 mpa_crc_required", mpaRequest(t, g), 0x50, 2, 4, 0x8001, 0x4001)

	// Revision 1, by reloading siw: no enhanced data. (Shared puts siw's
	// defaults back after the test.)
	if err := g.ReloadSiw(ctx, "mpa_version=1"); err != nil {
		t.Fatal(err)
	}
	if out, err := g.Run(ctx, "cat /sys/module/siw/parameters/mpa_version; rdma link show"); err != nil ||
		!strings.HasPrefix(out, "1\n") || !strings.Contains(out, "link siw0/1 state ACTIVE") {
		t.Fatalf("after ReloadSiw: %v\n%s", err, out)
	}
	check("mpa_version=1", mpaRequest(t, g), 0x00, 1, 0)
}

// TestHostToGuestThroughForward starts rping's server in the guest and
// connects to it from the host through a forwarded port with a hand-made
// MPA Request: the guest's siw answers with an MPA Reply.
func TestHostToGuestThroughForward(t *testing.T) {
	g := Shared(t)
	ctx := ctxFor(t, time.Minute)
	// Shared put back siw's defaults after TestGuestToHostMPARequest.
	if out, err := g.Run(ctx, "cd /sys/module/siw/parameters && cat mpa_version peer_to_peer rtr_type"); err != nil || out != "2\nN\n3\n" {
		t.Errorf("siw's parameters are not its defaults: %v %q", err, out)
	}
	s, err := g.Start("rping -s -a " + GuestIP + " -p 7176 -C 1")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := g.Forward(7176)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := g.Forward(7176); again != addr || g.HostAddr(7176) != addr {
		t.Errorf("Forward again gave %q, HostAddr %q; want %q", again, g.HostAddr(7176), addr)
	}
	if err := g.WaitListening(ctx, 7176); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Revision 2, S, client-server, IRD/ORD 1/1, no CRC.
	req := append([]byte("MPA ID Req Frame"), 0x10, 2, 0, 4, 0, 1, 0, 1)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	rep := make([]byte, 24)
	if _, err := io.ReadFull(c, rep); err != nil {
		t.Fatalf("no MPA Reply through %s: %v (rping: %s)", addr, err, s.Output())
	}
	if string(rep[:16]) != "MPA ID Rep Frame" || rep[16]&0x20 != 0 || rep[17] != 2 {
		t.Errorf("reply %q (%x): want an accepting revision 2 Reply", rep, rep)
	}
	c.Close()
	s.Wait(ctx) // rping's server ends when the connection does
}

// TestBootWithOptions boots a guest of its own with siw parameters and a
// forwarded port given at boot.
func TestBootWithOptions(t *testing.T) {
	g := ForTest(t, Options{SiwParams: "mpa_version=1 mpa_crc_required=1", Forward: []int{7177}})
	ctx := ctxFor(t, time.Minute)
	if !strings.HasPrefix(g.HostAddr(7177), "127.0.0.1:") {
		t.Errorf("HostAddr(7177) = %q", g.HostAddr(7177))
	}
	out, err := g.Run(ctx, "cd /sys/module/siw/parameters && cat mpa_version mpa_crc_required")
	if err != nil || out != "1\nY\n" {
		t.Errorf("siw's parameters: %v %q", err, out)
	}
	if g.SiwParams() != "mpa_version=1 mpa_crc_required=1" {
		t.Errorf("SiwParams() = %q", g.SiwParams())
	}
}

// rping's teardown race is recognised wherever its line lands among what
// rping wrote to stdout (buffered, it may come after), and only with
// rping's exit status 255.
func TestRpingTeardownRaceOutput(t *testing.T) {
	const line = "rdma_get_cm_event: Bad file descriptor"
	pings := "ping data: rdma-ping-0: ABC\nping data: rdma-ping-1: BCD\n"
	for _, c := range []struct {
		out    string
		status int
		want   bool
	}{
		{pings + line + "\n", 255, true},
		{"client DISCONNECT EVENT...\n" + line + "\n" + pings, 255, true},
		{pings, 255, false},
		{pings + line + "\n", 1, false},
		{pings + "rdma_get_cm_event: Bad file descriptor, really\n", 255, false},
	} {
		err := &ExitError{Cmd: "rping -c", Status: c.status, Output: c.out}
		if got := RpingTeardownRace(c.out, err); got != c.want {
			t.Errorf("status %d, output %q: %v, want %v", c.status, c.out, got, c.want)
		}
	}
	if RpingTeardownRace(pings+line, nil) {
		t.Error("a successful exit is no race")
	}
}
