package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/internal/peer"
)

// Layout of the Go peer's memory when a page connects, per queue pair.
const (
	goMemLen  = 1024 // more than one SCTP packet's worth: a Write of it can arrive out of order
	goMemBase = 0x1000
	goRecvLen = 64
	goRecvs   = 2
	// The shared counter: one 64-bit word that the page's Atomic
	// Operations (RFC 7306) and the Go peer's own atomic adds change.
	goCounterBase = 0x8000
	goFlushGap    = 40 * time.Millisecond // events are sent to the page in batches
	statsGap      = 250 * time.Millisecond
	maxHold       = 10 * time.Second
)

// Names of the Go peer's first region, per queue pair.
func goMemName(qp int) string {
	if qp == 0 {
		return "Go peer memory"
	}
	return fmt.Sprintf("Go peer memory, stream %d", streamID(qp))
}

// goCounterName names the Go peer's counter region (queue pair 0).
const goCounterName = "Go peer counter"

// streamID is the data channel (SCTP stream) of queue pair qp: 1, 3, ...
func streamID(qp int) uint16 { return uint16(1 + 2*qp) }

// link is the impaired network beneath a Go peer.
type link interface {
	Set(Impairment)
	Stats() (Impairment, NetStats)
}

// goPeer is the demo's Go end of a stream with one page: one rdmap queue
// pair per DDP stream (peer.Peer), on a transport.
type goPeer struct {
	id     int // numbers the tab's Go peers: the page ignores a replaced one's last events
	t      *tab
	kind   string // "webrtc" or "mpa"
	peers  []*peer.Peer
	link   link
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	closers []func() // the transport's, in order
	holds   []*holdStream
	counter uint32 // the STag of queue pair 0's counter region
}

func newGoPeer(t *tab, kind string, streams int) (*goPeer, error) {
	ctx, cancel := context.WithCancel(t.ctx)
	t.s.mu.Lock()
	t.s.nextPeer++
	id := t.s.nextPeer
	t.s.mu.Unlock()
	g := &goPeer{id: id, t: t, kind: kind, ctx: ctx, cancel: cancel}
	for i := range streams {
		p, err := peer.New()
		if err != nil {
			cancel()
			return nil, err
		}
		p.Index = i
		if _, err := p.Register(goMemName(i), goMemLen, goMemBase, "rw"); err != nil {
			cancel()
			return nil, err
		}
		if i == 0 {
			// Remote atomic access only: its one word changes by atomics
			// alone (a plain RDMA Read or Write beside the Go peer's own
			// adds would race with them).
			if g.counter, err = p.Register(goCounterName, 8, goCounterBase, "a"); err != nil {
				cancel()
				return nil, err
			}
		}
		for range goRecvs {
			if _, _, err := p.PostRecv(goRecvLen); err != nil {
				cancel()
				return nil, err
			}
		}
		g.peers = append(g.peers, p)
	}
	return g, nil
}

// run starts taking completions and sending the page the peer's events.
func (g *goPeer) run() {
	for _, p := range g.peers {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			p.Run(g.ctx)
		}()
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.pump()
	}()
}

func (g *goPeer) go_(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
}

func (g *goPeer) report(format string, args ...any) {
	if g.ctx.Err() != nil {
		return
	}
	_ = g.t.send(Message{Type: "go-log", Text: fmt.Sprintf(format, args...)})
}

func (g *goPeer) regions() []peer.Region {
	var rs []peer.Region
	for _, p := range g.peers {
		rs = append(rs, p.Regions()...)
	}
	return rs
}

