//go:build !js

package demo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/demo"
	wpeer "github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/web"
)

// startDemo runs the demo's server in the test, on a loopback port, and
// returns its URL.
func startDemo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	assets, err := web.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	s := demo.New(demo.Config{Assets: assets, Addr: ln.Addr()})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("demo: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func dialLabPage(t *testing.T, ctx context.Context, url string, o demo.PageOptions) *demo.Page {
	t.Helper()
	p, err := demo.DialPage(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// waitGo waits for the Go peer's events until ok holds.
func waitGo(t *testing.T, ctx context.Context, p *demo.Page, what string, ok func(wpeer.Event) bool) {
	t.Helper()
	if err := p.WaitEvents(ctx, ok); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// refusedOnceInvalid waits until the page sees the Go peer's memory mem
// invalid after what, then Writes to it and waits for the Terminate that
// refuses the Write: Invalid Steering Tag.
func refusedOnceInvalid(t *testing.T, ctx context.Context, p *demo.Page, mem *wpeer.Region, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Region("Go peer memory").Valid {
		if time.Now().After(deadline) {
			t.Fatalf("the Go peer's memory is still valid after %s", what)
		}
		p.Wait(ctx, func(m demo.Message) bool { return m.Regions != nil })
	}
	if _, err := p.Peers[0].Write([]byte("too late"), mem.STag, mem.Base); err != nil {
		t.Fatal(err)
	}
	waitGo(t, ctx, p, "the Write after "+what, func(e wpeer.Event) bool {
		return e.Kind == "terminate" && strings.Contains(e.CodeName, "Invalid Steering Tag")
	})
}

// waitRegions waits for the Go peer's regions until ok holds.
func waitRegions(t *testing.T, ctx context.Context, p *demo.Page, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		if _, err := p.Wait(ctx, func(m demo.Message) bool { return m.Regions != nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// waitWindow waits until the Go peer lists a memory window that ok
// accepts, and returns it.
func waitWindow(t *testing.T, ctx context.Context, p *demo.Page, what string, ok func(wpeer.Region) bool) wpeer.Region {
	t.Helper()
	var win wpeer.Region
	waitRegions(t, ctx, p, what, func() bool {
		for _, r := range p.Regions() {
			if r.Window && ok(r) {
				win = r
				return true
			}
		}
		return false
	})
	return win
}

// labText is what the page's "Write 1,000 octets" writes.
func labText(n int) []byte {
	var b []byte
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "[%03d direct data placement] ", i)
	}
	return b[:n]
}

// TestLabDemoObservations checks what labs 1 to 3 tell students to
// expect in the browser, with the page played by Go over the same server
// and transports (demo.Page): the browser test (cmd/iwarp
// TestDemoInBrowser) checks the page itself.
func TestLabDemoObservations(t *testing.T) {
	if testing.Short() {
		t.Skip("real sessions over WebRTC and MPA; not with -short")
	}
	url := startDemo(t)
	t.Run("lab1", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 64})
		mem := p.Region("Go peer memory")
		if mem == nil || mem.Len != 1024 {
			t.Fatalf("the Go peer's memory: %+v", mem)
		}
		q := p.Peers[0]
		// Step 2: a Write lands at offset 16 in segments of at most 50
		// octets, and the Go peer completes nothing.
		if _, err := q.Write([]byte("hello, placement"), mem.STag, mem.Base+16); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Write", func(e wpeer.Event) bool {
			if e.Kind == "completion" {
				t.Errorf("the Go peer completed %s for an RDMA Write", e.Op)
			}
			if e.Kind == "segment-placed" && (e.Len > 50 || !e.Tagged) {
				t.Errorf("segment %+v", e)
			}
			return e.Kind == "message-delivered" && e.Tagged
		})
		if r := p.Region("Go peer memory"); string(r.Data[16:32]) != "hello, placement" {
			t.Errorf("offset 16: %q", r.Data[16:32])
		}
		// Step 3: the Send lands in receive buffer MSN 1, a RECV of 8.
		if _, err := q.Send([]byte("untagged"), false, 0); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Send", func(e wpeer.Event) bool {
			if e.Kind == "segment-placed" && (e.Tagged || e.QN != 0 || e.MSN != 1 || e.MO != 0) {
				t.Errorf("the Send's segment %+v", e)
			}
			return e.Kind == "completion" && e.Op == "RECV" && e.Len == 8
		})
		// Step 4: the Go peer decodes a Send with Solicited Event.
		if _, err := q.Send([]byte("SE"), true, 0); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Send with SE", func(e wpeer.Event) bool {
			if e.Kind == "segment-placed" && e.Op != "Send with Solicited Event" {
				t.Errorf("the Go peer placed a %q", e.Op)
			}
			return e.Kind == "segment-placed"
		})
		// Step 5: the Read Request is untagged on queue 1; the Response
		// tagged, to the page's sink.
		sink := q.Regions()[0]
		if _, err := q.Read(16, mem.STag, mem.Base+16, sink.STag, 0); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Read Request", func(e wpeer.Event) bool {
			return e.Kind == "segment-placed" && !e.Tagged && e.QN == 1 && e.Op == "RDMA Read Request"
		})
		waitfor.True(t, 10*time.Second, func() bool { return string(q.Regions()[0].Data[:16]) == "hello, placement" },
			"the Read sink: %q", q.Regions()[0].Data[:16])
		// Step 6: a Send with no buffer left terminates the stream.
		if _, err := q.Send([]byte("one too many"), false, 0); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Terminate", func(e wpeer.Event) bool {
			return e.Kind == "terminate" && strings.Contains(e.CodeName, "no buffer available")
		})
	})
	t.Run("lab2", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		text := labText(1000)
		// The data channel at 48 octets: 30 segments, 29 of 34 and one of 14.
		p := dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 48})
		mem := p.Region("Go peer memory")
		if _, err := p.Peers[0].Write(text, mem.STag, mem.Base); err != nil {
			t.Fatal(err)
		}
		var lens []uint32
		waitGo(t, ctx, p, "the Write", func(e wpeer.Event) bool {
			if e.Kind == "segment-placed" {
				lens = append(lens, e.Len)
			}
			return e.Kind == "message-delivered"
		})
		n34 := 0
		for _, l := range lens {
			if l == 34 {
				n34++
			}
		}
		if len(lens) != 30 || n34 != 29 {
			t.Errorf("segments of %v", lens)
		}
		// MPA with Markers: segments of 128 octets, FPDUs of 136 (plus
		// 4 per Marker), a Marker at every multiple of 512.
		m := dialLabPage(t, ctx, url, demo.PageOptions{MPA: true, Markers: true, MULPDU: 48})
		mem = m.Region("Go peer memory")
		if _, err := m.Peers[0].Write(text, mem.STag, mem.Base); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, m, "the Write over MPA", func(e wpeer.Event) bool { return e.Kind == "message-delivered" && e.Len == 1000 })
		var full, last, markers int
		for _, e := range m.FPDUs() {
			if e.Kind != "fpdu" || !e.Out || e.Op != "RDMA Write" || e.Len == 0 {
				continue
			}
			switch {
			case e.ULPDU == 128 && e.Pad == 2 && e.Wire == 136+4*len(e.Markers) && e.Len == 114:
				full++
			case e.ULPDU == 102 && e.Pad == 0 && e.Wire == 108+4*len(e.Markers) && e.Len == 88:
				last++
			default:
				t.Errorf("FPDU %+v", e)
			}
			for _, k := range e.Markers {
				if (e.Pos+uint64(k))%512 != 0 {
					t.Errorf("a Marker at %d+%d", e.Pos, k)
				}
			}
			markers += len(e.Markers)
		}
		if full != 8 || last != 1 || markers < 1 {
			t.Errorf("%d full FPDUs, %d last, %d Markers: want 8, 1, 1+", full, last, markers)
		}
		// The rows the lab quotes: the RTR first, behind the Marker at
		// position 0; FPDU #3 @296 at TO 0x10e4; Markers in #4 and #8.
		checkLab2Rows(t, m.FPDUs(), []lab2Row{
			{seq: 0, pos: 0, wire: 24, ulpdu: 14, len: 0, markers: []int{0}},
			{seq: 3, pos: 296, wire: 136, ulpdu: 128, len: 114, to: 0x10e4},
			{seq: 4, pos: 432, wire: 140, ulpdu: 128, len: 114, markers: []int{80}},
			{seq: 8, pos: 980, wire: 140, ulpdu: 128, len: 114, markers: []int{44}},
			{seq: 9, pos: 1120, wire: 108, ulpdu: 102, len: 88},
		})
		// Without Markers: the RTR is 20 octets and #3 is @292.
		nm := dialLabPage(t, ctx, url, demo.PageOptions{MPA: true, MULPDU: 48})
		mem = nm.Region("Go peer memory")
		if _, err := nm.Peers[0].Write(text, mem.STag, mem.Base); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, nm, "the Write over MPA without Markers", func(e wpeer.Event) bool { return e.Kind == "message-delivered" && e.Len == 1000 })
		checkLab2Rows(t, nm.FPDUs(), []lab2Row{
			{seq: 0, pos: 0, wire: 20, ulpdu: 14, len: 0},
			{seq: 3, pos: 292, wire: 136, ulpdu: 128, len: 114, to: 0x10e4},
		})
	})
	t.Run("lab10", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Step 5: a Send with Invalidate for the Go peer's memory
		// invalidates it; a Write to it then terminates the stream.
		p := dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 64})
		mem := p.Region("Go peer memory")
		if _, err := p.Peers[0].Send([]byte("done"), false, mem.STag); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Send with Invalidate", func(e wpeer.Event) bool {
			return e.Kind == "completion" && e.Op == "RECV"
		})
		refusedOnceInvalid(t, ctx, p, mem, "the Send with Invalidate")
		p.Close()
		// The Go peer's own Invalidate button: a Local Invalidate.
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 64})
		mem = p.Region("Go peer memory")
		if err := p.Send(ctx, demo.Message{Type: "go", Op: "invalidate", STag: mem.STag}); err != nil {
			t.Fatal(err)
		}
		refusedOnceInvalid(t, ctx, p, mem, "its Invalidate")
		p.Close()
		// The window: bound over 16 octets of the Go peer's memory from
		// offset 16, remote write, to the page's queue pair.
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 64})
		mem = p.Region("Go peer memory")
		if err := p.Send(ctx, demo.Message{Type: "go", Op: "bind", STag: mem.STag, Offset: 16, Len: 16, Access: "w"}); err != nil {
			t.Fatal(err)
		}
		win := waitWindow(t, ctx, p, "the bind", func(w wpeer.Region) bool { return w.Valid })
		if win.Name != "window on Go peer memory" || win.Base != mem.Base+16 || win.Len != 16 || win.Access != "remote write" || win.Parent != mem.STag {
			t.Fatalf("the window: %+v", win)
		}
		q := p.Peers[0]
		if _, err := q.Write([]byte("through a window"), win.STag, win.Base); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Write through the window", func(e wpeer.Event) bool {
			if e.Kind == "segment-placed" && (e.STag != win.STag || e.Region != mem.STag || e.Offset != e.TO-mem.Base) {
				t.Errorf("placement %+v: want it in the Go peer's memory at TO - its base", e)
			}
			return e.Kind == "message-delivered" && e.Tagged
		})
		waitRegions(t, ctx, p, "the Write through the window", func() bool {
			return string(p.Region("Go peer memory").Data[16:32]) == "through a window"
		})
		if r := p.Region("Go peer memory"); string(r.Data[:16]) != string(make([]byte, 16)) {
			t.Errorf("the Go peer's memory before the window: %q", r.Data[:16])
		}
		// Send with Invalidate for the window: the window is invalid,
		// the region is not, and a Write to the region is placed.
		if _, err := q.Send([]byte("done"), false, win.STag); err != nil {
			t.Fatal(err)
		}
		waitWindow(t, ctx, p, "the Send with Invalidate for the window", func(w wpeer.Region) bool { return !w.Valid })
		if !p.Region("Go peer memory").Valid {
			t.Fatal("the Send with Invalidate for the window invalidated the Go peer's memory")
		}
		if _, err := q.Write([]byte("region"), mem.STag, mem.Base); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Write to the region", func(e wpeer.Event) bool {
			return e.Kind == "message-delivered" && e.Tagged && e.STag == mem.STag
		})
		// A Write through the invalid window is refused.
		if _, err := q.Write([]byte("too late"), win.STag, win.Base); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Write through the invalid window", func(e wpeer.Event) bool {
			return e.Kind == "terminate" && strings.Contains(e.CodeName, "Invalid Steering Tag")
		})
		if r := p.Region("Go peer memory"); !r.Valid || string(r.Data[:6]) != "region" {
			t.Errorf("the Go peer's memory after the refused Write: valid %v, %q", r.Valid, r.Data[:6])
		}
		p.Close()
		// The Go peer's Invalidate button on the window: a Local
		// Invalidate of the window alone.
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 64})
		mem = p.Region("Go peer memory")
		if err := p.Send(ctx, demo.Message{Type: "go", Op: "bind", STag: mem.STag, Offset: 16, Len: 16, Access: "w"}); err != nil {
			t.Fatal(err)
		}
		win = waitWindow(t, ctx, p, "the bind", func(w wpeer.Region) bool { return w.Valid })
		if err := p.Send(ctx, demo.Message{Type: "go", Op: "invalidate", STag: win.STag}); err != nil {
			t.Fatal(err)
		}
		waitWindow(t, ctx, p, "the window's Invalidate", func(w wpeer.Region) bool { return !w.Valid })
		if !p.Region("Go peer memory").Valid {
			t.Fatal("invalidating the window invalidated the Go peer's memory")
		}
		if _, err := p.Peers[0].Write([]byte("too late"), win.STag, win.Base); err != nil {
			t.Fatal(err)
		}
		waitGo(t, ctx, p, "the Write after the window's Invalidate", func(e wpeer.Event) bool {
			return e.Kind == "terminate" && strings.Contains(e.CodeName, "Invalid Steering Tag")
		})
	})
	t.Run("lab3", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
		defer cancel()
		text := labText(1000)
		reorder := &demo.Impairment{Preset: "reordering path"}
		// overtaking writes the text up to tries times and returns how
		// many of the Go peer's placements came before an earlier
		// segment, checking the memory each time.
		overtaking := func(p *demo.Page, tries int) int {
			mem := p.Region("Go peer memory")
			over, floor := 0, uint32(0)
			placed := map[uint32]bool{}
			for i := 0; i < tries && over == 0; i++ {
				if _, err := p.Peers[0].Write(text, mem.STag, mem.Base); err != nil {
					t.Fatal(err)
				}
				waitGo(t, ctx, p, "the Write", func(e wpeer.Event) bool {
					if e.Kind == "segment-placed" {
						if e.Seq > floor {
							over++
						}
						placed[e.Seq] = true
						for placed[floor] {
							delete(placed, floor)
							floor++
						}
					}
					return e.Kind == "message-delivered" && e.Len == 1000
				})
				deadline := time.Now().Add(5 * time.Second)
				for r := p.Region("Go peer memory"); !bytes.Equal(r.Data[:1000], text); r = p.Region("Go peer memory") {
					if time.Now().After(deadline) {
						t.Fatalf("the Go peer's memory is not the text written")
					}
					if _, err := p.Wait(ctx, func(m demo.Message) bool { return m.Regions != nil }); err != nil {
						t.Fatal(err)
					}
				}
			}
			return over
		}
		// Step 3: unordered, on the reordering path: segments overtake.
		p := dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 48, Impair: reorder})
		if n := overtaking(p, 10); n == 0 {
			t.Error("unordered on the reordering path: no segment overtook another")
		}
		p.Close()
		// Step 4: the bad path with the Loss slider at 20 %: a Write meets
		// a retransmission pause, and unordered, later segments are
		// placed before it ends. SCTP bundles a Write's small segments
		// into a few packets, so a pause has later segments to show only
		// when a packet before the last is lost: up to 50 Writes, as many
		// as that takes.
		lossy := &demo.Impairment{Loss: lab3Loss, Delay: 10, Jitter: 40}
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 48, Impair: &demo.Impairment{Preset: "bad path"}})
		setImpair(t, ctx, p, lossy)
		if pause, hole, _ := lossPauses(t, ctx, p, 50, true); !pause || !hole {
			t.Errorf("unordered at %v %% loss: a pause %v, with later segments placed during it %v", lab3Loss, pause, hole)
		}
		p.Close()
		// Step 5: ordered, on the same lossy path: the pause holds every
		// later segment back, and none overtakes. A loss shows as a pause
		// between placements only after a Write's first placement: up to
		// 50 Writes, as many as that takes.
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 48, Impair: &demo.Impairment{Preset: "bad path"}, Ordered: true})
		setImpair(t, ctx, p, lossy)
		if pause, hole, over := lossPauses(t, ctx, p, 50, false); !pause || hole || over != 0 {
			t.Errorf("ordered at %v %% loss: a pause %v, segments placed during it %v, %d overtook", lab3Loss, pause, hole, over)
		}
		p.Close()
		// Step 8: MPA over TCP: none does.
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 48, Impair: reorder, MPA: true})
		if n := overtaking(p, 3); n != 0 {
			t.Errorf("MPA: %d segments overtook", n)
		}
		p.Close()
		// Step 6: stream 1 held, stream 3 goes on.
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 64, Streams: 2})
		if err := p.Send(ctx, demo.Message{Type: "go", Op: "hold", QP: 0, MS: 1500}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx, func(m demo.Message) bool { return m.Type == "go-log" && strings.Contains(m.Text, "not reading") }); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var delivered [2]int
		var held [2]int
		for i := 0; time.Since(start) < 1200*time.Millisecond; i++ {
			for qp, name := range []string{"Go peer memory", "Go peer memory, stream 3"} {
				r := p.Region(name)
				if _, err := p.Peers[qp].Write([]byte(fmt.Sprintf("%04d", i)), r.STag, r.Base+uint64(i*4%1000)); err != nil {
					t.Fatal(err)
				}
			}
			wctx, wcancel := context.WithTimeout(ctx, 40*time.Millisecond)
			p.WaitEvents(wctx, func(e wpeer.Event) bool {
				if e.Kind == "message-delivered" {
					delivered[e.QP]++
					if time.Since(start) < 1200*time.Millisecond {
						held[e.QP]++
					}
				}
				return false
			})
			wcancel()
		}
		if held[0] != 0 || held[1] < 10 {
			t.Errorf("while stream 1 was held: %d of its messages delivered, %d of stream 3's", held[0], held[1])
		}
		waitGo(t, ctx, p, "stream 1 catching up", func(e wpeer.Event) bool {
			if e.Kind == "message-delivered" {
				delivered[e.QP]++
			}
			return delivered[0] >= delivered[1]
		})
		p.Close()
		// Step 7: ordered, two streams, the bad path: a loss pauses one
		// stream's deliveries while the other's go on, each way. Without
		// a loss two deliveries of a stream are at most the Writes'
		// period, the path's jitter (60 ms) and the Go peer's event
		// batching apart, 40 + 60 + 40 = 140 ms: the bad path with its
		// loss at 0 shows no gap of lab3Pause in a minute.
		p = dialLabPage(t, ctx, url, demo.PageOptions{MULPDU: 64, Streams: 2, Ordered: true, Impair: &demo.Impairment{Preset: "bad path"}})
		start = time.Now()
		longest, all := steadyPauses(t, ctx, p, 60*time.Second)
		for q, pa := range longest {
			if pa.gap < lab3Pause || pa.other < lab3Others {
				t.Errorf("ordered on the bad path: no pause of stream %d's deliveries of %v or more while stream %d delivered on %d event batches "+
					"(its pauses: %v)", 1+2*q, lab3Pause, 3-2*q, lab3Others, all[q])
			}
		}
		t.Logf("in %v: stream 1's longest pause while stream 3 delivered %v; stream 3's while stream 1 did %v; all pauses %v",
			time.Since(start).Round(time.Second), longest[0], longest[1], all)
	})
}

