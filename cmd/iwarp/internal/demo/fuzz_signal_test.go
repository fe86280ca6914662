package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/rdmap"
)

// The signaling harness: a Server with tabs that have no WebSocket. The
// harness hands a tab's messages to Server.receive, as serveWS does after
// the rate limit, and reads what the server queued for each tab.

// harnessTabs is how many tabs the harness opens (ids 1, 2, 3).
const harnessTabs = 3

func newSignalHarness(tb testing.TB, cfg Config, withGoPeer bool) (*Server, []*tab) {
	tb.Helper()
	cfg.Addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	s := New(cfg)
	var tabs []*tab
	for range harnessTabs {
		ctx, cancel := context.WithCancel(context.Background())
		tb.Cleanup(cancel)
		t := &tab{s: s, ctx: ctx, end: cancel, q: make(chan []byte, s.cfg.SendQueue),
			limit:  &bucket{rate: s.cfg.Rate, burst: float64(s.cfg.Burst), have: float64(s.cfg.Burst), at: time.Now()},
			impair: s.cfg.Impairment}
		s.mu.Lock()
		s.nextID++
		t.id = s.nextID
		s.tabs[t.id] = t
		s.mu.Unlock()
		tabs = append(tabs, t)
	}
	if withGoPeer {
		g, err := newGoPeer(tabs[0], "mpa", 1)
		if err != nil {
			tb.Fatal(err)
		}
		g.closers = []func(){g.closeQPs}
		tabs[0].setGoPeer(g)
	}
	tb.Cleanup(func() {
		for _, t := range tabs {
			s.leave(t)
		}
	})
	return s, tabs
}

// queued takes what the server queued for t, as raw messages.
func queued(t *tab) [][]byte {
	var out [][]byte
	for {
		select {
		case b := <-t.q:
			t.dequeued(b)
			out = append(out, b)
		default:
			return out
		}
	}
}

// signalState is what the harness knows of the server before a message:
// enough to say whether handle must refuse it.
type signalState struct {
	pair     map[int]int          // tab id -> its pair's id
	watchers map[int]map[int]bool // tab id -> ids of the tabs observing it
	codes    map[string]invite
	locked   bool // too many wrong codes: every lookup fails
	goPeers  map[int]*goPeer
}

func snapshot(s *Server, tabs []*tab) signalState {
	st := signalState{pair: map[int]int{}, watchers: map[int]map[int]bool{}, codes: map[string]invite{}, goPeers: map[int]*goPeer{}}
	s.mu.Lock()
	for _, t := range tabs {
		if t.pair != nil {
			st.pair[t.id] = t.pair.id
		}
		st.watchers[t.id] = map[int]bool{}
		for w := range t.watchers {
			st.watchers[t.id][w.id] = true
		}
	}
	for c, inv := range s.codes {
		st.codes[c] = *inv
	}
	st.locked = time.Since(s.failAt) <= time.Minute && s.failed >= maxFailures
	s.mu.Unlock()
	for _, t := range tabs {
		st.goPeers[t.id] = t.goPeer()
	}
	return st
}

// mustRefuse says whether handle must refuse m from tab from (refuse),
// when the harness can tell (known): the refusals web/README.md and
// docs/security.md describe.
func (st signalState) mustRefuse(from *tab, m Message) (refuse, known bool) {
	lookup := func(purpose string) bool {
		inv, ok := st.codes[m.Code]
		return !st.locked && ok && inv.purpose == purpose && inv.tab != from
	}
	forward := func() bool { return st.pair[from.id] == 0 || st.pair[from.id] != m.To }
	switch m.Type {
	case "ping", "revoke", "unpair", "report", "hangup", "mpa":
		return false, true
	case "invite":
		return m.Purpose != "pair" && m.Purpose != "observe", true
	case "join":
		return !lookup("pair"), true
	case "observe":
		return m.Code != "" && !lookup("observe"), true
	case "offer":
		if m.To == 0 {
			_, _, err := offerParams(m)
			return err != nil, true
		}
		return forward(), true
	case "answer", "relay":
		return forward(), true
	case "impair":
		if m.Impair == nil {
			return true, true
		}
		im := *m.Impair
		if im.Preset != "" && im.Preset != "custom" {
			p, ok := Preset(im.Preset)
			if !ok {
				return true, true
			}
			im = p
		}
		return im.Check() != nil, true
	case "go":
		g := st.goPeers[from.id]
		if g == nil || m.QP < 0 || m.QP >= len(g.peers) {
			return true, true
		}
		switch m.Op {
		case "hold":
			return m.QP >= len(g.holds), m.QP >= len(g.holds)
		case "increment":
			return false, true
		case "register":
			n := m.Len
			if n == 0 {
				n = goMemLen
			}
			if n < 0 || n > peer.MaxRegionLen {
				return true, true
			}
			if _, err := peer.ParseAccess(m.Access); err != nil {
				return true, true
			}
			return false, false // the region count decides
		case "post-recv":
			if m.Len < 0 || m.Len > peer.MaxRegionLen {
				return true, true
			}
			return false, false
		case "bind":
			return bindRefused(g.peers[m.QP].Regions(), m), true
		case "deregister", "invalidate":
			return false, false
		}
		return true, true
	}
	return true, true
}

