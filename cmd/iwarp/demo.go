package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/wasm/peer"
	"github.com/iwarpgo/iwarp/web"
)

func init() {
	register("demo", command{
		summary: "serve the browser demo of direct data placement",
		run:     runDemo,
	})
}

// demoChannelID is the stream identifier of the DDP data channel that the
// page and the Go peer both create (negotiated, sctpddp.NewDataChannelInit).
const demoChannelID = 1

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to serve the demo on")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: iwarp demo [--addr host:port]")
		fmt.Fprintln(stderr, "Serves a page that shows RDMA Writes, Reads and Sends being placed,")
		fmt.Fprintln(stderr, "between the browser and a Go peer, or between two browser tabs.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	assets, err := web.Load(ctx, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	d := newDemoServer(assets, stderr)
	fmt.Fprintf(stdout, "iwarp demo: open http://%s/ in a browser (Ctrl-C stops)\n", ln.Addr())
	return d.serve(ctx, ln)
}

// demoServer serves the page and the signaling endpoint, and runs one Go
// peer per page that asks for one.
type demoServer struct {
	assets web.Assets
	log    io.Writer

	mu       sync.Mutex // guards nextID, tabs and watchers
	nextID   int
	tabs     map[int]*demoConn    // connected pages, for tab-to-tab pairing
	watchers map[int]map[int]bool // tab id -> the tabs observing it
	wg       sync.WaitGroup       // one per signaling connection
}

func newDemoServer(a web.Assets, log io.Writer) *demoServer {
	return &demoServer{assets: a, log: log, tabs: map[int]*demoConn{}, watchers: map[int]map[int]bool{}}
}

func (d *demoServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", d.serveWS)
	mux.HandleFunc("GET /", d.serveAsset)
	return mux
}

func (d *demoServer) serve(ctx context.Context, ln net.Listener) error {
	base, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           d.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		cancel()
		d.wg.Wait()
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	cancel() // ends the signaling connections (hijacked, so Shutdown does not wait for them)
	err := srv.Shutdown(sctx)
	d.wg.Wait()
	<-errc
	return err
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".wasm": "application/wasm",
}

// serveAsset serves the embedded files; iwarp.wasm is stored gzipped and
// sent as it is to a browser that accepts gzip (every browser that runs
// WebAssembly does), unpacked otherwise.
func (d *demoServer) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if name == "iwarp.wasm" {
		gz := d.assets[web.WasmGzName]
		h.Set("Content-Type", contentTypes[".wasm"])
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "iwarp.wasm is served gzip-encoded only", http.StatusNotAcceptable)
			return
		}
		h.Set("Content-Encoding", "gzip")
		h.Set("Vary", "Accept-Encoding")
		_, _ = w.Write(gz)
		return
	}
	b, ok := d.assets[name]
	if !ok || name == web.WasmGzName {
		http.NotFound(w, r)
		return
	}
	if ct, ok := contentTypes[path.Ext(name)]; ok {
		h.Set("Content-Type", ct)
	}
	_, _ = w.Write(b)
}

// sigMsg is one signaling message, in either direction. Type says which
// fields matter.
type sigMsg struct {
	Type string `json:"type"`
	// Pairing: the sender's or receiver's tab id, and the tabs waiting.
	ID    int   `json:"id,omitempty"`
	To    int   `json:"to,omitempty"`
	From  int   `json:"from,omitempty"`
	Peers []int `json:"peers,omitempty"`
	// Session description (offer, answer) as RTCSessionDescription has it.
	SDP string `json:"sdp,omitempty"`
	// Offer options: the page's MULPDU.
	MULPDU int `json:"mulpdu,omitempty"`
	// Go peer commands and their results.
	Op     string         `json:"op,omitempty"`
	STag   uint32         `json:"stag,omitempty"`
	Len    int            `json:"len,omitempty"`
	Base   uint64         `json:"base,omitempty"`
	Access string         `json:"access,omitempty"`
	Text   string         `json:"text,omitempty"`
	Body   map[string]any `json:"body,omitempty"` // relayed to a tab as is

	Regions []peer.Region `json:"regions,omitempty"`
	Events  []peer.Event  `json:"events,omitempty"`
	Dropped int           `json:"dropped,omitempty"`
}

