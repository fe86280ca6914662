//go:build !js

package sctpddp

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// ErrAssociationEvicted: the association carried no DDP Stream Session,
// its peer held the most associations of the Listener, and at
// Config.MaxAssociations a peer holding fewer needed its place. It is
// ErrTooManyAssociations too (errors.Is).
var ErrAssociationEvicted = fmt.Errorf("%w: it carried no session and made room for a peer holding fewer", ErrTooManyAssociations)

// liveAssocs are a Listener's associations by peer (an IPv4 address or an
// IPv6 /64), oldest first. At MaxAssociations a peer holding few takes
// the place of an idle association of the peer holding the most
// (Listener.evictIdle): so a few addresses that open associations and
// start no session, kept alive by heartbeats, cannot keep every other
// peer out, as MaxAssociations / MaxAssociationsPerPeer addresses could.
// An association that carries a session, or a request for one, or whose
// streams the application uses itself (OpenStream, AcceptStream), is
// never evicted.
type liveAssocs struct {
	mu     sync.Mutex
	seq    uint64
	byPeer map[netip.Addr][]liveAssoc
}

type liveAssoc struct {
	a   *Association
	seq uint64 // the order of registration, across peers
}

// assocSlot ties an association's end (its onEnd, which may run before
// newAssociation has returned it) to its registration.
type assocSlot struct{ a *Association }

// add registers a, which ended already if its onEnd has run.
func (r *liveAssocs) add(ip netip.Addr, slot *assocSlot, a *Association) {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot.a = a
	if a.isClosed() {
		return
	}
	r.seq++
	r.byPeer[ip] = append(r.byPeer[ip], liveAssoc{a, r.seq})
}

// forget removes the association of slot once it has ended.
func (r *liveAssocs) forget(ip netip.Addr, slot *assocSlot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slot.a == nil {
		return // ended before add, which will see it closed
	}
	list := slices.DeleteFunc(r.byPeer[ip], func(l liveAssoc) bool { return l.a == slot.a })
	if len(list) == 0 {
		delete(r.byPeer, ip)
	} else {
		r.byPeer[ip] = list
	}
}

// idleVictim returns, of the peers holding the most associations, the
// oldest association that carries no session, marked so that none
// starts on it any more; or nil if those peers hold fewer than two more
// than ip (one more would only swap the two) or carry sessions on all of
// theirs.
func (r *liveAssocs) idleVictim(ip netip.Addr) *Association {
	r.mu.Lock()
	defer r.mu.Unlock()
	held, most := len(r.byPeer[ip]), 0
	for _, list := range r.byPeer {
		most = max(most, len(list))
	}
	if most < held+2 {
		return nil
	}
	var victim *liveAssoc
	for _, list := range r.byPeer {
		if len(list) != most {
			continue
		}
		for i := range list {
			if list[i].a.idle() {
				if victim == nil || list[i].seq < victim.seq {
					victim = &list[i]
				}
				break // the oldest idle one of this peer
			}
		}
	}
	if victim == nil || !victim.a.stopSessions() {
		return nil
	}
	return victim.a
}

// idle reports whether a carries no session and no session request, and
// the application uses none of its streams itself.
func (a *Association) idle() bool {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	return a.inUse == 0 && !a.raw.Load() && !a.ending && !a.isClosed()
}

// stopSessions makes a refuse new sessions if it carries none, and
// reports whether it did.
func (a *Association) stopSessions() bool {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	if a.inUse > 0 || a.raw.Load() || a.ending || a.isClosed() {
		return false
	}
	a.ending = true
	return true
}

// evictIdle closes an idle association of the peer holding the most to
// make room for one of ip at MaxAssociations, and reports whether it did.
func (l *Listener) evictIdle(ip netip.Addr) bool {
	v := l.assocs.idleVictim(ip)
	if v == nil {
		return false
	}
	l.s.refused(v.RemoteAddr(), ErrAssociationEvicted)
	_ = v.end(ErrAssociationEvicted) // gives back its place (onEnd)
	return true
}