// bindRefused says whether the Go peer must refuse m, a "bind", given
// its queue pair's regions rs: the refusals peer.BindWindow lists.
func bindRefused(rs []peer.Region, m Message) bool {
	access := m.Access
	if access == "" {
		access = "w"
	}
	a, err := peer.ParseAccess(access)
	if err != nil || a == 0 || a&rdmap.LocalWrite != 0 {
		return true
	}
	windows := 0
	var target *peer.Region
	for i, r := range rs {
		if r.Window {
			windows++
		}
		if r.STag == m.STag {
			target = &rs[i]
		}
	}
	if windows >= peer.MaxWindows || target == nil || target.Window || target.Recv || !target.Valid {
		return true
	}
	size := uint64(target.Len)
	if m.Len <= 0 || m.Offset >= size || uint64(m.Len) > size-m.Offset {
		return true
	}
	for right, words := range map[rdmap.Access]string{rdmap.RemoteRead: "remote read", rdmap.RemoteWrite: "remote write", rdmap.RemoteAtomic: "remote atomic"} {
		if a&right != 0 && !strings.Contains(target.Access, words) {
			return true
		}
	}
	return false
}

// Bounds the harness holds the server to.
const (
	// maxErrorAnswer is the most an error answer takes, whatever the
	// message it refuses.
	maxErrorAnswer = 4 << 10
	// maxQueuedMessage is the most one queued message takes: the page
	// reads messages of up to 8 MiB (page.go).
	maxQueuedMessage = 8 << 20
)

