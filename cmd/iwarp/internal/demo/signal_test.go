package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// Two tabs talk only after both agreed: one asks for a code, the other
// types it. Offers, answers and relayed bodies go to the pair and to no
// one else; a third tab's are refused.
func TestPairingByCode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startServer(t, Config{})
	a := dialTab(t, ctx, s.url)
	b := dialTab(t, ctx, s.url)
	c := dialTab(t, ctx, s.url)

	// Before any pairing, nobody reaches anybody.
	c.send(ctx, Message{Type: "offer", To: a.id, SDP: "v=0 forged"})
	if m := c.wait(ctx, "error"); !strings.Contains(m.Text, "not paired") {
		t.Errorf("an offer to an unpaired tab: %+v", m)
	}
	c.send(ctx, Message{Type: "answer", To: a.id, SDP: "v=0 forged"})
	c.wait(ctx, "error")
	c.send(ctx, Message{Type: "relay", To: a.id, Body: map[string]any{"x": 1}})
	c.wait(ctx, "error")

	a.send(ctx, Message{Type: "invite", Purpose: "pair"})
	code := a.wait(ctx, "code")
	if code.Purpose != "pair" || len(code.Code) != 6 {
		t.Fatalf("code %+v", code)
	}
	// A wrong code, and one's own code, pair nobody.
	b.send(ctx, Message{Type: "join", Code: "000000"})
	b.wait(ctx, "error")
	a.send(ctx, Message{Type: "join", Code: code.Code})
	if m := a.wait(ctx, "error"); !strings.Contains(m.Text, "own code") {
		t.Errorf("joining one's own code: %+v", m)
	}
	// An observing code does not pair.
	a.send(ctx, Message{Type: "invite", Purpose: "observe"})
	ocode := a.wait(ctx, "code")
	b.send(ctx, Message{Type: "join", Code: ocode.Code})
	b.wait(ctx, "error")

	b.send(ctx, Message{Type: "join", Code: code.Code})
	if m := b.wait(ctx, "paired"); m.Peer != a.id || !m.Offerer {
		t.Errorf("b paired: %+v", m)
	}
	if m := a.wait(ctx, "paired"); m.Peer != b.id || m.Offerer {
		t.Errorf("a paired: %+v", m)
	}
	// The code is used up.
	c.send(ctx, Message{Type: "join", Code: code.Code})
	c.wait(ctx, "error")

	b.send(ctx, Message{Type: "offer", To: a.id, SDP: "v=0 from b"})
	if m := a.wait(ctx, "offer"); m.From != b.id || m.SDP != "v=0 from b" {
		t.Errorf("a got %+v", m)
	}
	a.send(ctx, Message{Type: "answer", To: b.id, SDP: "v=0 from a"})
	if m := b.wait(ctx, "answer"); m.From != a.id {
		t.Errorf("b got %+v", m)
	}
	// The third tab still reaches neither.
	c.send(ctx, Message{Type: "answer", To: b.id, SDP: "v=0 forged"})
	c.wait(ctx, "error")
	c.send(ctx, Message{Type: "relay", To: a.id, Body: map[string]any{"forged": true}})
	c.wait(ctx, "error")
	if m, ok := a.quiet(300*time.Millisecond, "relay"); ok {
		t.Errorf("a received a relay from outside its pair: %+v", m)
	}
	if m, ok := b.quiet(10*time.Millisecond, "answer"); ok {
		t.Errorf("b received a second answer: %+v", m)
	}
	// A leaving ends the pair.
	a.ws.CloseNow()
	if m := b.wait(ctx, "unpaired"); m.Peer != a.id {
		t.Errorf("b: %+v", m)
	}
}

