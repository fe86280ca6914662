package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/wasm/peer"
	"github.com/iwarpgo/iwarp/web"
)

func testAssets(t *testing.T) web.Assets {
	t.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("\x00asm fake"))
	zw.Close()
	return web.Assets{
		"index.html":      []byte("<!doctype html><title>iwarp demo</title>"),
		"app.js":          []byte("// app"),
		web.WasmGzName:    gz.Bytes(),
		web.WasmExecName:  []byte("// go"),
		"style.css":       []byte("body{}"),
		"sub/ignored.txt": []byte("x"),
	}
}

func TestDemoServesAssets(t *testing.T) {
	d := newDemoServer(testAssets(t), io.Discard)
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	get := func(path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		// A bare Transport would ungzip silently; ask for the raw reply.
		tr := &http.Transport{DisableCompression: true}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get("/", nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "iwarp demo") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp = get("/iwarp.wasm", map[string]string{"Accept-Encoding": "gzip, br"})
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Type") != "application/wasm" {
		t.Errorf("GET /iwarp.wasm headers: %v", resp.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := io.ReadAll(zr); string(raw) != "\x00asm fake" {
		t.Errorf("iwarp.wasm unpacks to %q", raw)
	}
	for _, p := range []string{"/iwarp.wasm.gz", "/nope.js", "/sub"} {
		resp = get(p, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
}

func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"--nope"}} {
		var out bytes.Buffer
		err := runDemo(args, &out, &out)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("runDemo(%q) = %v, want a usage error", args, err)
		}
	}
}

// pageSide plays the page against the demo server with native pion: it
// offers the DDP data channel, runs an rdmap queue pair over it, and
// collects what the Go peer reports over signaling.
type pageSide struct {
	t    *testing.T
	ws   *websocket.Conn
	pc   *webrtc.PeerConnection
	p    *peer.Peer
	sess *sctpddp.Session
	msgs chan sigMsg
}

func dialPage(t *testing.T, ctx context.Context, url string, mulpdu int) *pageSide {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := &pageSide{t: t, ws: ws, msgs: make(chan sigMsg, 256)}
	go func() {
		defer close(ps.msgs)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m sigMsg
			if json.Unmarshal(b, &m) == nil {
				ps.msgs <- m
			}
		}
	}()
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	ps.pc, err = webrtc.NewAPI(webrtc.WithSettingEngine(se)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sctpddp.CreateDataChannel(ps.pc, demoChannelID, sctpddp.DataChannelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	offer, err := ps.pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	done := webrtc.GatheringCompletePromise(ps.pc)
	if err := ps.pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-done
	ps.send(ctx, sigMsg{Type: "offer", SDP: ps.pc.LocalDescription().SDP, MULPDU: mulpdu})
	answer := ps.wait(ctx, func(m sigMsg) bool { return m.Type == "answer" })
	if err := ps.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.SDP}); err != nil {
		t.Fatal(err)
	}
	ps.p, err = peer.New()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.p.Register("sink", 64, 0, "l"); err != nil {
		t.Fatal(err)
	}
	ps.sess, err = sctpddp.ConnectStream(ctx, demoStream{st, mulpdu}, ps.p.QP, sctpddp.SessionConfig{Window: peer.Window})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func (ps *pageSide) send(ctx context.Context, m sigMsg) {
	b, _ := json.Marshal(m)
	if err := ps.ws.Write(ctx, websocket.MessageText, b); err != nil {
		ps.t.Fatal(err)
	}
}

// wait returns the first signaling message that ok accepts.
func (ps *pageSide) wait(ctx context.Context, ok func(sigMsg) bool) sigMsg {
	ps.t.Helper()
	for {
		select {
		case m, open := <-ps.msgs:
			if !open {
				ps.t.Fatal("signaling closed")
			}
			if m.Type == "error" {
				ps.t.Logf("server error: %s", m.Text)
			}
			if ok(m) {
				return m
			}
		case <-ctx.Done():
			ps.t.Fatal("timed out waiting for a signaling message")
		}
	}
}

func (ps *pageSide) close() {
	if ps.sess != nil {
		ps.sess.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ps.p.QP.Close(ctx)
	ps.pc.Close()
	ps.ws.CloseNow()
}

func region(rs []peer.Region, name string) *peer.Region {
	for i := range rs {
		if rs[i].Name == name {
			return &rs[i]
		}
	}
	return nil
}

// TestDemoGoPeer connects to the Go peer as the page does, with a small
// MULPDU, and checks that an RDMA Write lands in the Go peer's memory
// segment by segment, that a Send fills its first receive buffer, and
// that a Write to a bad STag ends in a Terminate both ends report.
func TestDemoGoPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := runtime.NumGoroutine()
	d := newDemoServer(testAssets(t), io.Discard)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.serve(sctx, ln) }()

	ps := dialPage(t, ctx, "http://"+ln.Addr().String(), 48)
	state := ps.wait(ctx, func(m sigMsg) bool { return m.Type == "go-state" })
	mem := region(state.Regions, "Go peer memory")
	if mem == nil || mem.Base != goMemBase || mem.Len != goMemLen || !mem.Valid {
		t.Fatalf("the Go peer's regions: %+v", state.Regions)
	}

	msg := []byte("Direct data placement, one small segment at a time.")
	if _, err := ps.p.Write(msg, mem.STag, goMemBase+7); err != nil {
		t.Fatal(err)
	}
	placed := 0
	var latest []peer.Region
	ps.wait(ctx, func(m sigMsg) bool {
		for _, e := range m.Events {
			if e.Kind == "segment-placed" && e.Tagged && e.Region == mem.STag {
				placed += int(e.Len)
			}
		}
		if m.Regions != nil {
			latest = m.Regions
		}
		r := region(latest, "Go peer memory")
		return placed == len(msg) && r != nil && bytes.Equal(r.Data[7:7+len(msg)], msg)
	})

	if _, err := ps.p.Send([]byte("ping"), false, 0); err != nil {
		t.Fatal(err)
	}
	ps.wait(ctx, func(m sigMsg) bool {
		for _, r := range m.Regions {
			if r.Recv && r.MSN == 1 && r.Filled && string(r.Data[:4]) == "ping" {
				return true
			}
		}
		return false
	})

	if _, err := ps.p.Write([]byte("bad"), 0x00dead01, 0); err != nil {
		t.Fatal(err)
	}
	term := ps.wait(ctx, func(m sigMsg) bool {
		for _, e := range m.Events {
			if e.Kind == "terminate" {
				return true
			}
		}
		return false
	})
	for _, e := range term.Events {
		if e.Kind == "terminate" && !strings.Contains(e.CodeName, "Invalid Steering Tag") {
			t.Errorf("Terminate %+v, want Invalid Steering Tag", e)
		}
	}
	select {
	case <-ps.p.QP.Terminated():
	case <-ctx.Done():
		t.Fatal("the page side's queue pair did not terminate")
	}

	ps.close()
	stop()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("serve: %v", err)
	}
	// Every goroutine of the Go peer and the server has ended (pion's
	// own may take a moment to wind down).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines left (%d before):\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestDemoFaults provokes each of the page's fault buttons against the Go
