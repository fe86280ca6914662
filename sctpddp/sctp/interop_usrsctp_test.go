//go:build !js

package sctp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The tests in this file associate this package with usrsctp (Debian's
// libusrsctp-dev) over UDP encapsulation (RFC 6951): the C peer of
// testdata/usrsctp, built by the test, runs as a subprocess. It sends
// DDP's Adaptation Layer Indication, so this package requires it
// (HandshakeConfig.RequireDDP, RFC 5043 §11.1), and it checks ours.

// The SCTP ports of the usrsctp tests: this package's and the peer's.
const (
	interopOurPort  = 5000
	interopPeerPort = 5001
)

// usrsctpPeer is a running C peer.
type usrsctpPeer struct {
	cmd    *exec.Cmd
	out    *peerOutput
	stderr bytes.Buffer
	exited chan error
}

// startPeer runs the peer at bin with args; t's end kills it if it still
// runs.
func startPeer(t *testing.T, bin string, args ...string) *usrsctpPeer {
	t.Helper()
	p := &usrsctpPeer{cmd: exec.Command(bin, args...), exited: make(chan error, 1)}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.out = newPeerOutput(stdout)
	done := make(chan struct{})
	go func() {
		<-p.out.done // Wait closes the pipe: read all of it first
		p.exited <- p.cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-done
	})
	return p
}

// wait waits for the peer to exit and fails t if it did not exit 0.
func (p *usrsctpPeer) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("the peer: %v\n%s", err, p.stderr.String())
		}
	case <-time.After(timeout):
		t.Fatalf("the peer did not exit in %v\n%s", timeout, p.stderr.String())
	}
}

