// Package admission is the one limiter of the command's servers ("iwarp
// serve" and "iwarp perf --listen"): it admits a connection only while
// the server holds fewer than its limit of connections, fewer than its
// per-peer limit from the connection's peer (an IPv4 address or an IPv6
// /64, so that one host cannot take a connection per address of its
// prefix), and the octets the connection is counted for fit what is left
// of the memory budget. Connections admitted may count more octets later
// (Grow) and give them back (Shrink, Release).
//
//	a := admission.New(admission.Limits{MaxConns: 256, MaxConnsPerPeer: 16, MemBudget: 1 << 30})
//	if err := a.Take(peer, need); err != nil {
//		return err // a *Refusal: which limit, how far
//	}
//	defer a.Release(peer, need)
package admission

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/iwarpgo/iwarp/internal/netpeer"
)

// Limits bound a server's connections.
type Limits struct {
	MaxConns        int   // connections at once, in all
	MaxConnsPerPeer int   // connections at once from one peer
	MemBudget       int64 // octets counted for all connections together
}

// Limit names the limit a refused connection met.
type Limit uint8

// The limits.
const (
	Conns     Limit = iota + 1 // Limits.MaxConns
	PeerConns                  // Limits.MaxConnsPerPeer
	Memory                     // Limits.MemBudget
)

// Refusal says why a connection, or more octets, were not admitted.
type Refusal struct {
	Limit Limit
	Peer  string // the peer (netpeer's form), for PeerConns
	Held  int64  // connections held, in all or from Peer, or octets in use
	Max   int64  // the limit: connections, or MemBudget
	Asked int64  // octets asked for, for Memory
}

func (r *Refusal) Error() string {
	switch r.Limit {
	case Conns:
		return fmt.Sprintf("%d connections already", r.Held)
	case PeerConns:
		peer := r.Peer
		if a, err := netip.ParseAddr(peer); err == nil && a.Is6() {
			peer += "/64"
		}
		return fmt.Sprintf("%d connections from %s already", r.Held, peer)
	}
	return fmt.Sprintf("%d octets asked, %d of %d in use", r.Asked, r.Held, r.Max)
}

// Free is the octets left in the budget, for Memory.
func (r *Refusal) Free() int64 { return max(0, r.Max-r.Held) }

// Admission counts a server's connections, in all and per peer, and the
// octets they hold. Its methods are safe for concurrent use.
type Admission struct {
	lim   Limits
	mu    sync.Mutex // guards the fields below
	conns int
	peers map[string]int
	bytes int64
}

// New returns an Admission that holds nothing yet.
func New(lim Limits) *Admission {
	return &Admission{lim: lim, peers: make(map[string]int)}
}

// Take admits a connection from peer (host:port), counting octets for it,
// or returns the *Refusal that says which limit it met.
func (a *Admission) Take(peer string, octets int64) error {
	h := netpeer.OfHostPort(peer)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.conns >= a.lim.MaxConns:
		return &Refusal{Limit: Conns, Held: int64(a.conns), Max: int64(a.lim.MaxConns)}
	case a.peers[h] >= a.lim.MaxConnsPerPeer:
		return &Refusal{Limit: PeerConns, Peer: h, Held: int64(a.peers[h]), Max: int64(a.lim.MaxConnsPerPeer)}
	case a.bytes+octets > a.lim.MemBudget:
		return &Refusal{Limit: Memory, Held: a.bytes, Max: a.lim.MemBudget, Asked: octets}
	}
	a.conns++
	a.peers[h]++
	a.bytes += octets
	return nil
}

// Release gives back what Take counted.
func (a *Admission) Release(peer string, octets int64) {
	h := netpeer.OfHostPort(peer)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conns--
	a.bytes -= octets
	if a.peers[h]--; a.peers[h] <= 0 {
		delete(a.peers, h)
	}
}

// Grow counts n more octets for a connection already admitted, if the
// budget has them, or returns the *Refusal.
func (a *Admission) Grow(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bytes+n > a.lim.MemBudget {
		return &Refusal{Limit: Memory, Held: a.bytes, Max: a.lim.MemBudget, Asked: n}
	}
	a.bytes += n
	return nil
}

// Shrink gives back n octets that Grow counted.
func (a *Admission) Shrink(n int64) {
	a.mu.Lock()
	a.bytes -= n
	a.mu.Unlock()
}

// Usage returns the connections admitted and the octets counted.
func (a *Admission) Usage() (conns int, octets int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns, a.bytes
}