// Observing needs the observed tab's consent: its observing code.
func TestObserveNeedsConsent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startServer(t, Config{})
	target := dialTab(t, ctx, s.url)
	watcher := dialTab(t, ctx, s.url)
	other := dialTab(t, ctx, s.url)

	watcher.send(ctx, Message{Type: "observe", Code: "123456"})
	if m := watcher.wait(ctx, "error"); !strings.Contains(m.Text, "no tab") {
		t.Errorf("observing without a code: %+v", m)
	}
	target.send(ctx, Message{Type: "invite", Purpose: "observe"})
	code := target.wait(ctx, "code").Code
	watcher.send(ctx, Message{Type: "observe", Code: code})
	if m := watcher.wait(ctx, "observing"); m.Peer != target.id {
		t.Errorf("observing %+v", m)
	}
	if m := target.wait(ctx, "observers"); m.Len != 1 {
		t.Fatalf("observers: %d, want 1", m.Len)
	}
	target.send(ctx, Message{Type: "report", Body: map[string]any{"status": "x"}})
	if m := watcher.wait(ctx, "report"); m.From != target.id || m.Body["status"] != "x" {
		t.Errorf("report %+v", m)
	}
	if m, ok := other.quiet(200*time.Millisecond, "report"); ok {
		t.Errorf("a tab that does not observe got a report: %+v", m)
	}
	// The observed tab withdraws its consent.
	target.send(ctx, Message{Type: "revoke", Purpose: "observe"})
	watcher.wait(ctx, "observe-ended")
	if m := target.wait(ctx, "observers"); m.Len != 0 {
		t.Errorf("observers after revoking: %d", m.Len)
	}
	target.send(ctx, Message{Type: "report", Body: map[string]any{"status": "y"}})
	if m, ok := watcher.quiet(200*time.Millisecond, "report"); ok {
		t.Errorf("a report after the consent was withdrawn: %+v", m)
	}
	watcher.send(ctx, Message{Type: "observe", Code: code})
	watcher.wait(ctx, "error")
}

// Codes cannot be guessed: after maxFailures wrong ones a minute, every
// attempt fails, the right code too.
func TestCodesCannotBeGuessed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startServer(t, Config{})
	a := dialTab(t, ctx, s.url)
	g := dialTab(t, ctx, s.url)
	a.send(ctx, Message{Type: "invite", Purpose: "pair"})
	code := a.wait(ctx, "code").Code
	for i := range maxFailures {
		guess := fmt.Sprintf("%06d", 100000+i)
		if guess == code {
			continue
		}
		g.send(ctx, Message{Type: "join", Code: guess})
		g.wait(ctx, "error")
	}
	g.send(ctx, Message{Type: "join", Code: code})
	if m := g.wait(ctx, "error"); !strings.Contains(m.Text, "too many") {
		t.Errorf("after %d wrong codes: %+v", maxFailures, m)
	}
}

// The Host of a request must be the server's own address (or a localhost
// form of it): a DNS-rebinding page, whose requests name its own host,
// gets nothing, and a cross-origin page's WebSocket is refused. A page
// of the server itself works meanwhile.
func TestForeignHostRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startServer(t, Config{})
	good := dialTab(t, ctx, s.url)
	_, port, _ := net.SplitHostPort(s.host)
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{s.host, true},
		{"localhost:" + port, true},
		{"LOCALHOST.:" + port, true},
		{"[::1]:" + port, true},
		{"127.0.0.2:" + port, true},
		{"evil.example:" + port, false},
		{"localhost.evil.example:" + port, false},
		{"127.0.0.1:1", false},
		{"127.0.0.1", false},
		{"192.0.2.2:" + port, false},
	} {
		resp, _ := get(t, s.url, "/", map[string]string{"Host": c.host})
		if (resp.StatusCode == 200) != c.ok {
			t.Errorf("Host %q: %d", c.host, resp.StatusCode)
		}
		if resp.StatusCode == 200 != s.allowedHost(c.host) {
			t.Errorf("Host %q: allowedHost disagrees", c.host)
		}
	}
	if s.allowedHost("") {
		t.Error("an empty Host is allowed")
	}
	// The signaling WebSocket with a foreign Host, and with a foreign Origin.
	for _, h := range []http.Header{
		{"Host": {"evil.example:" + port}},
		{"Origin": {"http://evil.example:" + port}},
		{"Origin": {"http://" + s.host + ".evil.example"}},
		{"Origin": {"null"}},
	} {
		opts := &websocket.DialOptions{HTTPHeader: h.Clone()}
		if hv := h.Get("Host"); hv != "" {
			opts.HTTPHeader.Del("Host")
			opts.Host = hv
		}
		ws, resp, err := websocket.Dial(ctx, "ws://"+s.host+"/ws", opts)
		if err == nil {
			ws.CloseNow()
			t.Errorf("WebSocket with %v accepted", h)
			continue
		}
		if resp == nil || (resp.StatusCode != http.StatusMisdirectedRequest && resp.StatusCode != http.StatusForbidden) {
			t.Errorf("WebSocket with %v: %v", h, err)
		}
	}
	// The well-behaved tab was never disturbed.
	good.send(ctx, Message{Type: "invite", Purpose: "pair"})
	good.wait(ctx, "code")
}