// demoConn is one page's signaling connection.
type demoConn struct {
	id int
	ws *websocket.Conn

	mu sync.Mutex // guards gp
	gp *goPeer
}

func (c *demoConn) send(ctx context.Context, m sigMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, b)
}

func (d *demoServer) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil) // same origin only
	if err != nil {
		return
	}
	d.wg.Add(1)
	defer d.wg.Done()
	ws.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	d.mu.Lock()
	d.nextID++
	c := &demoConn{id: d.nextID, ws: ws}
	d.tabs[c.id] = c
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.tabs, c.id)
		delete(d.watchers, c.id)
		var watched []int
		for id, w := range d.watchers {
			if w[c.id] {
				delete(w, c.id)
				watched = append(watched, id)
			}
		}
		d.mu.Unlock()
		for _, id := range watched {
			d.tellObservers(context.Background(), id)
		}
		c.mu.Lock()
		gp := c.gp
		c.gp = nil
		c.mu.Unlock()
		if gp != nil {
			gp.close()
		}
		d.broadcastPeers(context.Background())
		_ = ws.CloseNow()
	}()
	if err := c.send(ctx, sigMsg{Type: "welcome", ID: c.id}); err != nil {
		return
	}
	d.broadcastPeers(ctx)
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var m sigMsg
		if err := json.Unmarshal(b, &m); err != nil {
			_ = c.send(ctx, sigMsg{Type: "error", Text: "bad signaling message: " + err.Error()})
			continue
		}
		if err := d.handle(ctx, c, m); err != nil {
			_ = c.send(ctx, sigMsg{Type: "error", Op: m.Op, Text: err.Error()})
		}
	}
}

// broadcastPeers tells every tab which other tabs are connected.
func (d *demoServer) broadcastPeers(ctx context.Context) {
	d.mu.Lock()
	ids := make([]int, 0, len(d.tabs))
	conns := make([]*demoConn, 0, len(d.tabs))
	for id, c := range d.tabs {
		ids = append(ids, id)
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		_ = c.send(ctx, sigMsg{Type: "peers", Peers: ids})
	}
}

func (d *demoServer) handle(ctx context.Context, c *demoConn, m sigMsg) error {
	switch m.Type {
	case "offer":
		if m.To != 0 {
			return d.relay(ctx, c, m)
		}
		c.mu.Lock()
		old := c.gp
		c.gp = nil
		c.mu.Unlock()
		if old != nil {
			old.close()
		}
		gp, answer, err := startGoPeer(ctx, c, m)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.gp = gp
		c.mu.Unlock()
		if err := c.send(ctx, sigMsg{Type: "answer", SDP: answer}); err != nil {
			return err
		}
		gp.start()
		return nil
	case "answer", "relay":
		return d.relay(ctx, c, m)
	case "go":
		c.mu.Lock()
		gp := c.gp
		c.mu.Unlock()
		if gp == nil {
			return errors.New("not connected to the Go peer")
		}
		return gp.command(m)
	case "observe":
		return d.observe(ctx, c, m.To)
	case "report":
		d.report(ctx, c, m)
		return nil
	case "hangup":
		c.mu.Lock()
		gp := c.gp
		c.gp = nil
		c.mu.Unlock()
		if gp != nil {
			gp.close()
		}
		return nil
	}
	return fmt.Errorf("unknown signaling message type %q", m.Type)
}