// signalSeeds are scripts of messages: each is the sending tab (0 to 2)
// and the message. "$pair" and "$observe" stand for the newest code of
// that kind the server gave out.
var signalSeeds = []struct {
	goPeer bool
	msgs   []signalStep
}{
	{false, []signalStep{
		{0, `{"type":"invite","purpose":"pair"}`},
		{1, `{"type":"join","code":"$pair"}`},
		{1, `{"type":"offer","to":1,"sdp":"v=0\r\n"}`},
		{0, `{"type":"answer","to":2,"sdp":"v=0\r\n"}`},
		{2, `{"type":"relay","to":1,"body":{"forged":true}}`},
		{0, `{"type":"relay","to":2,"body":{"x":[1,2,"<>&"]}}`},
		{1, `{"type":"unpair"}`},
		{0, `{"type":"relay","to":2,"body":{}}`},
	}},
	{false, []signalStep{
		{0, `{"type":"invite","purpose":"observe"}`},
		{2, `{"type":"observe","code":"$observe"}`},
		{0, `{"type":"report","body":{"status":"x"}}`},
		{0, `{"type":"revoke","purpose":"observe"}`},
		{0, `{"type":"report","body":{"status":"y"}}`},
		{2, `{"type":"observe","code":""}`},
		{2, `{"type":"join","code":"$observe"}`},
	}},
	{false, []signalStep{
		{0, `{"type":"join","code":"000000"}`},
		{0, `{"type":"invite","purpose":"pair"}`},
		{0, `{"type":"join","code":"$pair"}`},
		{1, `{"type":"invite","purpose":"party"}`},
		{1, `{"type":"mpa","mulpdu":100,"markers":true}`},
		{1, `{"type":"mpa","mulpdu":-5}`},
		{2, `{"type":"offer","streams":3}`},
		{2, `{"type":"offer","mulpdu":47}`},
		{2, `{"type":"offer","mulpdu":1e9}`},
		{2, `{"type":"impair","impair":{"loss":51}}`},
		{2, `{"type":"impair","impair":{"preset":"bad path"}}`},
		{2, `{"type":"impair","impair":{"preset":"nowhere"}}`},
		{2, `{"type":"impair"}`},
		{2, `{"type":"go","op":"register"}`},
		{2, `{"type":"hangup"}`},
		{2, `{"type":"ping"}`},
	}},
	{true, []signalStep{
		{0, `{"type":"go","op":"register","len":100,"base":4096,"access":"rwl"}`},
		{0, `{"type":"go","op":"register","len":5000}`},
		{0, `{"type":"go","op":"register","access":"x"}`},
		{0, `{"type":"go","op":"post-recv","len":64}`},
		{0, `{"type":"go","op":"deregister","stag":1}`},
		{0, `{"type":"go","op":"invalidate","stag":4096}`},
		{0, `{"type":"go","op":"increment"}`},
		{0, `{"type":"go","op":"hold","ms":100}`},
		{0, `{"type":"go","op":"format","qp":0}`},
		{0, `{"type":"go","op":"register","qp":1}`},
		{0, `{"type":"go","op":"register","qp":-1}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"offset":16,"len":16,"access":"w"}`},
		{0, `{"type":"go","op":"bind","stag":$window,"len":8}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"offset":1020,"len":5}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"len":8,"access":"a"}`},
		{0, `{"type":"go","op":"invalidate","stag":$mem}`},
		{0, `{"type":"go","op":"invalidate","stag":$window}`},
		{0, `{"type":"go","op":"invalidate","stag":$window}`},
		{0, `{"type":"go","op":"deregister","stag":$window}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"offset":18446744073709551615,"len":2}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"offset":1000,"len":9223372036854775807}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"len":-3}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"len":8,"access":"rwal"}`},
		{0, `{"type":"go","op":"bind","stag":$mem,"len":8,"access":"` + strings.Repeat("\u00ff", 300) + `"}`},
		{0, `{"type":"go","op":"bind","stag":4294967295,"len":8}`},
		{0, `{"type":"go","op":"bind","len":8}`},
		{0, `{"type":"go","op":"bind","stag":1,"offset":-1,"len":8}`},
		{0, `{"type":"go","op":"bind","stag":1,"offset":"16","len":8}`},
		{0, `{"type":"go","op":"bind","stag":1,"offset":1.5,"len":8}`},
		{0, `{"type":"impair","impair":{"preset":"custom","delay":20}}`},
		{0, `{"type":"hangup"}`},
		{0, `{"type":"go","op":"increment"}`},
	}},
	{false, []signalStep{
		{0, ``},
		{0, `null`},
		{0, `[]`},
		{0, `{"type":1}`},
		{0, `{"type":"ping","id":"x"}`},
		{0, `{"type":"ping","stag":-1}`},
		{0, `{"type":"ping","len":1e400}`},
		{0, `{"TYPE":"invite","PURPOSE":"pair"}`},
		{0, `{"type":"ping","type":"nosuchtype"}`},
		{0, `{"type":"` + strings.Repeat("<", 3000) + `"}`},
		{0, `{"type":"invite","purpose":"` + strings.Repeat("\u2028", 1000) + `"}`},
		{0, `{"type":"go","op":"` + strings.Repeat("\xff", 2000) + `"}`},
		{0, `{"type":"ping","id":` + strings.Repeat("9", 3000) + `}`},
		{0, `{"type":"join","code":"` + strings.Repeat("\\u0001", 500) + `"}`},
	}},
}

type signalStep struct {
	from int
	msg  string
}

