package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

// LinkShown is how much of each region a watching page is shown: the
// page draws every octet as a cell.
const LinkShown = 256

// linkKept is how many regions a watching page is shown at most, the
// regions of closed connections going first.
const linkKept = 8

// Link streams what a Go program's queue pairs see to a running demo
// server (`iwarp serve --observe`): the program joins the demo's
// signaling as a tab, and a page that observes that tab draws the
// program's regions and every segment placed in them, its completions and
// Terminates, in the same picture as a browser peer's. Observing needs
// consent: the program asks the demo for an observing code (joining is
// its consent), and a page that types the code observes it. It reports
// only while some page watches.
//
//	link, err := demo.DialLink(ctx, "127.0.0.1:8080", "iwarp serve")
//	code, err := link.Tab(ctx) // tell the user
//	link.Add("connection 1", mr)
//	qp, err := pd.NewQueuePair(rdmap.QPConfig{..., Observer: link.Observer(mr)})
type Link struct {
	ws     *websocket.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	tab    chan int // the observing code the demo gave this program, once
	who    string   // the program's name, in the page's status line

	mu       sync.Mutex // guards the fields below
	watchers int
	full     bool // send every region in the next report
	changed  bool // regions changed since the last report
	events   []peer.Event
	regions  map[uint32]*linkRegion
	order    []uint32
}

type linkRegion struct {
	peer.Region
	base  uint64
	valid bool
}

// DialLink joins the demo at addr (host:port, or an http:// URL) as the
// program who.
func DialLink(ctx context.Context, addr, who string) (*Link, error) {
	u := strings.TrimSuffix(addr, "/")
	switch {
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	case !strings.Contains(u, "://"):
		u = "ws://" + u
	}
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	ws, _, err := websocket.Dial(dctx, u+"/ws", nil)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the demo at %s to be observed: %w", addr, err)
	}
	ws.SetReadLimit(1 << 20)
	lctx, cancel := context.WithCancel(context.Background())
	l := &Link{ws: ws, cancel: cancel, tab: make(chan int, 1), who: who, regions: map[uint32]*linkRegion{}}
	l.wg.Add(2)
	go l.readLoop(lctx)
	go l.reportLoop(lctx)
	return l, nil
}

// Tab waits for the observing code the demo gave the program (six
// digits): a page that types it under "Observe a tab" watches it.
func (l *Link) Tab(ctx context.Context) (int, error) {
	select {
	case id := <-l.tab:
		l.tab <- id
		return id, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (l *Link) readLoop(ctx context.Context) {
	defer l.wg.Done()
	for {
		_, b, err := l.ws.Read(ctx)
		if err != nil {
			return
		}
		var m Message
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		switch m.Type {
		case "welcome":
			b, _ := json.Marshal(Message{Type: "invite", Purpose: "observe"})
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := l.ws.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return
			}
		case "code":
			if code, err := strconv.Atoi(m.Code); err == nil && m.Purpose == "observe" {
				select {
				case l.tab <- code:
				default:
				}
			}
		case "observers":
			l.mu.Lock()
			l.watchers, l.full = m.Len, true
			if m.Len == 0 {
				l.events = nil
			}
			l.mu.Unlock()
		}
	}
}

// reportLoop sends what happened every 50 ms while a page watches, as a
// tab's report: the program's side is the picture's "local" side.
func (l *Link) reportLoop(ctx context.Context) {
	defer l.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.watchers == 0 || (len(l.events) == 0 && !l.full && !l.changed) {
			l.mu.Unlock()
			continue
		}
		local := map[string]any{"events": l.events}
		if l.full || l.changed {
			regs := []peer.Region{}
			for _, stag := range l.order {
				r := l.regions[stag]
				c := r.Region
				c.Data = append([]byte(nil), r.Data...)
				c.Valid = r.valid
				regs = append(regs, c)
			}
			local["regions"] = regs
		}
		l.events, l.full, l.changed = nil, false, false
		n := len(l.order)
		l.mu.Unlock()
		body := map[string]any{
			"local":  local,
			"remote": map[string]any{"events": []peer.Event{}},
			"status": fmt.Sprintf("%s: %d region(s) of its connections (the first %d octets of each shown)", l.who, n, LinkShown),
		}
		b, err := json.Marshal(Message{Type: "report", Body: body})
		if err != nil {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = l.ws.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			return
		}
	}
}

// Add shows a region (its first LinkShown octets) to the watching pages
// under name.
func (l *Link) Add(name string, mr *rdmap.MemoryRegion) {
	n := min(mr.Len(), LinkShown)
	r := &linkRegion{base: mr.Base(), valid: true, Region: peer.Region{
		Name: name, STag: mr.STag(), Base: mr.Base(), Len: n,
		Access: mr.Access().String(), Data: append([]byte(nil), mr.Bytes()[:n]...),
	}}
	l.mu.Lock()
	l.regions[mr.STag()] = r
	l.order = append(l.order, mr.STag())
	// A long-running program shows its newest connections: regions of
	// closed ones beyond linkKept go.
	for i := 0; len(l.order) > linkKept && i < len(l.order); {
		if old := l.regions[l.order[i]]; !old.valid {
			delete(l.regions, l.order[i])
			l.order = append(l.order[:i], l.order[i+1:]...)
			continue
		}
		i++
	}
	l.changed = true
	l.mu.Unlock()
}

// Gone marks a region as no longer valid.
func (l *Link) Gone(mr *rdmap.MemoryRegion) {
	l.mu.Lock()
	if r := l.regions[mr.STag()]; r != nil {
		r.valid, l.changed = false, true
	}
	l.mu.Unlock()
}

// Observer returns the trace observer for the queue pair whose region is
// mr.
// It runs on the goroutine that placed the bytes, so copying them here
// does not race with placement.
func (l *Link) Observer(mr *rdmap.MemoryRegion) trace.Observer {
	return trace.Func(func(e trace.Event) {
		ev := peer.EventOf(e)
		l.mu.Lock()
		defer l.mu.Unlock()
		// The shown octets are kept up to date whether or not a page
		// watches, so that one that starts watching sees them.
		if (e.Kind == trace.SegmentPlaced || e.Kind == trace.AtomicExecuted) && e.Tagged && e.STag == mr.STag() {
			ev.Region, ev.Offset = e.STag, e.TO-mr.Base()
			if r := l.regions[e.STag]; r != nil && ev.Offset < uint64(len(r.Data)) {
				end := min(ev.Offset+uint64(e.Len), uint64(len(r.Data)))
				copy(r.Data[ev.Offset:end], mr.Bytes()[ev.Offset:end])
				l.changed = true
			}
		}
		if l.watchers > 0 && len(l.events) < 4096 {
			l.events = append(l.events, ev)
		}
	})
}

// Close leaves the demo.
func (l *Link) Close() {
	l.cancel()
	l.ws.Close(websocket.StatusNormalClosure, l.who+" stopped")
	l.wg.Wait()
}