// observe makes c watch tab id (read-only): what that tab reports is
// passed on to c. id 0 stops watching.
func (d *demoServer) observe(ctx context.Context, c *demoConn, id int) error {
	d.mu.Lock()
	var old []int
	for tid, w := range d.watchers {
		if w[c.id] {
			delete(w, c.id)
			old = append(old, tid)
		}
	}
	_, ok := d.tabs[id]
	if ok && id != c.id {
		if d.watchers[id] == nil {
			d.watchers[id] = map[int]bool{}
		}
		d.watchers[id][c.id] = true
	}
	d.mu.Unlock()
	for _, tid := range old {
		d.tellObservers(ctx, tid)
	}
	if id == 0 {
		return nil
	}
	if !ok || id == c.id {
		return fmt.Errorf("no tab %d to observe", id)
	}
	d.tellObservers(ctx, id)
	return nil
}

// tellObservers tells tab id how many tabs observe it, so that it reports
// its state (in full when the number changes) only while someone watches.
func (d *demoServer) tellObservers(ctx context.Context, id int) {
	d.mu.Lock()
	c := d.tabs[id]
	n := len(d.watchers[id])
	d.mu.Unlock()
	if c != nil {
		_ = c.send(ctx, sigMsg{Type: "observers", Len: n})
	}
}

// report passes a tab's report of its state to the tabs observing it.
func (d *demoServer) report(ctx context.Context, c *demoConn, m sigMsg) {
	d.mu.Lock()
	var to []*demoConn
	for id := range d.watchers[c.id] {
		if w := d.tabs[id]; w != nil {
			to = append(to, w)
		}
	}
	d.mu.Unlock()
	for _, w := range to {
		_ = w.send(ctx, sigMsg{Type: "report", From: c.id, Body: m.Body})
	}
}

// relay passes a message to another tab, for browser-to-browser pairing.
func (d *demoServer) relay(ctx context.Context, c *demoConn, m sigMsg) error {
	d.mu.Lock()
	to := d.tabs[m.To]
	d.mu.Unlock()
	if to == nil || to == c {
		return fmt.Errorf("no tab %d to pair with", m.To)
	}
	m.From, m.To = c.id, 0
	return to.send(ctx, m)
}

// demoStream is the Go peer's DDP data channel with the page's MULPDU,
// which may be below RFC 5043 §9's floor (see peer.MinMULPDU): the
// session segments to it and sizes its read buffer by it, as the page
// does. The channel itself accepts segments up to its own, larger limit.
type demoStream struct {
	*sctpddp.DataChannelStream
	mulpdu int
}

func (s demoStream) MULPDU() int { return s.mulpdu }

// goPeer is the demo's Go end of a stream with one page: a pion
// PeerConnection, the DDP data channel on it, and an rdmap queue pair in
// a peer.Peer.
type goPeer struct {
	c      *demoConn
	pc     *webrtc.PeerConnection
	st     *sctpddp.DataChannelStream
	ms     demoStream
	p      *peer.Peer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex // guards sess
	sess *sctpddp.Session
}

// Layout of the Go peer's memory when a page connects.
const (
	goMemLen   = 256
	goMemBase  = 0x1000
	goRecvLen  = 64
	goRecvs    = 2
	goFlushGap = 40 * time.Millisecond // events are sent to the page in batches
)

