package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/mpa"
)

// ticketLifetime is how long the page has to open its MPA WebSocket.
const ticketLifetime = 10 * time.Second

// ticket lets one WebSocket to /mpa reach the Go peer of the tab that
// asked for it.
type ticket struct {
	tab     *tab
	mulpdu  int
	markers bool
	expires time.Time
}

// newTicket answers a page that falls back to MPA over a WebSocket: the
// ticket it must present on /mpa.
func (s *Server) newTicket(t *tab, m Message) error {
	// The answer says what MPA will use.
	mulpdu := peer.MPAMULPDU(m.MULPDU)
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	k := hex.EncodeToString(b[:])
	now := time.Now()
	s.mu.Lock()
	for key, tk := range s.tickets {
		if tk.tab == t || now.After(tk.expires) {
			delete(s.tickets, key)
		}
	}
	s.tickets[k] = &ticket{tab: t, mulpdu: mulpdu, markers: m.Markers, expires: now.Add(ticketLifetime)}
	s.mu.Unlock()
	return t.send(Message{Type: "mpa-ticket", Ticket: k, MULPDU: mulpdu, Markers: m.Markers})
}

// serveMPA is the Go peer's end of MPA over a WebSocket: the page is the
// MPA Initiator (mpa.Client over the WebSocket's net.Conn, in wasm), the
// Go peer the Responder (mpa.Server, then Request.Accept). The octets run
// through the tab's impaired network: delay and jitter, on a byte stream
// that keeps its order.
func (s *Server) serveMPA(w http.ResponseWriter, r *http.Request) {
	k := r.URL.Query().Get("ticket")
	s.mu.Lock()
	tk := s.tickets[k]
	delete(s.tickets, k)
	s.mu.Unlock()
	if tk == nil || time.Now().After(tk.expires) {
		http.Error(w, "no such ticket: ask for one over the signaling connection", http.StatusForbidden)
		return
	}
	t := tk.tab
	if t.ctx.Err() != nil {
		http.Error(w, "the tab is gone", http.StatusGone)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	ws.SetReadLimit(1 << 20)
	t.setGoPeer(nil)
	g, err := newGoPeer(t, "mpa", 1)
	if err != nil {
		ws.Close(websocket.StatusInternalError, err.Error())
		return
	}
	nc := websocket.NetConn(g.ctx, ws, websocket.MessageBinary)
	sl := NewStreamLink(nc, t.impairment())
	g.link = sl
	g.closers = []func(){g.closeQPs, func() { _ = sl.Close(); _ = ws.CloseNow() }}
	ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
	req, err := mpa.Server(ctx, sl, &mpa.Config{Markers: tk.markers})
	cancel()
	if err != nil {
		g.close()
		_ = t.send(Message{Type: "error", Purpose: "mpa", Text: "the page's MPA Request: " + err.Error()})
		return
	}
	conn, err := req.Accept(peer.CapMULPDU(g.peers[0].QP, tk.mulpdu), nil)
	if err != nil {
		g.close()
		_ = t.send(Message{Type: "error", Purpose: "mpa", Text: "accepting the page's MPA connection: " + err.Error()})
		return
	}
	g.closers = []func(){g.closeQPs, func() { _ = conn.Close() }, func() { _ = sl.Close(); _ = ws.CloseNow() }}
	t.setGoPeer(g)
	g.run()
	neg := conn.Negotiated()
	g.report("Go peer: MPA connection accepted (Rev %d, CRC %v, Markers to the page %v, from the page %v; segments of at most %d octets)",
		neg.Revision, neg.CRC, neg.MarkersTx, neg.MarkersRx, tk.mulpdu)
	select {
	case <-g.ctx.Done():
	case <-g.peers[0].QP.Terminated():
		// The stream ended (a Terminate, or the page went): the Go peer
		// stays for the page to see, until it connects anew or leaves.
		<-g.ctx.Done()
	}
}
