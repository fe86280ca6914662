package demo

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/internal/peer"
)

// The page's "bind" command: a window over the Go peer's memory is
// listed with its STag, TO, length and rights; a bind that does not make
// a window is refused with its reason and changes nothing; past
// peer.MaxWindows windows, the Go peer refuses more until one is
// deregistered.
func TestGoPeerBindCommand(t *testing.T) {
	s, tabs := newSignalHarness(t, Config{}, true)
	tb := tabs[0]
	g := tb.goPeer()
	send := func(msg string) (refusal string) {
		t.Helper()
		s.receive(tb, []byte(msg))
		for _, raw := range queued(tb) {
			var m Message
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			if m.Type == "error" {
				if m.Op != "bind" && !strings.HasPrefix(m.Text, "bad signaling message") {
					t.Errorf("the refusal of %s names op %q", msg, m.Op)
				}
				refusal = m.Text
			}
		}
		return refusal
	}
	windows := func() []peer.Region {
		var ws []peer.Region
		for _, r := range g.peers[0].Regions() {
			if r.Window {
				ws = append(ws, r)
			}
		}
		return ws
	}
	var mem peer.Region
	for _, r := range g.peers[0].Regions() {
		if r.Name == goMemName(0) {
			mem = r
		}
	}
	if e := send(fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"offset":16,"len":16}`, mem.STag)); e != "" {
		t.Fatalf("bind refused: %s", e)
	}
	ws := windows()
	if len(ws) != 1 {
		t.Fatalf("windows after a bind: %+v", ws)
	}
	w := ws[0]
	if w.Name != "window on Go peer memory" || w.Base != goMemBase+16 || w.Len != 16 || w.Access != "remote write" || !w.Valid || w.Parent != mem.STag {
		t.Errorf("the window: %+v", w)
	}
	for _, c := range []struct{ msg, why string }{
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"offset":1020,"len":5}`, mem.STag), "does not fit"},
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"offset":18446744073709551615,"len":2}`, mem.STag), "does not fit"},
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"len":-3}`, mem.STag), "does not fit"},
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"len":8,"access":"a"}`, mem.STag), "exceed"},
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"len":8,"access":"wl"}`, mem.STag), "remote rights only"},
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"len":8}`, w.STag), "is a memory window"},
		{`{"type":"go","op":"bind","stag":1,"len":8}`, "no region"},
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"len":8,"qp":1}`, mem.STag), "no queue pair 1"},
		{fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"offset":-1,"len":8}`, mem.STag), "bad signaling message"},
	} {
		if e := send(c.msg); !strings.Contains(e, c.why) {
			t.Errorf("%s: refused with %q, want %q", c.msg, e, c.why)
		}
	}
	if n := len(windows()); n != 1 {
		t.Fatalf("%d windows after the refused binds", n)
	}
	for i := 1; i < peer.MaxWindows; i++ {
		if e := send(fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"offset":%d,"len":1}`, mem.STag, i)); e != "" {
			t.Fatalf("window %d: %s", i+1, e)
		}
	}
	if e := send(fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"len":1}`, mem.STag)); !strings.Contains(e, "at most 8 memory windows; deregister one first") {
		t.Fatalf("window %d: refused with %q", peer.MaxWindows+1, e)
	}
	// The page's Invalidate and Deregister take a window's STag.
	if e := send(fmt.Sprintf(`{"type":"go","op":"invalidate","stag":%d}`, w.STag)); e != "" {
		t.Fatal(e)
	}
	if e := send(fmt.Sprintf(`{"type":"go","op":"deregister","stag":%d}`, w.STag)); e != "" {
		t.Fatal(e)
	}
	if e := send(fmt.Sprintf(`{"type":"go","op":"bind","stag":%d,"len":1}`, mem.STag)); e != "" {
		t.Fatalf("a bind after a deregister: %s", e)
	}
	checkSignalBounds(t, s, tabs)
}
