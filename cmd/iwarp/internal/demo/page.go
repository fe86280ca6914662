package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/datachannel"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// PageOptions say how a Page connects to the Go peer.
type PageOptions struct {
	MULPDU  int         // the page's segment size (0: the transport's largest)
	Streams int         // DDP streams on the data channel transport (0: 1)
	Impair  *Impairment // set before connecting, if not nil
	Ordered bool        // the page's data channels send ordered
	MPA     bool        // MPA over a WebSocket instead of a data channel
	Markers bool        // ... with Markers both ways
}

// Page plays the demo's page in Go, as the browser peer does it (pion
// for the data channel, mpa.Client over the WebSocket for MPA), for the
// tests and for the labs' checks (docs/labs_test.go).
type Page struct {
	ID    int
	Peers []*peer.Peer // the page's queue pairs

	base   string
	ws     *websocket.Conn
	msgs   chan Message
	pc     *webrtc.PeerConnection
	sess   []*sctpddp.Session
	conn   *mpa.Conn
	mws    *websocket.Conn
	cancel context.CancelFunc

	mu      sync.Mutex
	regions []peer.Region // the Go peer's, latest
	fpdus   []peer.Event  // what the Tap saw (MPA)
}

type pageStream struct {
	*datachannel.Stream
	mulpdu int
}

func (s pageStream) MULPDU() int { return s.mulpdu }

// DialPage opens the signaling connection to the demo at base
// (http://host:port) and connects to the Go peer.
func DialPage(ctx context.Context, base string, o PageOptions) (*Page, error) {
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(8 << 20)
	rctx, cancel := context.WithCancel(context.Background())
	p := &Page{base: base, ws: ws, msgs: make(chan Message, 4096), cancel: cancel}
	go func() {
		defer close(p.msgs)
		for {
			_, b, err := ws.Read(rctx)
			if err != nil {
				return
			}
			var m Message
			if json.Unmarshal(b, &m) == nil {
				p.msgs <- m
			}
		}
	}()
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	w, err := p.Wait(ctx, func(m Message) bool { return m.Type == "welcome" })
	if err != nil {
		return nil, err
	}
	p.ID = w.ID
	if o.Impair != nil {
		if err := p.Send(ctx, Message{Type: "impair", Impair: o.Impair}); err != nil {
			return nil, err
		}
		if _, err := p.Wait(ctx, func(m Message) bool { return m.Type == "impair" }); err != nil {
			return nil, err
		}
	}
	if o.MPA {
		err = p.connectMPA(ctx, o)
	} else {
		err = p.connectDC(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	st, err := p.Wait(ctx, func(m Message) bool { return m.Type == "go-state" })
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.regions = st.Regions
	p.mu.Unlock()
	for _, q := range p.Peers {
		go q.Run(rctx)
	}
	ok = true
	return p, nil
}

func (p *Page) connectDC(ctx context.Context, o PageOptions) error {
	streams := max(o.Streams, 1)
	mulpdu := o.MULPDU
	if mulpdu == 0 {
		mulpdu = wire.MaxDataChannelMULPDU
	}
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	pc, err := webrtc.NewAPI(webrtc.WithSettingEngine(se)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return err
	}
	p.pc = pc
	create := datachannel.Create
	if o.Ordered {
		create = datachannel.CreateOrdered
	}
	var chans []*datachannel.Stream
	for i := range streams {
		st, err := create(pc, streamID(i), sctpddp.ChannelConfig{})
		if err != nil {
			return err
		}
		chans = append(chans, st)
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return err
	}
	done := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := p.Send(ctx, Message{Type: "offer", SDP: pc.LocalDescription().SDP, MULPDU: mulpdu, Streams: streams}); err != nil {
		return err
	}
	answer, err := p.Wait(ctx, func(m Message) bool { return m.Type == "answer" })
	if err != nil {
		return err
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.SDP}); err != nil {
		return err
	}
	for i, st := range chans {
		q, err := peer.New()
		if err != nil {
			return err
		}
		q.Index = i
		if _, err := q.Register("sink", 64, 0, "l"); err != nil {
			return err
		}
		sess, err := sctpddp.ConnectStream(ctx, pageStream{st, mulpdu}, q.QP, sctpddp.SessionConfig{Window: peer.Window})
		if err != nil {
			return err
		}
		p.Peers = append(p.Peers, q)
		p.sess = append(p.sess, sess)
	}
	return nil
}

func (p *Page) connectMPA(ctx context.Context, o PageOptions) error {
	if err := p.Send(ctx, Message{Type: "mpa", MULPDU: o.MULPDU, Markers: o.Markers}); err != nil {
		return err
	}
	tk, err := p.Wait(ctx, func(m Message) bool { return m.Type == "mpa-ticket" })
	if err != nil {
		return err
	}
	mws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.base, "http")+"/mpa?ticket="+tk.Ticket, nil)
	if err != nil {
		return err
	}
	p.mws = mws
	q, err := peer.New()
	if err != nil {
		return err
	}
	if _, err := q.Register("sink", 64, 0, "l"); err != nil {
		return err
	}
	tap := peer.NewTap(true, func(e peer.Event) {
		p.mu.Lock()
		p.fpdus = append(p.fpdus, e)
		p.mu.Unlock()
	})
	nc := websocket.NetConn(context.Background(), mws, websocket.MessageBinary)
	conn, err := mpa.Client(ctx, nc, peer.CapMULPDU(q.QP, tk.MULPDU), &mpa.Config{Markers: tk.Markers, Trace: func(_, _ net.Addr) mpa.Tracer { return mpa.TraceFunc(tap.Observe) }})
	if err != nil {
		return err
	}
	p.conn = conn
	p.Peers = append(p.Peers, q)
	return nil
}