// pump sends the peer's events and, when they changed, its regions to
// the page, in batches; and what the impaired network did.
func (g *goPeer) pump() {
	t := time.NewTicker(goFlushGap)
	defer t.Stop()
	_ = g.t.send(Message{Type: "go-state", ID: g.id, Regions: g.regions(), Transport: g.kind})
	var lastStats NetStats
	var lastAt time.Time
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		m := Message{Type: "go-events", ID: g.id}
		changed := false
		for _, p := range g.peers {
			ev, dropped, ch := p.Drain()
			m.Events = append(m.Events, ev...)
			m.Dropped += dropped
			changed = changed || ch
		}
		if changed {
			m.Regions = g.regions()
		}
		if g.link != nil && time.Since(lastAt) >= statsGap {
			im, st := g.link.Stats()
			if st != lastStats {
				m.Net, m.Impair = &st, &im
				lastStats, lastAt = st, time.Now()
			}
		}
		if len(m.Events) == 0 && m.Regions == nil && m.Net == nil {
			continue
		}
		if err := g.t.send(m); err != nil {
			return
		}
	}
}

func (g *goPeer) setImpairment(im Impairment) {
	if g.link != nil {
		g.link.Set(im)
	}
}

// command runs a page's command on the Go peer.
func (g *goPeer) command(m Message) error {
	if m.QP < 0 || m.QP >= len(g.peers) {
		return fmt.Errorf("no queue pair %d", m.QP)
	}
	p := g.peers[m.QP]
	var err error
	switch m.Op {
	case "register":
		n := m.Len
		if n == 0 {
			n = goMemLen
		}
		access := m.Access
		if access == "" {
			access = "rw"
		}
		_, err = p.Register("Go peer region", n, m.Base, access)
	case "bind":
		// A memory window over Len octets of the region STag from Offset,
		// bound to this queue pair (rdmap.QueuePair.BindWindow): its own
		// STag, with its own rights, remote write unless Access says.
		access := m.Access
		if access == "" {
			access = "w"
		}
		var win uint32
		if win, err = p.BindWindow(m.STag, m.Offset, m.Len, access); err == nil {
			stream := "this DDP stream"
			if len(g.peers) > 1 {
				stream = fmt.Sprintf("stream %d", streamID(m.QP))
			}
			g.report("Go peer: memory window STag %#08x bound over %d octets of STag %#08x from offset %d, usable on %s alone", win, m.Len, m.STag, m.Offset, stream)
		}
	case "deregister":
		err = p.Deregister(m.STag)
	case "invalidate":
		err = p.Invalidate(m.STag)
	case "increment":
		// The Go peer adds to its counter with sync/atomic, as a program
		// beside its peers' FetchAdds would (rdmap.MemoryRegion.Word).
		var old uint64
		if old, err = g.peers[0].AddLocal(g.counter, 0, 1); err == nil {
			g.report("Go peer: counter %d -> %d (its own atomic add, beside the page's FetchAdds)", old, old+1)
		}
	case "post-recv":
		n := m.Len
		if n == 0 {
			n = goRecvLen
		}
		_, _, err = p.PostRecv(n)
	case "hold":
		// The Go peer stops reading one DDP stream's data channel for a
		// while: its messages wait in the association, as behind a lost
		// chunk, while the other streams go on.
		if m.QP >= len(g.holds) {
			return errors.New("holding a stream needs the data channel transport")
		}
		d := time.Duration(m.MS) * time.Millisecond
		if d <= 0 || d > maxHold {
			return fmt.Errorf("hold %v outside (0, %v]", d, maxHold)
		}
		g.holds[m.QP].hold(d)
		g.report("Go peer: not reading data channel %d for %v", streamID(m.QP), d)
	default:
		err = fmt.Errorf("unknown Go peer command %q", m.Op)
	}
	return err
}

// close ends the transport, the queue pairs, and waits for the peer's
// goroutines.
func (g *goPeer) close() {
	g.once.Do(func() {
		g.cancel()
		for _, f := range g.closers {
			f()
		}
		g.wg.Wait()
	})
}

// closeQPs closes the queue pairs (one of the transport's closers, in
// its place).
func (g *goPeer) closeQPs() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, p := range g.peers {
		_ = p.QP.Close(ctx)
	}
}
