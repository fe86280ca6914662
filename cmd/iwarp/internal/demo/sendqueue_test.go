package demo

import (
	"encoding/json"
	"strings"
	"testing"
)

// A tab that does not read is closed once the messages queued for it
// hold SendQueueBytes, however few they are: a relay of a body of "<" is
// six times the message that carried it, and 256 of them (SendQueue)
// from a tab sending 1 MiB messages would hold 1.5 GiB.
func TestSendQueueBytes(t *testing.T) {
	s, tabs := newSignalHarness(t, Config{}, false)
	a, b := tabs[0], tabs[1]
	s.receive(a, []byte(`{"type":"invite","purpose":"pair"}`))
	var code string
	for _, raw := range queued(a) {
		var m Message
		if err := json.Unmarshal(raw, &m); err == nil && m.Type == "code" {
			code = m.Code
		}
	}
	s.receive(b, []byte(`{"type":"join","code":"`+code+`"}`))
	queued(a)
	queued(b)
	msg := []byte(`{"type":"relay","to":2,"body":{"x":"` + strings.Repeat("<", 64<<10) + `"}}`)
	s.receive(a, msg)
	b.qmu.Lock()
	one := b.qlen
	b.qmu.Unlock()
	if one < 6*64<<10 {
		t.Fatalf("a relay of %d octets queued %d octets for its pair", len(msg), one)
	}
	relays, most := 1, one
	for ; b.ctx.Err() == nil && relays < 2*s.cfg.SendQueue; relays++ {
		s.receive(a, msg)
		b.qmu.Lock()
		most = max(most, b.qlen)
		b.qmu.Unlock()
	}
	if b.ctx.Err() == nil || most > s.cfg.SendQueueBytes || relays >= s.cfg.SendQueue {
		t.Fatalf("after %d relays of %d octets (%d queued each), the tab that does not read is closed: %v, with %d octets queued (at most %d)",
			relays, len(msg), one, b.ctx.Err() != nil, most, s.cfg.SendQueueBytes)
	}
	t.Logf("closed after %d relays, %d octets queued", relays, most)
	if a.ctx.Err() != nil {
		t.Fatal("the sending tab was closed too")
	}
}
