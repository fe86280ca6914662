package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/iwarpgo/iwarp/internal/peer"
)

// Message is one signaling message, in either direction; Type says which
// fields matter. web/README.md lists them.
type Message struct {
	Type string `json:"type"`
	// Tabs: the sender's or receiver's tab id.
	ID   int `json:"id,omitempty"`
	To   int `json:"to,omitempty"`
	From int `json:"from,omitempty"`
	// Consent: a code one tab shows and another types, what it is for
	// ("pair" or "observe"), and a pair's roles.
	Code    string `json:"code,omitempty"`
	Purpose string `json:"purpose,omitempty"`
	Peer    int    `json:"peer,omitempty"`
	Offerer bool   `json:"offerer,omitempty"`
	// Session description (offer, answer) as RTCSessionDescription has it.
	SDP string `json:"sdp,omitempty"`
	// Offer options: the page's MULPDU and how many DDP streams (queue
	// pairs, each on its own data channel of the one association).
	MULPDU  int `json:"mulpdu,omitempty"`
	Streams int `json:"streams,omitempty"`
	// MPA over a WebSocket: Markers asked for, and the ticket that lets
	// the page's WebSocket to /mpa reach its Go peer.
	Markers bool   `json:"markers,omitempty"`
	Ticket  string `json:"ticket,omitempty"`
	// Go peer commands and their results.
	Op     string         `json:"op,omitempty"`
	STag   uint32         `json:"stag,omitempty"`
	Len    int            `json:"len,omitempty"`
	Base   uint64         `json:"base,omitempty"`
	Offset uint64         `json:"offset,omitempty"` // a window's, in its region (bind)
	Access string         `json:"access,omitempty"`
	QP     int            `json:"qp,omitempty"`
	MS     int            `json:"ms,omitempty"`
	Text   string         `json:"text,omitempty"`
	Body   map[string]any `json:"body,omitempty"` // passed on to the pair or the observers as is

	Regions   []peer.Region `json:"regions,omitempty"`
	Events    []peer.Event  `json:"events,omitempty"`
	Dropped   int           `json:"dropped,omitempty"`
	Impair    *Impairment   `json:"impair,omitempty"`
	Net       *NetStats     `json:"net,omitempty"`
	Transport string        `json:"transport,omitempty"`
	Presets   []Impairment  `json:"presets,omitempty"`
}

// A code is valid this long (pairing); observing codes last until
// revoked or their tab leaves.
const (
	codeLifetime = 10 * time.Minute
	maxFailures  = 20 // wrong codes a minute, all tabs together
)

// invite is a code one tab gave out.
type invite struct {
	code    string
	purpose string
	tab     *tab
	expires time.Time // zero: until revoked
}

// tab is one page's signaling connection.
type tab struct {
	id  int
	s   *Server
	ws  *websocket.Conn
	ctx context.Context
	end context.CancelFunc

	q     chan []byte // what the writer sends, in order
	qmu   sync.Mutex  // guards qerr and qlen
	qerr  error
	qlen  int // octets in q, at most Config.SendQueueBytes
	limit *bucket

	// Guarded by s.mu.
	pair     *tab          // the tab this one is paired with
	watchers map[*tab]bool // tabs observing this one
	watching *tab
	impair   Impairment

	gmu sync.Mutex // guards gp
	gp  *goPeer
}

// send queues m for the tab. A tab whose queue is full, in messages or
// in octets, is not reading: it is closed, and nobody waits for it.
func (t *tab) send(m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	t.qmu.Lock()
	defer t.qmu.Unlock()
	if t.qerr != nil {
		return t.qerr
	}
	if t.qlen+len(b) > t.s.cfg.SendQueueBytes {
		t.qerr = fmt.Errorf("the tab does not read its messages (%d octets wait)", t.qlen)
		t.s.logf("tab %d: %v; closing it", t.id, t.qerr)
		t.end()
		return t.qerr
	}
	select {
	case t.q <- b:
		t.qlen += len(b)
		return nil
	default:
		t.qerr = errors.New("the tab does not read its messages")
		t.s.logf("tab %d: %v; closing it", t.id, t.qerr)
		t.end()
		return t.qerr
	}
}

// dequeued counts b out of the tab's queue.
func (t *tab) dequeued(b []byte) {
	t.qmu.Lock()
	t.qlen -= len(b)
	t.qmu.Unlock()
}

func (t *tab) writer() {
	for {
		select {
		case <-t.ctx.Done():
			return
		case b := <-t.q:
			t.dequeued(b)
			wctx, cancel := context.WithTimeout(t.ctx, t.s.cfg.WriteTimeout)
			err := t.ws.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				t.end()
				return
			}
		}
	}
}

