package demo

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/datachannel"
	"github.com/iwarpgo/iwarp/web"
)

func testAssets() web.Assets {
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

// testServer runs a Server on a loopback port until the test ends.
type testServer struct {
	*Server
	url  string // http://127.0.0.1:port
	host string // 127.0.0.1:port
	log  *syncBuffer
	stop func() // stops the server and waits for it (also at cleanup)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Assets == nil {
		cfg.Assets = testAssets()
	}
	log := &syncBuffer{}
	cfg.Log = log
	cfg.Addr = ln.Addr()
	s := New(cfg)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	var once sync.Once
	wait := func() {
		once.Do(func() {
			stop()
			if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(wait)
	return &testServer{Server: s, url: "http://" + ln.Addr().String(), host: ln.Addr().String(), log: log, stop: wait}
}

// tabConn is a signaling connection as a page has one.
type tabConn struct {
	t    *testing.T
	ws   *websocket.Conn
	id   int
	msgs chan Message
}

func dialTab(t *testing.T, ctx context.Context, url string) *tabConn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(8 << 20)
	tc := &tabConn{t: t, ws: ws, msgs: make(chan Message, 1024)}
	go func() {
		defer close(tc.msgs)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			var m Message
			if json.Unmarshal(b, &m) == nil {
				tc.msgs <- m
			}
		}
	}()
	tc.id = tc.wait(ctx, "welcome").ID
	t.Cleanup(func() { ws.CloseNow() })
	return tc
}

func (tc *tabConn) send(ctx context.Context, m Message) {
	tc.t.Helper()
	b, _ := json.Marshal(m)
	if err := tc.ws.Write(ctx, websocket.MessageText, b); err != nil {
		tc.t.Fatal(err)
	}
}

// waitFor returns the first message that ok accepts.
func (tc *tabConn) waitFor(ctx context.Context, ok func(Message) bool) Message {
	tc.t.Helper()
	for {
		select {
		case m, open := <-tc.msgs:
			if !open {
				tc.t.Fatal("signaling closed")
			}
			if ok(m) {
				return m
			}
		case <-ctx.Done():
			tc.t.Fatal("timed out waiting for a signaling message")
		}
	}
}

func (tc *tabConn) wait(ctx context.Context, typ string) Message {
	tc.t.Helper()
	return tc.waitFor(ctx, func(m Message) bool { return m.Type == typ })
}

// quiet reports the next message of type typ within d, if any.
func (tc *tabConn) quiet(d time.Duration, typ string) (Message, bool) {
	tm := time.After(d)
	for {
		select {
		case m, open := <-tc.msgs:
			if !open {
				return Message{}, false
			}
			if m.Type == typ {
				return m, true
			}
		case <-tm:
			return Message{}, false
		}
	}
}

// pageSide plays the page against the demo server with native pion: it
// offers the DDP data channels, runs an rdmap queue pair over each, and
// collects what the Go peer reports over signaling.
type pageSide struct {
	*tabConn
	pc    *webrtc.PeerConnection
	peers []*peer.Peer
	sess  []*sctpddp.Session
	state []peer.Region // the Go peer's regions, latest
}

func dialPage(t *testing.T, ctx context.Context, url string, mulpdu, streams int, im *Impairment) *pageSide {
	t.Helper()
	ps := &pageSide{tabConn: dialTab(t, ctx, url)}
	if im != nil {
		ps.send(ctx, Message{Type: "impair", Impair: im})
		ps.wait(ctx, "impair")
	}
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	var err error
	ps.pc, err = webrtc.NewAPI(webrtc.WithSettingEngine(se)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	var chans []*datachannel.Stream
	for i := range streams {
		st, err := datachannel.Create(ps.pc, streamID(i), sctpddp.ChannelConfig{})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, st)
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
	ps.send(ctx, Message{Type: "offer", SDP: ps.pc.LocalDescription().SDP, MULPDU: mulpdu, Streams: streams})
	answer := ps.waitFor(ctx, func(m Message) bool {
		if m.Type == "error" {
			t.Fatalf("the offer: %s", m.Text)
		}
		return m.Type == "answer"
	})
	if err := ps.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.SDP}); err != nil {
		t.Fatal(err)
	}
	for i, st := range chans {
		p, err := peer.New()
		if err != nil {
			t.Fatal(err)
		}
		p.Index = i
		if _, err := p.Register("sink", 64, 0, "l"); err != nil {
			t.Fatal(err)
		}
		sess, err := sctpddp.ConnectStream(ctx, pageStream{st, mulpdu}, p.QP, sctpddp.SessionConfig{Window: peer.Window})
		if err != nil {
			t.Fatal(err)
		}
		go p.Run(ctx)
		ps.peers = append(ps.peers, p)
		ps.sess = append(ps.sess, sess)
	}
	t.Cleanup(ps.close)
	st := ps.wait(ctx, "go-state")
	ps.state = st.Regions
	return ps
}

func (ps *pageSide) close() {
	for _, s := range ps.sess {
		s.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, p := range ps.peers {
		p.QP.Close(ctx)
	}
	ps.pc.Close()
	ps.ws.CloseNow()
}

// events waits for the Go peer's events until ok is satisfied, keeping
// its regions up to date.
func (ps *pageSide) events(ctx context.Context, ok func(e peer.Event) bool) {
	ps.t.Helper()
	ps.waitFor(ctx, func(m Message) bool {
		if m.Regions != nil {
			ps.state = m.Regions
		}
		done := false
		for _, e := range m.Events {
			if ok(e) {
				done = true
			}
		}
		return done
	})
}

func region(rs []peer.Region, name string) *peer.Region {
	for i := range rs {
		if rs[i].Name == name {
			return &rs[i]
		}
	}
	return nil
}