func startGoPeer(parent context.Context, c *demoConn, offer sigMsg) (*goPeer, string, error) {
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se))
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, "", err
	}
	ok := false
	defer func() {
		if !ok {
			_ = pc.Close()
		}
	}()
	mulpdu := offer.MULPDU
	if mulpdu == 0 {
		mulpdu = sctpddp.MaxDataChannelMULPDU
	}
	if mulpdu < peer.MinMULPDU || mulpdu > sctpddp.MaxDataChannelMULPDU {
		return nil, "", fmt.Errorf("MULPDU %d outside [%d, %d]", mulpdu, peer.MinMULPDU, sctpddp.MaxDataChannelMULPDU)
	}
	st, err := sctpddp.CreateDataChannel(pc, demoChannelID, sctpddp.DataChannelConfig{})
	if err != nil {
		return nil, "", err
	}
	p, err := peer.New()
	if err != nil {
		return nil, "", err
	}
	if _, err := p.Register("Go peer memory", goMemLen, goMemBase, "rw"); err != nil {
		return nil, "", err
	}
	for range goRecvs {
		if _, _, err := p.PostRecv(goRecvLen); err != nil {
			return nil, "", err
		}
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer.SDP}); err != nil {
		return nil, "", fmt.Errorf("the page's offer: %w", err)
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return nil, "", err
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(answer); err != nil {
		return nil, "", err
	}
	select {
	case <-gathered:
	case <-time.After(5 * time.Second):
		return nil, "", errors.New("gathering ICE candidates took over 5 s")
	case <-parent.Done():
		return nil, "", parent.Err()
	}
	ok = true
	ctx, cancel := context.WithCancel(parent)
	gp := &goPeer{c: c, pc: pc, st: st, ms: demoStream{st, mulpdu}, p: p, ctx: ctx, cancel: cancel}
	return gp, pc.LocalDescription().SDP, nil
}

// start runs the peer: it accepts the page's DDP Stream Session, takes
// completions, and sends its events and memory to the page.
func (g *goPeer) start() {
	g.wg.Add(3)
	go func() {
		defer g.wg.Done()
		g.p.Run(g.ctx)
	}()
	go func() {
		defer g.wg.Done()
		g.accept()
	}()
	go func() {
		defer g.wg.Done()
		g.pump()
	}()
}

func (g *goPeer) accept() {
	req, err := sctpddp.ReadInitiate(g.ctx, g.ms, 10*time.Second)
	if err != nil {
		g.report("the page's DDP Stream Session did not start: %v", err)
		return
	}
	sess, err := req.Accept(g.p.QP, sctpddp.SessionConfig{Window: peer.Window})
	if err != nil {
		g.report("accepting the DDP Stream Session: %v", err)
		return
	}
	g.mu.Lock()
	g.sess = sess
	g.mu.Unlock()
	g.report("Go peer: DDP Stream Session accepted on data channel %d", sess.ID())
}

func (g *goPeer) report(format string, args ...any) {
	if g.ctx.Err() != nil {
		return
	}
	_ = g.c.send(g.ctx, sigMsg{Type: "go-log", Text: fmt.Sprintf(format, args...)})
}

// pump sends the peer's events and, when they changed, its regions to
// the page, in batches.
func (g *goPeer) pump() {
	t := time.NewTicker(goFlushGap)
	defer t.Stop()
	_ = g.c.send(g.ctx, sigMsg{Type: "go-state", Regions: g.p.Regions()})
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		ev, dropped, changed := g.p.Drain()
		if len(ev) == 0 && !changed {
			continue
		}
		m := sigMsg{Type: "go-events", Events: ev, Dropped: dropped}
		if changed {
			m.Regions = g.p.Regions()
		}
		if err := g.c.send(g.ctx, m); err != nil {
			return
		}
	}
}

// command runs a page's command on the Go peer's memory.
func (g *goPeer) command(m sigMsg) error {
	var err error
	switch m.Op {
	case "register":
		n := m.Len
		if n == 0 {
			n = goMemLen
		}
		access := m.Access
		if access == "" {
			access = "rw"
		}
		_, err = g.p.Register("Go peer region", n, m.Base, access)
	case "deregister":
		err = g.p.Deregister(m.STag)
	case "invalidate":
		err = g.p.Invalidate(m.STag)
	case "post-recv":
		n := m.Len
		if n == 0 {
			n = goRecvLen
		}
		_, _, err = g.p.PostRecv(n)
	default:
		err = fmt.Errorf("unknown Go peer command %q", m.Op)
	}
	return err
}

// close ends the session, the queue pair and the PeerConnection, and
// waits for the peer's goroutines.
func (g *goPeer) close() {
	g.cancel()
	g.mu.Lock()
	sess := g.sess
	g.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = g.p.QP.Close(ctx)
	_ = g.st.Close()
	_ = g.pc.Close()
	g.wg.Wait()
}