func (t *tab) pinger() {
	tk := time.NewTicker(t.s.cfg.PingInterval)
	defer tk.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tk.C:
		}
		pctx, cancel := context.WithTimeout(t.ctx, t.s.cfg.PingInterval)
		err := t.ws.Ping(pctx)
		cancel()
		if err != nil {
			t.end()
			return
		}
	}
}

// bucket is a token bucket: rate a second, burst at most.
type bucket struct {
	rate, burst, have float64
	at                time.Time
}

func (b *bucket) take() bool {
	now := time.Now()
	b.have = min(b.burst, b.have+now.Sub(b.at).Seconds()*b.rate)
	b.at = now
	if b.have < 1 {
		return false
	}
	b.have--
	return true
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	full := len(s.tabs) >= s.cfg.MaxTabs
	s.mu.Unlock()
	if full {
		http.Error(w, fmt.Sprintf("at most %d tabs at once", s.cfg.MaxTabs), http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, nil) // Origin: same host only
	if err != nil {
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	ws.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	t := &tab{s: s, ws: ws, ctx: ctx, end: cancel, q: make(chan []byte, s.cfg.SendQueue),
		limit:  &bucket{rate: s.cfg.Rate, burst: float64(s.cfg.Burst), have: float64(s.cfg.Burst), at: time.Now()},
		impair: s.cfg.Impairment}
	s.mu.Lock()
	if len(s.tabs) >= s.cfg.MaxTabs {
		s.mu.Unlock()
		ws.Close(websocket.StatusTryAgainLater, "too many tabs")
		return
	}
	s.nextID++
	t.id = s.nextID
	s.tabs[t.id] = t
	s.mu.Unlock()
	var helpers sync.WaitGroup
	helpers.Add(2)
	go func() { defer helpers.Done(); t.writer() }()
	go func() { defer helpers.Done(); t.pinger() }()
	defer func() {
		cancel()
		s.leave(t)
		helpers.Wait()
		_ = ws.CloseNow()
	}()
	im := t.impair
	if t.send(Message{Type: "welcome", ID: t.id, Impair: &im, Presets: Presets}) != nil {
		return
	}
	dropped := 0
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if !t.limit.take() {
			dropped++
			if dropped == 1 || dropped%100 == 0 {
				_ = t.send(Message{Type: "error", Text: fmt.Sprintf("too many messages: at most %g a second (%d dropped)", s.cfg.Rate, dropped)})
			}
			if dropped >= 1000 {
				ws.Close(websocket.StatusPolicyViolation, "message rate")
				return
			}
			continue
		}
		s.receive(t, b)
	}
}

// receive decodes one message from a tab and acts on it. A message that
// is not one is answered with an error {text}, one that handle refuses
// with an error {op, purpose, text} giving its op and type
// (web/README.md). What an answer echoes of the message is cut short
// (clipEcho, maxErrorText), so that it stays a few KiB whatever the
// message holds: JSON writes a "<" in six octets, and an answer that
// echoed a type of them whole, in its purpose and in its text, would be
// twelve times the message.
func (s *Server) receive(t *tab, b []byte) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		_ = t.send(Message{Type: "error", Text: clip("bad signaling message: "+err.Error(), maxErrorText)})
		return
	}
	if err := s.handle(t, m); err != nil {
		_ = t.send(Message{Type: "error", Op: clipEcho(m.Op), Purpose: clipEcho(m.Type), Text: clip(err.Error(), maxErrorText)})
	}
}

// How much of a refused message an error answer echoes, in octets.
const (
	maxEcho      = 64  // of its type and op
	maxErrorText = 512 // of the error's text, which may quote the message
)

// clipEcho cuts a refused message's type or op to maxEcho octets.
func clipEcho(s string) string { return clip(s, maxEcho) }

// clip cuts s to at most n octets, at a rune boundary, marking the cut
// with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("...")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// leave forgets a tab: its codes, its pair, its observers, its Go peer.
func (s *Server) leave(t *tab) {
	s.mu.Lock()
	delete(s.tabs, t.id)
	for c, inv := range s.codes {
		if inv.tab == t {
			delete(s.codes, c)
		}
	}
	for k, tk := range s.tickets {
		if tk.tab == t {
			delete(s.tickets, k)
		}
	}
	p := t.pair
	if p != nil {
		p.pair, t.pair = nil, nil
	}
	watchers := t.watchers
	t.watchers = nil
	watched := t.watching
	t.watching = nil
	if watched != nil {
		delete(watched.watchers, t)
	}
	s.mu.Unlock()
	if p != nil {
		_ = p.send(Message{Type: "unpaired", Peer: t.id, Text: fmt.Sprintf("tab %d left", t.id)})
	}
	for w := range watchers {
		_ = w.send(Message{Type: "observe-ended", Text: fmt.Sprintf("tab %d left", t.id)})
	}
	if watched != nil {
		s.tellObservers(watched)
	}
	t.setGoPeer(nil)
}

