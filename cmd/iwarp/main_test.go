package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// binary is the iwarp command built once for the package's tests, which
// drive it as a user would.
var iwarpBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "iwarp-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	iwarpBin = filepath.Join(dir, "iwarp")
	out, err := exec.Command("go", "build", "-o", iwarpBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building iwarp: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runIwarp runs the binary to completion and returns stdout, stderr and
// the exit status.
func runIwarp(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, iwarpBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// server is a running "iwarp serve --json".
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	fp     string
	events chan map[string]any
	stderr *bytes.Buffer
	done   chan struct{}
}

func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	cmd := exec.Command(iwarpBin, append([]string{"serve", "--json", "--advertise-send"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, events: make(chan map[string]any, 1024), stderr: new(bytes.Buffer), done: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("serve printed a line that is not JSON: %q", sc.Text())
				continue
			}
			s.events <- m
		}
		close(s.events)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
		cmd.Wait()
	})
	ev := s.next("listening")
	s.url = ev["url"].(string)
	if fp, ok := ev["fingerprint"].(string); ok {
		s.fp = fp
	}
	return s
}

// nextOf returns the next event, whose kind must be one of kinds.
func (s *server) nextOf(kinds ...string) map[string]any {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatalf("serve ended waiting for %q; stderr: %s", kinds, s.stderr)
		}
		for _, k := range kinds {
			if ev["event"] == k {
				return ev
			}
		}
		s.t.Fatalf("event %v, want one of %q", ev, kinds)
	case <-time.After(15 * time.Second):
		s.t.Fatalf("no %q event; stderr: %s", kinds, s.stderr)
	}
	return nil
}

// next returns the next event, which must be of kind kind.
func (s *server) next(kind string) map[string]any {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatalf("serve ended waiting for %q; stderr: %s", kind, s.stderr)
		}
		if ev["event"] != kind {
			s.t.Fatalf("event %v, want %q", ev, kind)
		}
		return ev
	case <-time.After(15 * time.Second):
		s.t.Fatalf("no %q event; stderr: %s", kind, s.stderr)
	}
	return nil
}

// stop sends SIGINT and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		// SIGQUIT makes serve print its goroutines and exit; Wait
		// returns once they are all in s.stderr.
		s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
		}
		s.cmd.Wait()
		s.t.Fatalf("serve did not stop on SIGINT: %s", s.stderr)
	}
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("serve exited with %v; stderr: %s", err, s.stderr)
	}
}

// client is an in-process iWARP client of a served region.
type client struct {
	t        *testing.T
	dev      *rdmap.Device
	pd       *rdmap.ProtectionDomain
	scq, rcq *rdmap.CompletionQueue
	qp       *rdmap.QueuePair
	c        *endpoint.Conn
	stag     uint32
	to       uint64
	length   uint32
}

func dialServer(t *testing.T, url string, link endpoint.Flags) *client {
	t.Helper()
	ep, err := endpoint.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	cl, adv := newClient(t)
	cl.c, err = endpoint.Dial(context.Background(), ep, &link, nil, cl.qp, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cl.advertised(adv)
	return cl
}

// dialServerFrom connects to a tcp:// serve from the local IP address
// from.
func dialServerFrom(t *testing.T, from, url string) *client {
	t.Helper()
	cl, adv := newClient(t)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	mc, err := mpa.Client(context.Background(), nc, cl.qp, nil)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	cl.c = &endpoint.Conn{Info: endpoint.MPAInfo(mc, nc.RemoteAddr()), QP: cl.qp}
	cl.advertised(adv)
	return cl
}

func newClient(t *testing.T) (*client, *rdmap.MemoryRegion) {
	cl := &client{t: t, dev: rdmap.NewDevice(rdmap.DeviceConfig{})}
	cl.pd = cl.dev.NewProtectionDomain()
	cl.scq, cl.rcq = cl.dev.NewCompletionQueue(256), cl.dev.NewCompletionQueue(256)
	var err error
	cl.qp, err = cl.pd.NewQueuePair(rdmap.QPConfig{SendCQ: cl.scq, RecvCQ: cl.rcq})
	if err != nil {
		t.Fatal(err)
	}
	adv := cl.reg(make([]byte, 64))
	cl.qp.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: adv, Length: 64}}})
	return cl, adv
}

// write RDMA Writes data at offset off of the served region and waits
// for its completion.
func (cl *client) write(t *testing.T, off uint64, data []byte) {
	t.Helper()
	if err := cl.qp.PostWrite(rdmap.WriteWR{ID: 9, SGL: []rdmap.SGE{{MR: cl.reg(data), Length: uint32(len(data))}}, RemoteSTag: cl.stag, RemoteTO: cl.to + off}); err != nil {
		t.Fatal(err)
	}
	cl.wait(cl.scq)
}

// advertised waits for serve's advertisement of its region in adv.
func (cl *client) advertised(adv *rdmap.MemoryRegion) {
	t := cl.t
	t.Cleanup(cl.close)
	cp := cl.wait(cl.rcq)
	if cp.ByteLen != 16 {
		t.Fatalf("advertisement of %d bytes, want 16", cp.ByteLen)
	}
	rb, _, err := rdmap.ParseRemoteBuffer(adv.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	cl.stag, cl.to, cl.length = rb.STag, rb.TO, rb.Len
}

func (cl *client) reg(b []byte) *rdmap.MemoryRegion {
	mr, err := cl.pd.RegisterMemory(b, 0, rdmap.LocalWrite)
	if err != nil {
		cl.t.Fatal(err)
	}
	return mr
}

func (cl *client) wait(cq *rdmap.CompletionQueue) rdmap.Completion {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cp, err := cq.Wait(ctx)
	if err != nil {
		cl.t.Fatalf("no completion: %v (qp: %v)", err, cl.qp.Err())
	}
	if cp.Status != rdmap.StatusSuccess {
		cl.t.Fatalf("completion %v: %v", cp.Status, cp.Err)
	}
	return cp
}

func (cl *client) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cl.c.Close(ctx)
}

func wantField(t *testing.T, ev map[string]any, key string, want any) {
	t.Helper()
	got := ev[key]
	if f, ok := got.(float64); ok {
		switch w := want.(type) {
		case int:
			want = float64(w)
		case uint32:
			want = float64(w)
		case uint64:
			want = float64(w)
		}
		got = f
	}
	if got != want {
		t.Errorf("%s event: %s = %v (%T), want %v", ev["event"], key, ev[key], ev[key], want)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