// lab2Row is what lab 2 says one FPDU row of the ladder shows.
type lab2Row struct {
	seq         uint32
	pos         uint64
	wire, ulpdu int
	len         uint32
	to          uint64 // 0: not quoted
	markers     []int
}

// checkLab2Rows checks the page's outgoing FPDUs: ten in all (the RTR and
// the Write's nine), and the rows lab 2 quotes.
func checkLab2Rows(t *testing.T, events []wpeer.Event, want []lab2Row) {
	t.Helper()
	var out []wpeer.Event
	for _, e := range events {
		if e.Kind == "fpdu" && e.Out {
			out = append(out, e)
		}
	}
	if len(out) != 10 {
		t.Errorf("%d FPDUs sent, lab 2 says 10", len(out))
		return
	}
	for _, w := range want {
		e := out[w.seq]
		ok := e.Seq == w.seq && e.Pos == w.pos && e.Wire == w.wire && e.ULPDU == w.ulpdu && e.Len == w.len &&
			e.Op == "RDMA Write" && (w.to == 0 || e.TO == w.to) && fmt.Sprint(e.Markers) == fmt.Sprint(w.markers)
		if !ok {
			t.Errorf("FPDU #%d: %+v, lab 2 says %+v", w.seq, e, w)
		}
	}
}

