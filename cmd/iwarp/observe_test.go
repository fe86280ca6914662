package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/iwarpgo/iwarp/rdmap"
)

// serve --observe joins a running demo as a tab; a page observing that
// tab receives the serve's region and the placements of a client's RDMA
// Write into it, with the written octets.
func TestServeObservedByDemo(t *testing.T) {
	d := newDemoServer(testAssets(t), io.Discard)
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	s := startServe(t, "--listen", "tcp://127.0.0.1:0", "--mr-size", "4096", "--observe", strings.TrimPrefix(srv.URL, "http://"))
	ev := s.next("observed")
	tab := int(ev["tab"].(float64))

	// The page: it observes the serve's tab.
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(4 << 20)
	send := func(m sigMsg) {
		b, _ := json.Marshal(m)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	send(sigMsg{Type: "observe", To: tab})
	// The serve's first report (its regions, in full) says it knows it is
	// watched.
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no first report: %v", err)
		}
		var m sigMsg
		if json.Unmarshal(b, &m) == nil && m.Type == "report" && m.From == tab {
			break
		}
	}

	cl := dialServer(t, s.url, linkFlags{})
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
			if r.STag == cl.stag && r.Len == observeShown && len(raw) == observeShown && string(raw[40:40+len(data)]) == string(data) {
				sawBytes = true
			}
		}
	}
	cl.close()
	s.stop()
}
