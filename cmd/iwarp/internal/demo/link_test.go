package demo

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

// A program joined with DialLink is observed by the page that types its
// code: the page gets the region it added and, for a segment placed in
// it, the event and the octets; when the region goes, the page is told.
func TestLinkObserved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startServer(t, Config{})
	link, err := DialLink(ctx, s.url, "test program")
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	code, err := link.Tab(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page := dialTab(t, ctx, s.url)
	page.send(ctx, Message{Type: "observe", Code: strconv.Itoa(code)})
	tab := page.wait(ctx, "observing").Peer
	// The first report says the program knows it is watched: it queues
	// events only then.
	page.waitFor(ctx, func(m Message) bool { return m.Type == "report" && m.From == tab })

	pd := rdmap.NewDevice(rdmap.DeviceConfig{}).NewProtectionDomain()
	mr, err := pd.RegisterMemory(make([]byte, 1024), 0x10000, rdmap.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	link.Add("connection 1", mr)
	data := []byte("placed where the page can see it")
	copy(mr.Bytes()[40:], data)
	link.Observer(mr).Observe(trace.Event{Kind: trace.SegmentPlaced, Tagged: true, STag: mr.STag(), TO: mr.Base() + 40, Len: uint32(len(data)), Last: true})

	var local struct {
		Events  []peer.Event  `json:"events"`
		Regions []peer.Region `json:"regions"`
	}
	report := func() {
		t.Helper()
		m := page.waitFor(ctx, func(m Message) bool { return m.Type == "report" && m.From == tab })
		local.Events, local.Regions = nil, nil
		b, _ := json.Marshal(m.Body["local"])
		if err := json.Unmarshal(b, &local); err != nil {
			t.Fatal(err)
		}
		if st, _ := m.Body["status"].(string); st == "" || st[:12] != "test program" {
			t.Errorf("status %q", st)
		}
	}
	var sawEvent, sawBytes bool
	for !(sawEvent && sawBytes) {
		report()
		for _, e := range local.Events {
			sawEvent = sawEvent || (e.Kind == "segment-placed" && e.Region == mr.STag() && e.Offset == 40)
		}
		for _, r := range local.Regions {
			sawBytes = sawBytes || (r.STag == mr.STag() && r.Name == "connection 1" && r.Len == LinkShown && r.Valid && string(r.Data[40:40+len(data)]) == string(data))
		}
	}
	link.Gone(mr)
	for gone := false; !gone; {
		report()
		for _, r := range local.Regions {
			gone = gone || (r.STag == mr.STag() && !r.Valid)
		}
	}
}