// encodeSignalScript is the fuzz input of a script: a flag octet (1: the
// first tab has a Go peer), then per message the sending tab, two
// octets of length and the message.
func encodeSignalScript(goPeer bool, steps []signalStep) []byte {
	var b []byte
	if goPeer {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, st := range steps {
		b = append(b, byte(st.from))
		b = binary.BigEndian.AppendUint16(b, uint16(len(st.msg)))
		b = append(b, st.msg...)
	}
	return b
}

// FuzzSignalMessages plays three tabs that send whatever they like on
// the signaling connection, the first perhaps with a Go peer, and checks
// after each message: nothing panics; a message that does not decode is
// answered with one error {text} and nothing else happens; every error
// answer names the refused message's type and op, and comes exactly when
// handle must refuse it (as far as the harness can tell); an error
// answer stays short whatever the message held; offers, answers and
// relays reach only the sender's pair, reports only its observers; and
// the server's bounds hold (a code of each kind and a ticket per tab,
// symmetric pairs, the Go peer's regions and memory windows, each
// window inside its region, every queued message valid JSON within what
// the page reads). Scripts may name the Go peer's memory and its newest
// window as $mem and $window (stagCodes).
func FuzzSignalMessages(f *testing.F) {
	for _, sc := range signalSeeds {
		f.Add(encodeSignalScript(sc.goPeer, sc.msgs))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		s, tabs := newSignalHarness(t, Config{}, in[0]&1 != 0)
		in = in[1:]
		codes := map[string]string{}
		for steps := 0; len(in) >= 3 && steps < 64; steps++ {
			from := tabs[int(in[0])%len(tabs)]
			n := min(int(binary.BigEndian.Uint16(in[1:3])), len(in)-3)
			b := bytes.Clone(in[3 : 3+n])
			in = in[3+n:]
			stagCodes(tabs[0], codes)
			for purpose, c := range codes {
				b = bytes.ReplaceAll(b, []byte("$"+purpose), []byte(c))
			}
			checkSignalStep(t, s, tabs, from, b, codes)
		}
	})
}

// stagCodes sets "$mem" and "$window" to the STags, in decimal, of the
// Go peer's first region and of its newest memory window, if t has a Go
// peer: a script can then bind, write and invalidate what the server
// really holds.
func stagCodes(t *tab, codes map[string]string) {
	g := t.goPeer()
	if g == nil {
		return
	}
	for _, r := range g.peers[0].Regions() {
		switch {
		case r.Window:
			codes["window"] = fmt.Sprint(r.STag)
		case r.Name == goMemName(0):
			codes["mem"] = fmt.Sprint(r.STag)
		}
	}
}

func checkSignalStep(t *testing.T, s *Server, tabs []*tab, from *tab, b []byte, codes map[string]string) {
	t.Helper()
	before := snapshot(s, tabs)
	var m Message
	decodeErr := json.Unmarshal(b, &m)
	if decodeErr == nil && m.Type == "offer" && m.To == 0 {
		if _, _, err := offerParams(m); err == nil {
			return // a valid offer to the Go peer starts WebRTC: not here
		}
	}
	s.receive(from, b)
	got := map[int][]Message{}
	for _, tb := range tabs {
		for _, raw := range queued(tb) {
			var q Message
			if err := json.Unmarshal(raw, &q); err != nil {
				t.Fatalf("tab %d was sent %q, not a message: %v", tb.id, raw, err)
			}
			if len(raw) > maxQueuedMessage || (q.Type == "error" && len(raw) > maxErrorAnswer) {
				t.Fatalf("tab %d was sent a %s message of %d octets (from a message of %d)", tb.id, q.Type, len(raw), len(b))
			}
			if q.Type == "code" {
				codes[q.Purpose] = q.Code
			}
			got[tb.id] = append(got[tb.id], q)
		}
	}
	if decodeErr != nil {
		ms := got[from.id]
		if len(ms) != 1 || ms[0].Type != "error" || !strings.HasPrefix(ms[0].Text, "bad signaling message: ") || ms[0].Op != "" || ms[0].Purpose != "" {
			t.Fatalf("%q does not decode (%v) and got %+v", b, decodeErr, ms)
		}
		for id, ms := range got {
			if id != from.id && len(ms) > 0 {
				t.Fatalf("a message that does not decode reached tab %d: %+v", id, ms)
			}
		}
		return
	}
	refused := false
	for _, q := range got[from.id] {
		if q.Type != "error" {
			continue
		}
		refused = true
		if q.Purpose != clipEcho(m.Type) || q.Op != clipEcho(m.Op) || q.Text == "" {
			t.Fatalf("%q refused with %+v: want purpose %q, op %q and a text", b, q, clipEcho(m.Type), clipEcho(m.Op))
		}
	}
	if want, known := before.mustRefuse(from, m); known && want != refused {
		t.Fatalf("%q from tab %d: refused %v, want %v (answers %+v)", b, from.id, refused, want, got[from.id])
	}
	for id, ms := range got {
		for _, q := range ms {
			switch q.Type {
			case "offer", "answer", "relay":
				if q.From == 0 && q.Type == "answer" && id == from.id {
					continue // the Go peer's answer
				}
				if q.From != from.id || before.pair[id] != from.id {
					t.Fatalf("tab %d got %s %+v, from tab %d, its pair being %d", id, q.Type, q, from.id, before.pair[id])
				}
			case "report":
				if q.From != from.id || !before.watchers[from.id][id] {
					t.Fatalf("tab %d got a report from tab %d, which it does not observe", id, from.id)
				}
			}
		}
	}
	checkSignalBounds(t, s, tabs)
}