// Idle connections, that never send a request or stay open between
// requests, are closed: beyond MaxConns the oldest at once, the others
// after the header or idle timeout. A page is served throughout.
func TestManyIdleConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startServer(t, Config{MaxConns: 32, HeaderTimeout: time.Second, IdleTimeout: time.Second})
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 300 {
		c, err := net.Dial("tcp", s.host)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// Keep-alive connections left idle after one request, its response
	// read (or the connection closed, to make room for newer ones).
	for range 50 {
		c, err := net.Dial("tcp", s.host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /style.css HTTP/1.1\r\nHost: %s\r\n\r\n", s.host)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		idle = append(idle, c)
	}
	// The server marks a connection idle just after its response: the
	// tab below must come after that, or it would be the connection
	// waiting longest for a request, the first to be closed (connState).
	waitfor.True(t, 5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, ci := range s.conns {
			if ci.state == http.StateActive {
				return false
			}
		}
		return true
	}, "the server did not mark the keep-alive connections idle")
	start := time.Now()
	good := dialTab(t, ctx, s.url)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a tab took %v to connect beside %d idle connections", d, len(idle))
	}
	if resp, _ := get(t, s.url, "/", nil); resp.StatusCode != 200 {
		t.Errorf("GET /: %d", resp.StatusCode)
	}
	// All the idle ones are closed within the timeouts.
	deadline := time.Now().Add(5 * time.Second)
	open := 0
	buf := make([]byte, 4096)
	for _, c := range idle {
		for {
			c.SetReadDeadline(deadline)
			_, err := c.Read(buf)
			if err == nil {
				continue // the response to the keep-alive request
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
			break
		}
	}
	if open > 0 {
		t.Errorf("%d of %d idle connections still open after %v", open, len(idle), time.Since(start))
	}
	good.send(ctx, Message{Type: "invite", Purpose: "pair"})
	good.wait(ctx, "code")
}

// A tab that never reads what it is sent is closed once its queue is
// full or a write times out; nobody waits for it. Here ten tabs observe
// a tab that reports large bodies and never read them, while two other
// tabs pair and relay, and a new tab connects, all at once.
func TestTabThatNeverReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	s := startServer(t, Config{SendQueue: 16, WriteTimeout: 500 * time.Millisecond, Rate: 1000, Burst: 1000})
	src := dialTab(t, ctx, s.url)
	src.send(ctx, Message{Type: "invite", Purpose: "observe"})
	code := src.wait(ctx, "code").Code
	var sinks []*websocket.Conn
	for range 10 {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http")+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		b := []byte(`{"type":"observe","code":"` + code + `"}`)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, ws) // and never read
	}
	// Wait until all ten observe.
	src.waitFor(ctx, func(m Message) bool { return m.Type == "observers" && m.Len == 10 })
	big := strings.Repeat("x", 256<<10)
	stopFlood := make(chan struct{})
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for {
			select {
			case <-stopFlood:
				return
			default:
			}
			b := []byte(`{"type":"report","body":{"status":"` + big + `"}}`)
			if src.ws.Write(ctx, websocket.MessageText, b) != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { close(stopFlood); <-flooded }()

	// Meanwhile: a new tab connects at once, and a pair relays promptly.
	start := time.Now()
	a := dialTab(t, ctx, s.url)
	b := dialTab(t, ctx, s.url)
	if d := time.Since(start); d > time.Second {
		t.Errorf("two tabs took %v to connect", d)
	}
	a.send(ctx, Message{Type: "invite", Purpose: "pair"})
	b.send(ctx, Message{Type: "join", Code: a.wait(ctx, "code").Code})
	b.wait(ctx, "paired")
	for i := range 20 {
		at := time.Now()
		b.send(ctx, Message{Type: "relay", To: a.id, Body: map[string]any{"n": i}})
		a.wait(ctx, "relay")
		if d := time.Since(at); d > time.Second {
			t.Errorf("relay %d took %v", i, d)
		}
	}
	// The ten sinks are closed by the server.
	tabs := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.tabs)
	}
	if !waitfor.Until(10*time.Second, func() bool { return tabs() == 3 }) {
		t.Fatalf("%d tabs still open, want 3 (the ten that never read closed)", tabs())
	}
}

// Tabs and message rates are capped.
func TestTabAndRateCaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startServer(t, Config{MaxTabs: 3, Rate: 20, Burst: 20})
	a := dialTab(t, ctx, s.url)
	dialTab(t, ctx, s.url)
	dialTab(t, ctx, s.url)
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http")+"/ws", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a fourth tab: %v", err)
	}
	for range 200 {
		a.send(ctx, Message{Type: "ping"})
	}
	if m := a.wait(ctx, "error"); !strings.Contains(m.Text, "too many messages") {
		t.Errorf("flood: %+v", m)
	}
	time.Sleep(time.Second) // the bucket refills
	a.send(ctx, Message{Type: "invite", Purpose: "pair"})
	a.wait(ctx, "code")
}
