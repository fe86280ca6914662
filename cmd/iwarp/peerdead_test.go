package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/internal/udprelay"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// relayURL is the sctp:// URL of r.
func relayURL(r *udprelay.Relay) string { return "sctp://" + r.Addr().String() }

// cmdProc is a running iwarp command whose stdout and stderr lines are read.
type cmdProc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	all   strings.Builder
}

func startCmd(t *testing.T, args ...string) *cmdProc {
	t.Helper()
	p := &cmdProc{cmd: exec.Command(iwarpBin, args...), lines: make(chan string, 4096)}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); pw.Close() }()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.all.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		close(p.lines)
	}()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

// waitFor returns the first submatch of the next line matching re.
func (p *cmdProc) waitFor(t *testing.T, re string, within time.Duration) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.mu.Lock()
				defer p.mu.Unlock()
				t.Fatalf("%v exited before printing %q:\n%s", p.cmd.Args, re, p.all.String())
			}
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("%v did not print %q within %v:\n%s", p.cmd.Args, re, within, p.all.String())
		}
	}
}

// peerDeadLine is how the commands say a peer vanished: the time, then
// the library's error naming the peer and the silence.
const peerDeadLine = `peer dead at (\d\d:\d\d:\d\d\.\d{3}): .*nothing from \S+`

// perf, serve and rping over sctp:// say "peer dead at TIME" when the
// path to their peer goes silent, within the --dead-peer time.
func TestCommandsReportPeerDead(t *testing.T) {
	t.Run("perf", func(t *testing.T) {
		srv := startCmd(t, "perf", "--listen", "sctp://127.0.0.1:0", "--psk", "k", "--dead-peer", "1s")
		addr := srv.waitFor(t, `listening on sctp://(\S+)`, 20*time.Second)[1]
		r := udprelay.New(t, addr)
		cl := startCmd(t, "perf", "--connect", relayURL(r), "--psk", "k", "--dead-peer", "1s", "--op", "write", "--size", "4096", "--duration", "60s")
		cl.waitFor(t, `Write BW Test`, 20*time.Second)
		awaitTraffic(t, r)
		r.Cut()
		cut := time.Now()
		cl.waitFor(t, peerDeadLine, 5*time.Second)
		srv.waitFor(t, peerDeadLine, 5*time.Second)
		if d := time.Since(cut); d > 4*time.Second {
			t.Fatalf("reported after %v", d)
		}
	})
	t.Run("rping", func(t *testing.T) {
		srv := startCmd(t, "rping", "-s", "-d", "--psk", "k", "--dead-peer", "1s", "sctp://127.0.0.1:0")
		addr := srv.waitFor(t, `listening on sctp://(\S+)`, 20*time.Second)[1]
		r := udprelay.New(t, addr)
		cl := startCmd(t, "rping", "-c", "-d", "--psk", "k", "--dead-peer", "1s", relayURL(r))
		cl.waitFor(t, `connected`, 20*time.Second)
		awaitTraffic(t, r)
		r.Cut()
		cl.waitFor(t, peerDeadLine, 5*time.Second)
		srv.waitFor(t, peerDeadLine, 5*time.Second)
	})
	t.Run("serve", func(t *testing.T) {
		srv := startCmd(t, "serve", "--listen", "sctp://127.0.0.1:0", "--psk", "k", "--dead-peer", "1s")
		addr := srv.waitFor(t, `listening on sctp://(\S+)`, 20*time.Second)[1]
		r := udprelay.New(t, addr)
		dev := rdmap.NewDevice(rdmap.DeviceConfig{})
		cq := dev.NewCompletionQueue(4)
		qp, err := dev.NewProtectionDomain().NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cfg := &sctpddp.Config{PSK: []byte("k"), PSKIdentity: []byte("iwarp"), DeadPeerTimeout: time.Second}
		c, err := iwarp.Dial(ctx, relayURL(r), qp, &iwarp.Config{SCTP: cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		srv.waitFor(t, `conn 1: connected`, 5*time.Second)
		r.Cut()
		srv.waitFor(t, `conn 1: `+peerDeadLine, 5*time.Second)
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the client's stream outlived the silence")
		}
		if err := c.Err(); !errors.Is(err, iwarp.ErrPeerDead) {
			t.Fatalf("the client's stream ended with %v", err)
		}
	})
}

// awaitTraffic waits for the relay to carry the traffic of a session under
// way, so that the cut falls in the middle of it.
func awaitTraffic(t *testing.T, r *udprelay.Relay) {
	t.Helper()
	n := r.Carried()
	waitfor.True(t, 10*time.Second, func() bool { return r.Carried() >= n+20 }, "the relay carried %d datagrams, no traffic", r.Carried()-n)
}