// setGoPeer replaces the tab's Go peer, closing the old one.
func (t *tab) setGoPeer(gp *goPeer) {
	t.gmu.Lock()
	old := t.gp
	t.gp = gp
	t.gmu.Unlock()
	if old != nil {
		old.close()
	}
}

func (t *tab) goPeer() *goPeer {
	t.gmu.Lock()
	defer t.gmu.Unlock()
	return t.gp
}

func (s *Server) handle(t *tab, m Message) error {
	switch m.Type {
	case "ping":
		return nil
	case "invite":
		return s.invite(t, m.Purpose)
	case "revoke":
		s.revoke(t, m.Purpose)
		return nil
	case "join":
		return s.join(t, m.Code)
	case "unpair":
		s.unpair(t)
		return nil
	case "offer":
		if m.To != 0 {
			return s.forward(t, m)
		}
		return s.startWebRTC(t, m)
	case "answer", "relay":
		return s.forward(t, m)
	case "mpa":
		return s.newTicket(t, m)
	case "go":
		gp := t.goPeer()
		if gp == nil {
			return errors.New("not connected to the Go peer")
		}
		return gp.command(m)
	case "impair":
		return s.setImpairment(t, m)
	case "observe":
		return s.observe(t, m.Code)
	case "report":
		s.report(t, m)
		return nil
	case "hangup":
		t.setGoPeer(nil)
		return nil
	}
	return fmt.Errorf("unknown signaling message type %q", m.Type)
}

// newCode draws a 6-digit code that is not in use. s.mu is held.
func (s *Server) newCode() string {
	for {
		n, err := rand.Int(rand.Reader, big.NewInt(900000))
		if err != nil {
			// rand.Int fails only for a bound below one (crypto/rand's
			// Reader never returns an error): a programming error.
			panic(err)
		}
		c := fmt.Sprint(100000 + n.Int64())
		if s.codes[c] == nil {
			return c
		}
	}
}

// invite gives the tab a code for another tab to pair with it or to
// observe it; a tab holds one code of each kind, the newest.
func (s *Server) invite(t *tab, purpose string) error {
	if purpose != "pair" && purpose != "observe" {
		return fmt.Errorf("nothing to invite to: %q (pair or observe)", purpose)
	}
	s.mu.Lock()
	for c, inv := range s.codes {
		if inv.tab == t && inv.purpose == purpose {
			delete(s.codes, c)
		}
	}
	inv := &invite{code: s.newCode(), purpose: purpose, tab: t}
	if purpose == "pair" {
		inv.expires = time.Now().Add(codeLifetime)
	}
	s.codes[inv.code] = inv
	s.mu.Unlock()
	return t.send(Message{Type: "code", Purpose: purpose, Code: inv.code})
}

// revoke withdraws the tab's code; for observing, its observers stop too.
func (s *Server) revoke(t *tab, purpose string) {
	s.mu.Lock()
	for c, inv := range s.codes {
		if inv.tab == t && inv.purpose == purpose {
			delete(s.codes, c)
		}
	}
	var watchers map[*tab]bool
	if purpose == "observe" {
		watchers = t.watchers
		t.watchers = nil
		for w := range watchers {
			w.watching = nil
		}
	}
	s.mu.Unlock()
	for w := range watchers {
		_ = w.send(Message{Type: "observe-ended", Text: fmt.Sprintf("tab %d stopped sharing its view", t.id)})
	}
	if watchers != nil {
		s.tellObservers(t)
	}
}

// lookup returns the invitation of a code, counting wrong codes: past
// maxFailures a minute, every attempt fails for the rest of the minute,
// so that codes cannot be guessed. s.mu is held.
func (s *Server) lookup(code, purpose string) (*invite, error) {
	now := time.Now()
	if now.Sub(s.failAt) > time.Minute {
		s.failed, s.failAt = 0, now
	}
	if s.failed >= maxFailures {
		return nil, errors.New("too many wrong codes; try again in a minute")
	}
	inv := s.codes[code]
	if inv != nil && !inv.expires.IsZero() && now.After(inv.expires) {
		delete(s.codes, code)
		inv = nil
	}
	if inv == nil || inv.purpose != purpose {
		s.failed++
		return nil, fmt.Errorf("no tab offers %s with code %q", purpose, code)
	}
	return inv, nil
}

