//go:build !js

package replay

import (
	"bytes"
	"context"
	"errors"
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

// windowsCapture is the bundled capture of a memory window and its
// invalidation.
const windowsCapture = "windows-tcp.pcap"

// The exchange of TestRecordWindows: bob's region and the window bound
// over part of it, as lab 10 has them.
const (
	windowsRegionTO  = 0x1000
	windowsRegionLen = 64
	windowsOffset    = 16 // the window's first octet in the region
	windowsLen       = 16
)

// windowsRun is what recordWindows saw, for the checks of the capture.
type windowsRun struct {
	region, window uint32 // STags
	regionBytes    []byte // bob's region at the end
}

// TestRecordWindows records, over a real MPA/TCP connection on loopback,
// lab 10's memory window: bob registers a region of 64 octets at TO
// 0x1000 and binds a window of 16 octets over it from offset 16 (TO
// 0x1010) to his queue pair with alice, a window of a single stream
// (RFC 5041 §8.2; RFC 5042 §2.2.5). alice RDMA Writes through the
// window, then Sends with Invalidate naming the window's STag, which she
// may, since no other stream can use it (RFC 5040 §5.3; RFC 5042
// §6.4.5); she Writes to the region's own STag, still valid, and then to
// the window again, which bob refuses with a Terminate (DDP, Invalid
// STag). The test checks that the capture decodes to those operations in
// order and that the replay places the first Write at the window's TO,
// the region's Write at the region's, and nothing of the Write after the
// invalidation. With -update it writes the bundled capture the demo page
// replays.
func TestRecordWindows(t *testing.T) {
	path := filepath.Join(t.TempDir(), windowsCapture)
	if *updateCaptures {
		path = filepath.Join(captures, windowsCapture)
	}
	run := recordWindows(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := capture.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range recs {
		if r.Op != "" {
			ops = append(ops, r.Op)
		}
	}
	want := []string{"RDMA Write" /* RFC 6581's RTR */, "RDMA Write", "Send with Invalidate", "RDMA Write", "RDMA Write", "Terminate"}
	if len(ops) != len(want) {
		t.Fatalf("ops %q, want %q", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("ops %q, want %q", ops, want)
		}
	}

	m, warn, err := Decode(b)
	if err != nil || warn != "" {
		t.Fatalf("replay: %v %q", err, warn)
	}
	checkModel(t, m)
	var writes []*Event
	var sendInv, terminate *Event
	for i := range m.Events {
		e := &m.Events[i]
		switch {
		case e.Kind != EventSegment || e.RTR:
		case e.Rec.Op == "RDMA Write":
			writes = append(writes, e)
		case e.Rec.Op == "Send with Invalidate":
			sendInv = e
		case e.Rec.Op == "Terminate":
			terminate = e
		}
	}
	if len(writes) != 3 || sendInv == nil || terminate == nil {
		t.Fatalf("%d Writes, Send with Invalidate %v, Terminate %v", len(writes), sendInv != nil, terminate != nil)
	}
	through, toRegion, after := writes[0], writes[1], writes[2]
	// The Send with Invalidate names the window's STag (RFC 5040 §4.7).
	if r := sendInv.Rec.InvSTag; r == nil || *r != run.window {
		t.Errorf("the Send with Invalidate names %v, want the window's STag %#08x", r, run.window)
	}
	// The first Write lands in the window's buffer at the window's TO,
	// and is delivered.
	if through.Buffer == 0 || len(through.Delivered) != 1 {
		t.Fatalf("the Write through the window: buffer %d, delivers %v, why %q", through.Buffer, through.Delivered, through.Why)
	}
	wb := m.Buffers[through.Buffer-1]
	if !wb.Tagged || wb.STag != run.window || wb.Base+through.Offset != windowsRegionTO+windowsOffset {
		t.Errorf("the Write through the window lands in %+v at offset %d, want STag %#08x at TO %#x", wb, through.Offset, run.window, windowsRegionTO+windowsOffset)
	}
	s := m.Snapshot(through.I+1, []int{wb.ID})[0]
	if got, want := string(s.Data), string(run.regionBytes[windowsOffset:windowsOffset+windowsLen]); got != want {
		t.Errorf("the window's buffer shows %q, bob's region there holds %q", got, want)
	}
	// The region's own STag is still valid: that Write lands at the
	// region's TO, in a buffer of its own.
	if toRegion.Buffer == 0 || toRegion.Refused {
		t.Fatalf("the Write to the region: buffer %d, refused %v, why %q", toRegion.Buffer, toRegion.Refused, toRegion.Why)
	}
	if rb := m.Buffers[toRegion.Buffer-1]; rb.STag != run.region || rb.Base+toRegion.Offset != windowsRegionTO || rb.ID == wb.ID {
		t.Errorf("the Write to the region lands in %+v at offset %d, want STag %#08x at TO %#x", rb, toRegion.Offset, run.region, windowsRegionTO)
	}
	// The Write after the invalidation is the one bob's Terminate names:
	// nothing of it is placed (RFC 5041 §7.1).
	if after.Rec.DDP.STag != run.window || !after.Refused || after.Buffer != 0 || len(after.Delivered) != 0 || terminate.Answers != after.I {
		t.Errorf("the Write after the invalidation: STag %#08x, refused %v, buffer %d, delivers %v; the Terminate names %d, want %d",
			after.Rec.DDP.STag, after.Refused, after.Buffer, after.Delivered, terminate.Answers, after.I)
	}
	if th := terminate.Terminated; th == nil || th.Layer != uint8(term.LayerDDP) || th.EType != term.ETypeTaggedBuffer || th.ECode != 0x00 {
		t.Errorf("the Terminate carries %+v, want DDP's Invalid STag (0x1/0x1/0x00)", th)
	}
}

// recordWindows runs the exchange of TestRecordWindows, alice recording
// her connection at path.
func recordWindows(t *testing.T, path string) windowsRun {
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
	region, err := bob.PD.RegisterMemory(make([]byte, windowsRegionLen), windowsRegionTO, rdmap.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	window, err := bob.QP.BindWindow(region, windowsOffset, windowsLen, rdmap.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	recv := bob.Reg(t, 32, rdmap.LocalWrite)
	if err := bob.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: recv, Length: 32}}}); err != nil {
		t.Fatal(err)
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
	src := alice.Reg(t, 64, 0)
	copy(src.Bytes(), "through window!!done with the windowregion STag: ok!")
	// Through the window, at its first octet; then the Send with
	// Invalidate, whose receive completes only once the Write before it
	// is placed (RFC 5040 §5.5).
	if err := alice.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: windowsLen}}, RemoteSTag: window.STag(), RemoteTO: window.Base()}); err != nil {
		t.Fatal(err)
	}
	if err := alice.QP.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: src, Offset: 16, Length: 20}}, Invalidate: true, InvalidateSTag: window.STag()}); err != nil {
		t.Fatal(err)
	}
	cp := rdmaptest.Wait(t, bob.RCQ)
	if cp.Status != rdmap.StatusSuccess || cp.Flags&rdmap.FlagInvalidated == 0 || cp.InvalidatedSTag != window.STag() {
		t.Fatalf("bob's receive of the Send with Invalidate: %+v, want success invalidating %#08x", cp, window.STag())
	}
	// The region's STag is valid still; the window's is not: bob places
	// the first of these two Writes and refuses the second with a
	// Terminate. TCP keeps their order, so the first is placed before
	// alice hears of the Terminate.
	if err := alice.QP.PostWrite(rdmap.WriteWR{ID: 3, SGL: []rdmap.SGE{{MR: src, Offset: 36, Length: 16}}, RemoteSTag: region.STag(), RemoteTO: windowsRegionTO}); err != nil {
		t.Fatal(err)
	}
	if err := alice.QP.PostWrite(rdmap.WriteWR{ID: 4, SGL: []rdmap.SGE{{MR: src, Length: 8}}, RemoteSTag: window.STag(), RemoteTO: window.Base()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-alice.QP.Terminated():
	case <-ctx.Done():
		t.Fatal("no Terminate for a Write to an invalidated window")
	}
	var te *term.Error
	if err := alice.QP.Err(); !errors.Is(err, term.DDPInvalidSTag) || !errors.As(err, &te) || !te.Remote {
		t.Fatalf("alice stopped with %v, want bob's Terminate, DDP Invalid STag", err)
	}
	// bob's queue pair ended with his Terminate, after placing the
	// Writes before it: his region is read after that.
	select {
	case <-bob.QP.Terminated():
	case <-ctx.Done():
		t.Fatal("bob's queue pair did not terminate")
	}
	got := string(region.Bytes())
	if want := "region STag: ok!through window!!" + string(make([]byte, windowsRegionLen-32)); got != want {
		t.Errorf("bob's region %q, want %q", got, want)
	}
	c.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return windowsRun{region: region.STag(), window: window.STag(), regionBytes: []byte(got)}
}
