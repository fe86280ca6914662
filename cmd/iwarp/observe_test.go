package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/demo"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/web"
)

// serve --observe joins a running demo as a tab; a page observing that
// tab receives the serve's region and the placements of a client's RDMA
// Write into it, with the written octets.
func TestServeObservedByDemo(t *testing.T) {
	srvURL := startDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	s := startServe(t, "--listen", "tcp://127.0.0.1:0", "--mr-size", "4096", "--observe", strings.TrimPrefix(srvURL, "http://"))
	ev := s.next("observed")
	code := int(ev["tab"].(float64)) // the observing code: the serve's consent

	// The page: it observes the serve's tab.
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srvURL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(4 << 20)
	send := func(m demo.Message) {
		b, _ := json.Marshal(m)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	send(demo.Message{Type: "observe", Code: strconv.Itoa(code)})
	// The serve's first report (its regions, in full) says it knows it is
	// watched.
	tab := 0
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no first report: %v", err)
		}
		var m demo.Message
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if m.Type == "error" {
			t.Fatalf("observe: %s", m.Text)
		}
		if m.Type == "observing" {
			tab = m.Peer
		}
		if m.Type == "report" && m.From == tab && tab != 0 {
			break
		}
	}

	cl := dialServer(t, s.url, endpoint.Flags{})
	s.next("connected")
	data := []byte("placed where the page can see it")
	if err := cl.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: cl.reg(data), Length: uint32(len(data))}}, RemoteSTag: cl.stag, RemoteTO: cl.to + 40}); err != nil {
		t.Fatal(err)
	}
	cl.wait(cl.scq)

	var sawPlacement, sawBytes bool
	for !(sawPlacement && sawBytes) {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no report showing the Write (placement %v, bytes %v): %v", sawPlacement, sawBytes, err)
		}
		var m struct {
			Type string `json:"type"`
			From int    `json:"from"`
			Body struct {
				Local struct {
					Events []struct {
						Kind   string `json:"kind"`
						Region uint32 `json:"region"`
						Offset uint64 `json:"offset"`
						Len    uint32 `json:"len"`
					} `json:"events"`
					Regions []struct {
						STag uint32 `json:"stag"`
						Len  int    `json:"len"`
						Data string `json:"data"`
					} `json:"regions"`
				} `json:"local"`
			} `json:"body"`
		}
		if json.Unmarshal(b, &m) != nil || m.Type != "report" || m.From != tab {
			continue
		}
		for _, e := range m.Body.Local.Events {
			if e.Kind == "segment-placed" && e.Region == cl.stag && e.Offset == 40 && e.Len == uint32(len(data)) {
				sawPlacement = true
			}
		}
		for _, r := range m.Body.Local.Regions {
			raw, _ := base64.StdEncoding.DecodeString(r.Data)
			if r.STag == cl.stag && r.Len == demo.LinkShown && len(raw) == demo.LinkShown && string(raw[40:40+len(data)]) == string(data) {
				sawBytes = true
			}
		}
	}
	cl.close()
	s.stop()
}

// startDemo runs a demo server (the page's files only, no browser peer)
// on a loopback port until the test ends, and returns its URL.
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
	d := demo.New(demo.Config{Assets: assets, Addr: ln.Addr()})
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("demo: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