// lab3Loss is the Loss slider's setting of lab 3 steps 4 and 5.
const lab3Loss = 20

// lab3Pause is the gap between two placements that lab 3 calls a
// retransmission pause: SCTP's retransmission timer starts at 1 s (RFC
// 9260 §16), and a fast retransmission waits for three SACKs.
const lab3Pause = 250 * time.Millisecond

func setImpair(t *testing.T, ctx context.Context, p *demo.Page, im *demo.Impairment) {
	t.Helper()
	if err := p.Send(ctx, demo.Message{Type: "impair", Impair: im}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx, func(m demo.Message) bool { return m.Type == "impair" }); err != nil {
		t.Fatal(err)
	}
}

// lossPauses writes lab 3's 1,000 octets up to tries times, until a
// Write shows a pause of lab3Pause between two placements (and, if
// wantHole, one during which a later segment had been placed before an
// earlier one was: the hole the retransmission fills). It returns
// whether a pause was seen, whether one came with a hole, and how many
// placements overtook an earlier segment.
func lossPauses(t *testing.T, ctx context.Context, p *demo.Page, tries int, wantHole bool) (pause, hole bool, over int) {
	t.Helper()
	text := labText(1000)
	mem := p.Region("Go peer memory")
	floor := uint32(0) // a new page's stream starts at 0
	placed := map[uint32]bool{}
	for i := 0; i < tries && !(pause && (hole || !wantHole)); i++ {
		if _, err := p.Peers[0].Write(text, mem.STag, mem.Base); err != nil {
			t.Fatal(err)
		}
		last := time.Time{}
		waitGo(t, ctx, p, "the Write on the lossy path", func(e wpeer.Event) bool {
			if e.Kind == "segment-placed" {
				now := time.Now()
				if !last.IsZero() && now.Sub(last) >= lab3Pause {
					pause = true
					hole = hole || len(placed) > 0
				}
				last = now
				if e.Seq > floor {
					over++
				}
				placed[e.Seq] = true
				for placed[floor] {
					delete(placed, floor)
					floor++
				}
			}
			return e.Kind == "message-delivered" && e.Len == 1000
		})
	}
	return pause, hole, over
}