// peer and checks the Terminate both ends report, named in RFC 6580's
// words.
func TestDemoFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := newDemoServer(testAssets(t), io.Discard)
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	faults := []struct {
		name string
		do   func(p *peer.Peer, mem *peer.Region) error
		want string // the Error Code's name
	}{
		{"bad STag", func(p *peer.Peer, mem *peer.Region) error {
			_, err := p.Write([]byte("bad"), 0x00dead01, 0)
			return err
		}, "Invalid Steering Tag"},
		{"out of bounds", func(p *peer.Peer, mem *peer.Region) error {
			_, err := p.Write([]byte("out of bounds!!!"), mem.STag, mem.Base+uint64(mem.Len)-4)
			return err
		}, "Base or bounds violation"},
		{"stale key", func(p *peer.Peer, mem *peer.Region) error {
			stale := mem.STag&^0xff | (mem.STag+1)&0xff
			_, err := p.Write([]byte("stale"), stale, mem.Base)
			return err
		}, "Invalid Steering Tag"},
		{"no receive buffer", func(p *peer.Peer, mem *peer.Region) error {
			for range goRecvs + 1 {
				if _, err := p.Send([]byte("send"), false, 0); err != nil {
					return err
				}
			}
			return nil
		}, "no buffer available"},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ps := dialPage(t, ctx, srv.URL, 64)
			defer ps.close()
			state := ps.wait(ctx, func(m sigMsg) bool { return m.Type == "go-state" })
			mem := region(state.Regions, "Go peer memory")
			if err := f.do(ps.p, mem); err != nil {
				t.Fatal(err)
			}
			m := ps.wait(ctx, func(m sigMsg) bool {
				for _, e := range m.Events {
					if e.Kind == "terminate" {
						return true
					}
				}
				return false
			})
			for _, e := range m.Events {
				if e.Kind != "terminate" {
					continue
				}
				if !strings.Contains(e.CodeName, f.want) || e.LayerName == "" || e.TypeName == "" {
					t.Errorf("Go peer's Terminate: layer %q type %q code %q, want code %q", e.LayerName, e.TypeName, e.CodeName, f.want)
				}
				t.Logf("%s: %s", f.name, e.Error)
			}
			select {
			case <-ps.p.QP.Terminated():
			case <-ctx.Done():
				t.Fatal("the page side did not terminate")
			}
		})
	}
}

// TestDemoObserve checks the signaling of observe mode: a tab that
// observes another is counted, and the observed tab's reports reach it;
// an observer that leaves is uncounted.
func TestDemoObserve(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := newDemoServer(testAssets(t), io.Discard)
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	dial := func() (*websocket.Conn, int) {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		return ws, readUntil(t, ctx, ws, "welcome").ID
	}
	target, tid := dial()
	defer target.CloseNow()
	watcher, _ := dial()
	writeMsg(t, ctx, watcher, sigMsg{Type: "observe", To: tid})
	if m := readUntil(t, ctx, target, "observers"); m.Len != 1 {
		t.Fatalf("observers: %d, want 1", m.Len)
	}
	writeMsg(t, ctx, target, sigMsg{Type: "report", Body: map[string]any{"status": "x"}})
	if m := readUntil(t, ctx, watcher, "report"); m.From != tid || m.Body["status"] != "x" {
		t.Errorf("report %+v", m)
	}
	writeMsg(t, ctx, watcher, sigMsg{Type: "observe", To: 9999})
	if m := readUntil(t, ctx, watcher, "error"); !strings.Contains(m.Text, "no tab") {
		t.Errorf("observing a missing tab: %+v", m)
	}
	watcher.CloseNow()
	if m := readUntil(t, ctx, target, "observers"); m.Len != 0 {
		t.Errorf("observers after the watcher left: %d", m.Len)
	}
}

func writeMsg(t *testing.T, ctx context.Context, ws *websocket.Conn, m sigMsg) {
	t.Helper()
	b, _ := json.Marshal(m)
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func readUntil(t *testing.T, ctx context.Context, ws *websocket.Conn, typ string) sigMsg {
	t.Helper()
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for %q: %v", typ, err)
		}
		var m sigMsg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Type == typ {
			return m
		}
	}
}