// Send sends a signaling message.
func (p *Page) Send(ctx context.Context, m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return p.ws.Write(ctx, websocket.MessageText, b)
}

// Wait returns the next signaling message that ok accepts, keeping the
// Go peer's regions up to date; an error message from the server ends
// the wait.
func (p *Page) Wait(ctx context.Context, ok func(Message) bool) (Message, error) {
	for {
		select {
		case m, open := <-p.msgs:
			if !open {
				return Message{}, errors.New("the signaling connection closed")
			}
			if m.Regions != nil {
				p.mu.Lock()
				p.regions = m.Regions
				p.mu.Unlock()
			}
			if ok(m) {
				return m, nil
			}
			if m.Type == "error" {
				return m, fmt.Errorf("the server: %s", m.Text)
			}
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// WaitEvents waits until ok has accepted one of the Go peer's events;
// every event of the batch that holds it is shown to ok.
func (p *Page) WaitEvents(ctx context.Context, ok func(peer.Event) bool) error {
	_, err := p.Wait(ctx, func(m Message) bool {
		done := false
		for _, e := range m.Events {
			if ok(e) {
				done = true
			}
		}
		return done
	})
	return err
}

// Region returns the Go peer's region of that name, as last reported.
func (p *Page) Region(name string) *peer.Region {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.regions {
		if p.regions[i].Name == name {
			r := p.regions[i]
			return &r
		}
	}
	return nil
}

// Regions returns the Go peer's regions, as last reported.
func (p *Page) Regions() []peer.Region {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]peer.Region(nil), p.regions...)
}

// FPDUs returns what the page's Tap read off the MPA stream so far.
func (p *Page) FPDUs() []peer.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]peer.Event(nil), p.fpdus...)
}

// Close ends the page's sessions and connections.
func (p *Page) Close() {
	for _, s := range p.sess {
		_ = s.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, q := range p.Peers {
		_ = q.QP.Close(ctx)
	}
	if p.conn != nil {
		_ = p.conn.Close()
	}
	if p.mws != nil {
		_ = p.mws.CloseNow()
	}
	if p.pc != nil {
		_ = p.pc.Close()
	}
	p.cancel()
	_ = p.ws.CloseNow()
}