// lab3Steady is the period of the page's steady Writes: one Write every
// 40 ms on each stream (app.js startSteady).
const lab3Steady = 40 * time.Millisecond

// lab3Others is on how many of the Go peer's event batches (one every
// 40 ms) the other stream must deliver during a pause of one stream for
// lab 3 step 7 to call it a pause of that stream alone: at 25 Writes a
// second the other stream delivers on about six batches in 250 ms, and
// three means it went on delivering, not once in a burst that ends a
// pause of its own.
const lab3Others = 3

// streamPause is a pause of one stream's deliveries at the Go peer:
// how long, and on how many event batches the other stream delivered
// meanwhile.
type streamPause struct {
	gap   time.Duration
	other int
}

func (p streamPause) String() string {
	return fmt.Sprintf("%v (other %d)", p.gap.Round(time.Millisecond), p.other)
}

// steadyPauses makes the page's steady Writes on both streams, until
// each stream has shown a pause of at least lab3Pause between two
// deliveries during which the other delivered on at least lab3Others
// event batches, or for at most d. It returns each stream's longest
// such pause (zero if none) and every pause of lab3Pause or more.
//
// Stream 3's Write goes half a period after stream 1's. pion's SCTP
// bundles the DATA chunks queued together into one packet, and the loss
// of a packet that carries both streams' chunks pauses both at once; the
// browsers' SCTP sends each data channel message as the page sends it,
// and their pauses come mostly one stream at a time.
func steadyPauses(t *testing.T, ctx context.Context, p *demo.Page, d time.Duration) (longest [2]streamPause, all [2][]streamPause) {
	t.Helper()
	var regs [2]*wpeer.Region
	for q, name := range []string{"Go peer memory", "Go peer memory, stream 3"} {
		if regs[q] = p.Region(name); regs[q] == nil {
			t.Fatalf("no %q", name)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(lab3Steady)
		defer tick.Stop()
		for n := 0; ; n++ {
			for q, r := range regs {
				if q == 1 {
					select {
					case <-wctx.Done():
						return
					case <-time.After(lab3Steady / 2):
					}
				}
				off := uint64(n*8) % uint64(r.Len-8)
				if _, err := p.Peers[q].Write(fmt.Appendf(nil, "s%d#%04d ", 1+2*q, n%10000), r.STag, r.Base+off); err != nil {
					t.Errorf("stream %d: %v", 1+2*q, err)
					return
				}
			}
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	// last is when each stream last delivered; other counts the batches
	// since then on which the other stream delivered.
	var last [2]time.Time
	var other [2]int
	p.Wait(wctx, func(m demo.Message) bool {
		now := time.Now()
		var in [2]bool
		for _, e := range m.Events {
			if e.Kind == "message-delivered" && e.QP < 2 {
				in[e.QP] = true
			}
		}
		for q := range in {
			if in[q] && !last[q].IsZero() && now.Sub(last[q]) >= lab3Pause {
				pa := streamPause{now.Sub(last[q]), other[q]}
				all[q] = append(all[q], pa)
				if pa.other >= lab3Others && pa.gap > longest[q].gap {
					longest[q] = pa
				}
			}
		}
		for q := range in {
			switch {
			case in[q]:
				last[q], other[q] = now, 0
			case in[1-q]:
				other[q]++
			}
		}
		return longest[0].gap > 0 && longest[1].gap > 0
	})
	cancel()
	<-done
	return longest, all
}