// freeUDPPort returns a UDP port of 127.0.0.1 that was free a moment ago.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// dialPeerUDP returns a UDP socket on 127.0.0.1 connected to the peer's
// UDP port.
func dialPeerUDP(t *testing.T, peerUDP int) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: peerUDP})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	c.SetWriteBuffer(4 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

// usrsctpAssociate starts the peer in the given role and associates this
// package with it over conn, a UDP socket connected to the peer's UDP
// port peerUDP, whose own port the peer is told. extra are more
// arguments of the peer.
func usrsctpAssociate(t *testing.T, bin string, conn net.Conn, peerUDP int, oursClient bool, cfg Config, extra ...string) (*Association, *usrsctpPeer, error) {
	t.Helper()
	ourUDP := conn.LocalAddr().(*net.UDPAddr).Port
	args := []string{"-u", strconv.Itoa(peerUDP), "-r", strconv.Itoa(ourUDP)}
	args = append(args, extra...)
	cfg.Handshake.LocalPort = interopOurPort
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if oursClient {
		p := startPeer(t, bin, append(args, "-s", "-p", strconv.Itoa(interopPeerPort))...)
		if _, err := p.out.waitLine("listening", 10*time.Second); err != nil {
			t.Fatalf("%v\n%s", err, p.stderr.String())
		}
		cfg.Handshake.PeerPort = interopPeerPort
		a, err := Client(conn, cfg)
		return a, p, err
	}
	p := startPeer(t, bin, append(args, "-c", fmt.Sprintf("127.0.0.1:%d", interopOurPort), "-p", strconv.Itoa(interopPeerPort))...)
	a, err := Server(conn, cfg)
	return a, p, err
}

// TestInteropUsrsctp runs this package against usrsctp in both roles,
// each requiring the other's Adaptation Layer Indication: 200 messages
// of up to 8 KiB on 5 streams, every third unordered, echoed by usrsctp;
// then a DDP Stream Session on each of 3 more streams (Initiate, Accept,
// 20 DDP Segment Chunks each way, Terminate each way); then an idle
// path, until each side has sent a HEARTBEAT (both are asked for one
// every 100 ms and RTO) and answered the other's; then a SHUTDOWN.
// tshark dissects the capture: no malformed packet, every checksum
// good, the Adaptation Layer Indication with code point 1 in the INIT
// and the INIT ACK. Its subtests "loss" and "RequireDDP" are
// usrsctpLoss's and usrsctpRequireDDP's.
func TestInteropUsrsctp(t *testing.T) {
	bin := buildPeer(t, true)
	defer t.Run("loss", func(t *testing.T) { usrsctpLoss(t, bin) })
	defer t.Run("RequireDDP", func(t *testing.T) { usrsctpRequireDDP(t, bin) })
	defer t.Run("ABORT", func(t *testing.T) { usrsctpAbort(t, bin) })
	for _, oursClient := range []bool{true, false} {
		name := "usrsctp client"
		if oursClient {
			name = "usrsctp server"
		}
		t.Run(name, func(t *testing.T) {
			peerUDP := freeUDPPort(t)
			capture := newCaptureConn(dialPeerUDP(t, peerUDP))
			cfg := Config{Handshake: HandshakeConfig{RequireDDP: true}, HeartbeatInterval: 100 * time.Millisecond}
			a, p, err := usrsctpAssociate(t, bin, capture, peerUDP, oursClient, cfg, "-t", "30", "-h", "100")
			if err != nil {
				t.Fatalf("associating with usrsctp: %v\n%s", err, p.stderr.String())
			}
			if ad := a.Established().PeerAdaptation; !ad.DDP() {
				t.Errorf("usrsctp's Adaptation Layer Indication %+v", ad)
			}
			if l, err := p.out.waitLine("adaptation ", 5*time.Second); err != nil || l != "adaptation 1" {
				t.Errorf("usrsctp saw our indication as %q, %v", l, err)
			}
			echoExchange(t, a, 200, 8<<10, 5, 20*time.Second)
			ddpSessions(t, a, []uint16{5, 6, 7}, 20, 20*time.Second)
			capture.waitHeartbeats(t, 10*time.Second)
			if err := a.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			want := fmt.Sprintf("done messages=%d accepts=3 terminates=3", 200+3*(20+2))
			if l, err := p.out.waitLine("done ", 10*time.Second); err != nil || l != want {
				t.Errorf("usrsctp ended with %q, %v; want %q", l, err, want)
			}
			p.wait(t, 10*time.Second)
			r := dissect(t, capture.writePcap(t, t.TempDir()), uint16(peerUDP))
			checkDissection(t, r, map[string]bool{"1": true, "2": true})
			checkFragmented(t, r, capture)
			checkHeartbeats(t, r, capture)
			t.Logf("tshark: %d frames, chunks %v, DATA chunks of fragments by UDP source port %v", r.frames, r.chunks, r.fragments)
		})
	}
}

// usrsctpLoss runs the echo and a DDP Stream Session through
// a link that drops 3 % of the packets each way, duplicates 1 % and
// reorders 2 %: every message arrives once, intact, the ordered ones in
// order. usrsctp's RTO.Min is lowered to 30 ms (its default is 1 s).
func usrsctpLoss(t *testing.T, bin string) {
	peerUDP := freeUDPPort(t)
	capture := newCaptureConn(dialPeerUDP(t, peerUDP))
	lossy := newLossyConn(capture, 7, 0.03, 0.01, 0.02)
	a, p, err := usrsctpAssociate(t, bin, lossy, peerUDP, true, Config{Handshake: HandshakeConfig{RequireDDP: true}}, "-t", "30")
	if err != nil {
		t.Fatalf("associating with usrsctp: %v\n%s", err, p.stderr.String())
	}
	start := time.Now()
	echoExchange(t, a, 150, 8<<10, 4, 30*time.Second)
	ddpSessions(t, a, []uint16{4, 5}, 20, 20*time.Second)
	t.Logf("echo and DDP Stream Sessions: %v", time.Since(start))
	// The SHUTDOWN runs on a clean link: were the last SHUTDOWN
	// COMPLETE lost, usrsctp would resend its SHUTDOWN ACK to a closed
	// socket and end in an ABORT of its own, whatever this side did.
	lossy.stop()
	start = time.Now()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	p.wait(t, 10*time.Second)
	t.Logf("Close and usrsctp's exit: %v", time.Since(start))
	dropped, duped, swapped := lossy.impaired()
	t.Logf("the link dropped %d packets, duplicated %d, reordered %d", dropped, duped, swapped)
	if dropped == 0 || duped == 0 || swapped == 0 {
		t.Errorf("the link dropped %d packets, duplicated %d, reordered %d: the run was not impaired", dropped, duped, swapped)
	}
	r := dissect(t, capture.writePcap(t, t.TempDir()), uint16(peerUDP))
	checkDissection(t, r, map[string]bool{"1": true, "2": true})
}

// usrsctpAbort ends an association with an ABORT each way (RFC 9260
// §9.1): usrsctp's, whose User-Initiated Abort cause (§3.3.10.12) carries
// the reason this side asked for, ends this side's with an AbortError;
// this side's Abort ends usrsctp's with ECONNRESET.
func usrsctpAbort(t *testing.T, bin string) {
	cfg := Config{Handshake: HandshakeConfig{RequireDDP: true}}
	t.Run("usrsctp aborts", func(t *testing.T) {
		peerUDP := freeUDPPort(t)
		a, p, err := usrsctpAssociate(t, bin, dialPeerUDP(t, peerUDP), peerUDP, true, cfg)
		if err != nil {
			t.Fatalf("associating with usrsctp: %v\n%s", err, p.stderr.String())
		}
		reason := []byte("the interop test asks for an ABORT")
		if err := a.SendMessage(1, 0x0a0b0000, false, [][]byte{reason}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("usrsctp's ABORT did not end the association")
		}
		var ab *AbortError
		if err := a.Err(); !errors.As(err, &ab) || !ab.Remote || ab.Cause != chunk.CauseUserInitiatedAbort || !bytes.Equal(ab.Info, reason) {
			t.Fatalf("after usrsctp's ABORT: %v (%+v), want the peer's User-Initiated Abort with our reason", err, ab)
		}
		if _, err := p.out.waitLine("aborted", 5*time.Second); err != nil {
			t.Error(err)
		}
		p.wait(t, 10*time.Second)
	})
	t.Run("ours aborts", func(t *testing.T) {
		peerUDP := freeUDPPort(t)
		a, p, err := usrsctpAssociate(t, bin, dialPeerUDP(t, peerUDP), peerUDP, true, cfg)
		if err != nil {
			t.Fatalf("associating with usrsctp: %v\n%s", err, p.stderr.String())
		}
		echoExchange(t, a, 10, 1<<10, 2, 10*time.Second)
		a.Abort()
		select {
		case err := <-p.exited:
			if err == nil || !bytes.Contains(p.stderr.Bytes(), []byte("recv: Connection reset by peer")) {
				t.Fatalf("usrsctp after our ABORT: %v, %q; want its recv reset", err, p.stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("our ABORT did not end usrsctp's association")
		}
	})
}

// usrsctpRequireDDP checks RFC 5043 §11.1 against usrsctp: a
// usrsctp server that sends no Adaptation Layer Indication is refused by
// this package's client with an ABORT, and a usrsctp client whose
// indication is not DDP's (code point 2) by this package's server, whose
// ABORT makes usrsctp's connect fail.
func usrsctpRequireDDP(t *testing.T, bin string) {
	cfg := Config{Handshake: HandshakeConfig{RequireDDP: true}}
	t.Run("usrsctp server without indication", func(t *testing.T) {
		peerUDP := freeUDPPort(t)
		a, p, err := usrsctpAssociate(t, bin, dialPeerUDP(t, peerUDP), peerUDP, true, cfg, "-a", "none")
		if err == nil {
			a.Abort()
			t.Fatal("associated with a peer without DDP's Adaptation Layer Indication")
		}
		if !errors.Is(err, ErrPeerAdaptation) {
			t.Fatalf("Client: %v, want ErrPeerAdaptation\n%s", err, p.stderr.String())
		}
	})
	t.Run("usrsctp client with code point 2", func(t *testing.T) {
		peerUDP := freeUDPPort(t)
		cfg := cfg
		cfg.HandshakeTimeout = 1500 * time.Millisecond
		a, p, err := usrsctpAssociate(t, bin, dialPeerUDP(t, peerUDP), peerUDP, false, cfg, "-a", "2")
		if err == nil {
			a.Abort()
			t.Fatal("associated with a peer whose Adaptation Layer Indication is not DDP's")
		}
		select {
		case err := <-p.exited:
			if err == nil || !bytes.Contains(p.stderr.Bytes(), []byte("connect:")) {
				t.Fatalf("usrsctp: %v, %q; want its connect refused", err, p.stderr.String())
			}
			t.Logf("usrsctp: %s", bytes.TrimSpace(p.stderr.Bytes()))
		case <-time.After(10 * time.Second):
			t.Fatal("usrsctp's connect did not fail")
		}
	})
}