// checkSignalBounds checks what the server holds for the tabs.
func checkSignalBounds(t *testing.T, s *Server, tabs []*tab) {
	t.Helper()
	s.mu.Lock()
	perTab := map[*tab]map[string]int{}
	for c, inv := range s.codes {
		if inv.code != c || (inv.purpose != "pair" && inv.purpose != "observe") {
			t.Fatalf("code %q: %+v", c, inv)
		}
		if perTab[inv.tab] == nil {
			perTab[inv.tab] = map[string]int{}
		}
		if perTab[inv.tab][inv.purpose]++; perTab[inv.tab][inv.purpose] > 1 {
			t.Fatalf("tab %d holds two %s codes", inv.tab.id, inv.purpose)
		}
	}
	tickets := map[*tab]int{}
	for _, tk := range s.tickets {
		if tickets[tk.tab]++; tickets[tk.tab] > 1 {
			t.Fatalf("tab %d holds two tickets", tk.tab.id)
		}
		if tk.mulpdu != peer.MPAMULPDU(tk.mulpdu) {
			t.Fatalf("ticket with MULPDU %d", tk.mulpdu)
		}
	}
	for _, tb := range tabs {
		if tb.pair != nil && (tb.pair.pair != tb || tb.pair == tb) {
			t.Fatalf("tab %d's pairing is not mutual", tb.id)
		}
		for w := range tb.watchers {
			if w.watching != tb || w == tb {
				t.Fatalf("tab %d observes tab %d without its watching it", w.id, tb.id)
			}
		}
		if err := tb.impair.Check(); err != nil {
			t.Fatalf("tab %d's impairment: %v", tb.id, err)
		}
		if tb.ctx.Err() != nil {
			t.Fatalf("tab %d was closed", tb.id)
		}
		tb.qmu.Lock()
		if tb.qlen != 0 || len(tb.q) != 0 {
			t.Fatalf("tab %d: %d messages, %d octets still queued", tb.id, len(tb.q), tb.qlen)
		}
		tb.qmu.Unlock()
	}
	s.mu.Unlock()
	if g := tabs[0].goPeer(); g != nil {
		for i, p := range g.peers {
			rs := p.Regions()
			recv, windows := 0, 0
			byTag := map[uint32]peer.Region{}
			for _, r := range rs {
				if r.Len > peer.MaxRegionLen {
					t.Fatalf("queue pair %d: a region of %d octets", i, r.Len)
				}
				if r.Recv {
					recv++
				}
				if r.Window {
					windows++
				} else {
					byTag[r.STag] = r
				}
			}
			if len(rs)-recv-windows > peer.MaxRegions || recv > peer.MaxRecvBuffers || windows > peer.MaxWindows {
				t.Fatalf("queue pair %d: %d regions, %d of them receive buffers, %d memory windows", i, len(rs), recv, windows)
			}
			for _, w := range rs {
				if !w.Window {
					continue
				}
				r, ok := byTag[w.Parent]
				if !ok || r.Recv || w.Len <= 0 || w.Base < r.Base || w.Base-r.Base+uint64(w.Len) > uint64(r.Len) {
					t.Fatalf("queue pair %d: window %+v over %+v", i, w, r)
				}
			}
		}
	}
}
