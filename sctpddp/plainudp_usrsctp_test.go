//go:build !js

package sctpddp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

// The tests in this file run a DDP Stream Session over plain UDP (RFC
// 6951) between this package and usrsctp, an independent SCTP: the C
// peer of package sctp's interop tests (sctp/testdata/usrsctp), which
// sends DDP's Adaptation Layer Indication, answers a DDP Stream Session
// Initiate with an Accept and echoes every DDP Segment on its stream. The
// echo makes it a mirror: an RDMA Write to this end's own STag comes back
// and is placed there, a Send comes back into a posted receive, and an
// RDMA Read Request of this end's own STag comes back, is answered here,
// and its Response comes back to complete the Read.

// buildUsrsctpPeer compiles sctp/testdata/usrsctp/sctp_peer.c with
// usrsctp's API, or skips t when the compiler or usrsctp is missing.
func buildUsrsctpPeer(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc); scripts/test.sh installs gcc")
	}
	src, err := filepath.Abs("sctp/testdata/usrsctp/sctp_peer.c")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sctp_peer")
	msg, err := exec.Command(cc, "-O1", "-Wall", "-o", out, src, "-DPEER_USRSCTP", "-lusrsctp", "-lpthread").CombinedOutput()
	if err != nil {
		if bytes.Contains(msg, []byte("usrsctp.h")) {
			t.Skip("usrsctp is not installed (Debian: libusrsctp-dev; scripts/test.sh installs it)")
		}
		t.Fatalf("cc: %v\n%s", err, msg)
	}
	return out
}

// usrsctpProc is a running C peer and the lines it prints.
type usrsctpProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
}

func startUsrsctp(t *testing.T, bin string, args ...string) *usrsctpProc {
	t.Helper()
	p := &usrsctpProc{cmd: exec.Command(bin, args...), lines: make(chan string, 64)}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		close(p.lines)
		_ = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-done
	})
	return p
}

// waitLine returns the first line the peer prints that starts with
// prefix.
func (p *usrsctpProc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the peer ended before %q\n%s", prefix, p.stderr.String())
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("the peer printed no %q\n%s", prefix, p.stderr.String())
		}
	}
}

// mirrorSession runs RDMA Write, Send and RDMA Read on a session whose
// peer echoes every DDP Segment, and checks every byte.
func mirrorSession(t *testing.T, p *peer) {
	t.Helper()
	const n = 48 << 10
	placed := p.Reg(t, n, rdmap.RemoteWrite|rdmap.LocalWrite)
	readable := p.Reg(t, n, rdmap.RemoteRead)
	rdmaptest.Fill(readable.Bytes(), 5)
	src := p.Reg(t, n, 0)
	rdmaptest.Fill(src.Bytes(), 3)
	sink := p.Reg(t, n, rdmap.LocalWrite)
	rbuf := p.Reg(t, 2048, rdmap.LocalWrite)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.QP.PostRecv(rdmap.RecvWR{ID: 10, SGL: []rdmap.SGE{{MR: rbuf, Length: 2048}}}))
	must(p.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: n}}, RemoteSTag: placed.STag()}))
	must(p.QP.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: src, Length: 1000}}}))
	must(p.QP.PostRead(rdmap.ReadWR{ID: 3, Local: rdmap.SGE{MR: sink, Length: n}, RemoteSTag: readable.STag()}))
	for i := 1; i <= 3; i++ {
		if c := waitC(t, p.SCQ); c.WRID != uint64(i) || c.Status != rdmap.StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	if c := waitC(t, p.RCQ); c.WRID != 10 || c.Status != rdmap.StatusSuccess || c.ByteLen != 1000 {
		t.Fatalf("receive: %+v", c)
	}
	if !bytes.Equal(rbuf.Bytes()[:1000], src.Bytes()[:1000]) {
		t.Error("the echoed Send's bytes differ")
	}
	if !bytes.Equal(placed.Bytes(), src.Bytes()) {
		t.Error("the echoed RDMA Write's bytes differ")
	}
	if !bytes.Equal(sink.Bytes(), readable.Bytes()) {
		t.Error("the RDMA Read's bytes differ")
	}
}

// TestPlainUDPUsrsctp runs a DDP Stream Session with usrsctp over plain
// UDP in both roles: usrsctp associating with a Listener (whose
// stateless handshake it goes through) and a Dial associating with
// usrsctp. Each end requires the other's Adaptation Layer Indication.
func TestPlainUDPUsrsctp(t *testing.T) {
	bin := buildUsrsctpPeer(t)
	checkGoroutines(t)
	peerUDP := func() int {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	t.Run("usrsctp dials", func(t *testing.T) {
		srv, _ := plainConfigs()
		l, err := Listen(testCtx(t), "udp4", "127.0.0.1:0", srv)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ours := l.Addr().(*net.UDPAddr).Port
		p := startUsrsctp(t, bin, "-u", strconv.Itoa(peerUDP()), "-r", strconv.Itoa(ours), "-c", "127.0.0.1:5000", "-p", "5001")
		a, err := l.Accept(testCtx(t))
		if err != nil {
			t.Fatalf("Accept: %v\n%s", err, p.stderr.String())
		}
		defer a.Close()
		usrsctpSession(t, a, p)
	})
	t.Run("usrsctp listens", func(t *testing.T) {
		pu, ours := peerUDP(), peerUDP()
		p := startUsrsctp(t, bin, "-u", strconv.Itoa(pu), "-r", strconv.Itoa(ours), "-s", "-p", "5000")
		p.waitLine(t, "listening")
		_, cli := plainConfigs()
		cli.localAddr = fmt.Sprintf("127.0.0.1:%d", ours)
		a, err := Dial(testCtx(t), "udp4", fmt.Sprintf("127.0.0.1:%d", pu), cli)
		if err != nil {
			t.Fatalf("Dial: %v\n%s", err, p.stderr.String())
		}
		defer a.Close()
		usrsctpSession(t, a, p)
	})
}

// usrsctpSession runs a DDP Stream Session of basic RFC 5043 codes (the
// peer's) over a, then ends it and the association.
func usrsctpSession(t *testing.T, a *Association, p *usrsctpProc) {
	t.Helper()
	if l := p.waitLine(t, "adaptation "); l != "adaptation 1" {
		t.Errorf("usrsctp saw our Adaptation Layer Indication as %q", l)
	}
	q := newPeer(t, nil)
	s, err := a.Connect(testCtx(t), q.QP, SessionConfig{Basic: true, PrivateData: []byte("mirror")})
	if err != nil {
		t.Fatalf("Connect: %v\n%s", err, p.stderr.String())
	}
	if string(s.PeerPrivateData) != "mirror" {
		t.Errorf("Accept's Private Data %q", s.PeerPrivateData)
	}
	mirrorSession(t, q)
	// The SHUTDOWN ends the session with the association: a Terminate
	// first would race the peer's own Terminate, which the C peer fails
	// to send once the SHUTDOWN has come.
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	_ = s.Close()
	if l := p.waitLine(t, "done "); !strings.Contains(l, "accepts=1") {
		t.Errorf("usrsctp ended with %q", l)
	}
}
