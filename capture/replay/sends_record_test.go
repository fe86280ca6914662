//go:build !js

package replay

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/term"
)

var updateCaptures = flag.Bool("update", false, "record the bundled captures this package records (web/static/captures/sends-tcp.pcap, windows-tcp.pcap)")

// sendsCapture is the bundled capture of every Send variant.
const sendsCapture = "sends-tcp.pcap"

// TestRecordSends records, over a real MPA/TCP connection on loopback,
// the four Sends of RFC 5040 §4.3 (Send, Send with Solicited Event, Send
// with Invalidate, Send with SE and Invalidate), Immediate Data and
// Immediate Data with SE (RFC 7306 §4), and an RDMA Write to the STag the
// last Send invalidated, which bob answers with a Terminate (DDP Invalid
// STag), and checks that the capture decodes to them in order. With
// -update it writes the bundled capture the demo page replays.
func TestRecordSends(t *testing.T) {
	path := filepath.Join(t.TempDir(), sendsCapture)
	if *updateCaptures {
		path = filepath.Join(captures, sendsCapture)
	}
	recordSends(t, path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := capture.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range recs {
		if r.Op != "" {
			ops = append(ops, r.Op)
		}
	}
	want := []string{"RDMA Write" /* RFC 6581's RTR */, "Send", "Send with Solicited Event", "Send with Invalidate", "Send with Solicited Event and Invalidate",
		"Immediate Data", "Immediate Data with Solicited Event", "RDMA Write", "Terminate"}
	n := len(want)
	if len(ops) != n {
		t.Fatalf("ops %q, want %q", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("ops %q, want %q", ops, want)
		}
	}
}

// recordSends runs the exchange of TestRecordSends, alice recording her
// connection at path.
func recordSends(t *testing.T, path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := capture.NewRecorder(path, capture.TCP)
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := rdmaptest.NewPeer(t, rdmap.QPConfig{}), rdmaptest.NewPeer(t, rdmap.QPConfig{})
	l, err := mpa.Listen(ctx, "tcp4", "127.0.0.1:0", &mpa.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// bob's regions: two that alice's Sends invalidate, and the receive
	// buffers of the Sends and of Immediate Data.
	first := bob.Reg(t, 64, rdmap.RemoteWrite)
	second := bob.Reg(t, 64, rdmap.RemoteWrite)
	recv := bob.Reg(t, 6*32, rdmap.LocalWrite)
	for i := range 6 {
		if err := bob.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: recv, Offset: uint64(32 * i), Length: 32}}}); err != nil {
			t.Fatal(err)
		}
	}
	accepted := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			_, err = r.Accept(bob.QP, nil)
		}
		accepted <- err
	}()
	c, err := mpa.Dial(ctx, "tcp4", l.Addr().String(), alice.QP, &mpa.Config{Trace: rec.MPATrace(false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	src := alice.Reg(t, 32, 0)
	copy(src.Bytes(), "a Send of each kind, then Imm.")
	sends := []rdmap.SendWR{
		{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 6}}},
		{ID: 2, SGL: []rdmap.SGE{{MR: src, Length: 14}}, Solicited: true},
		{ID: 3, SGL: []rdmap.SGE{{MR: src, Length: 20}}, Invalidate: true, InvalidateSTag: first.STag()},
		{ID: 4, SGL: []rdmap.SGE{{MR: src, Length: 26}}, Solicited: true, Invalidate: true, InvalidateSTag: second.STag()},
		{ID: 5, WithImm: true, Imm: 0x0123456789abcdef},
		{ID: 6, WithImm: true, Imm: 0xfedcba9876543210, Solicited: true},
	}
	for _, wr := range sends {
		if err := alice.QP.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		if cp := rdmaptest.Wait(t, bob.RCQ); cp.Status != rdmap.StatusSuccess {
			t.Fatalf("bob's receive of WR %d: %v", wr.ID, cp.Status)
		}
	}
	// second is invalid now: a Write to it is refused with a Terminate.
	if err := alice.QP.PostWrite(rdmap.WriteWR{ID: 7, SGL: []rdmap.SGE{{MR: src, Length: 8}}, RemoteSTag: second.STag(), RemoteTO: second.Base()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-alice.QP.Terminated():
	case <-ctx.Done():
		t.Fatal("no Terminate for a Write to an invalidated STag")
	}
	var te *term.Error
	if err := alice.QP.Err(); !errors.As(err, &te) || !te.Remote || te.Layer != term.LayerDDP {
		t.Fatalf("alice stopped with %v, want bob's DDP Terminate", err)
	}
	c.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
}