// join pairs the tab with the one that gave out the code: both agreed,
// one by asking for the code, the other by typing it. The joining tab
// makes the offer.
func (s *Server) join(t *tab, code string) error {
	s.mu.Lock()
	inv, err := s.lookup(code, "pair")
	if err != nil {
		s.mu.Unlock()
		return err
	}
	o := inv.tab
	if o == t {
		s.mu.Unlock()
		return errors.New("that is this tab's own code")
	}
	delete(s.codes, code)
	var old []*tab
	for _, x := range []*tab{t, o} {
		if p := x.pair; p != nil {
			p.pair, x.pair = nil, nil
			old = append(old, p)
		}
	}
	t.pair, o.pair = o, t
	s.mu.Unlock()
	for _, p := range old {
		_ = p.send(Message{Type: "unpaired", Text: "the other tab paired anew"})
	}
	_ = o.send(Message{Type: "paired", Peer: t.id})
	return t.send(Message{Type: "paired", Peer: o.id, Offerer: true})
}

func (s *Server) unpair(t *tab) {
	s.mu.Lock()
	p := t.pair
	if p != nil {
		p.pair, t.pair = nil, nil
	}
	s.mu.Unlock()
	if p != nil {
		_ = p.send(Message{Type: "unpaired", Peer: t.id, Text: fmt.Sprintf("tab %d ended the pairing", t.id)})
	}
}

// forward passes an offer, an answer or a relayed body to the tab's
// pair, and to nobody else.
func (s *Server) forward(t *tab, m Message) error {
	s.mu.Lock()
	p := t.pair
	s.mu.Unlock()
	if p == nil || p.id != m.To {
		return fmt.Errorf("tab %d is not paired with this tab: pair first, with a code", m.To)
	}
	m.From, m.To = t.id, 0
	return p.send(m)
}

// observe makes t watch the tab whose observing code this is ("" stops).
func (s *Server) observe(t *tab, code string) error {
	s.mu.Lock()
	old := t.watching
	if old != nil {
		delete(old.watchers, t)
		t.watching = nil
	}
	var target *tab
	var err error
	if code != "" {
		var inv *invite
		if inv, err = s.lookup(code, "observe"); err == nil {
			target = inv.tab
			if target == t {
				target, err = nil, errors.New("a tab cannot observe itself")
			}
		}
	}
	if target != nil {
		if target.watchers == nil {
			target.watchers = map[*tab]bool{}
		}
		target.watchers[t] = true
		t.watching = target
	}
	s.mu.Unlock()
	if old != nil {
		s.tellObservers(old)
	}
	if err != nil {
		return err
	}
	if target != nil {
		s.tellObservers(target)
		return t.send(Message{Type: "observing", Peer: target.id})
	}
	return nil
}

// tellObservers tells a tab how many tabs observe it, so that it reports
// its state (in full when the number changes) only while someone watches.
func (s *Server) tellObservers(t *tab) {
	s.mu.Lock()
	n := len(t.watchers)
	s.mu.Unlock()
	_ = t.send(Message{Type: "observers", Len: n})
}

// report passes a tab's report of its state to the tabs observing it.
func (s *Server) report(t *tab, m Message) {
	s.mu.Lock()
	to := make([]*tab, 0, len(t.watchers))
	for w := range t.watchers {
		to = append(to, w)
	}
	s.mu.Unlock()
	for _, w := range to {
		_ = w.send(Message{Type: "report", From: t.id, Body: m.Body})
	}
}

// setImpairment changes the network between the tab and its Go peer,
// now and for its next ones.
func (s *Server) setImpairment(t *tab, m Message) error {
	if m.Impair == nil {
		return errors.New("no impairment given")
	}
	im := *m.Impair
	if im.Preset != "" && im.Preset != "custom" {
		p, ok := Preset(im.Preset)
		if !ok {
			return fmt.Errorf("no preset %q", im.Preset)
		}
		im = p
	}
	if err := im.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	t.impair = im
	s.mu.Unlock()
	transport := ""
	if gp := t.goPeer(); gp != nil {
		gp.setImpairment(im)
		transport = gp.kind
	}
	return t.send(Message{Type: "impair", Impair: &im, Transport: transport})
}

func (t *tab) impairment() Impairment {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.impair
}
