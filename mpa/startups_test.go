package mpa

import (
	"fmt"
	"net/netip"
	"testing"
)

// fakeStartups makes startups named for their peer ("a1" is the first of
// peer a) without connections, for the policy alone.
type fakeStartups struct {
	t     *testing.T
	q     startups
	peers map[string]netip.Addr
	name  map[*startup]string
	n     map[string]int
}

func newFakeStartups(t *testing.T, running, parked int) *fakeStartups {
	return &fakeStartups{t: t, q: newStartups(running, parked),
		peers: map[string]netip.Addr{}, name: map[*startup]string{}, n: map[string]int{}}
}

// add adds a startup of peer and checks what happened to it (want:
// "run", "park" or "refused") and which one left ("" for none).
func (f *fakeStartups) add(peer, want, wantOut string) *startup {
	f.t.Helper()
	p, ok := f.peers[peer]
	if !ok {
		p = netip.AddrFrom4([4]byte{192, 0, 2, byte(len(f.peers) + 1)})
		f.peers[peer] = p
	}
	f.n[peer]++
	s := &startup{peer: p}
	name := fmt.Sprintf("%s%d", peer, f.n[peer])
	f.name[s] = name
	out := f.q.add(s)
	got, left := "park", f.name[out]
	switch {
	case out == s:
		got, left = "refused", ""
	case s.running:
		got = "run"
	}
	if got != want || left != wantOut {
		f.t.Fatalf("%s: %s, %q left; want %s, %q left", name, got, left, want, wantOut)
	}
	return s
}

// next checks which parked startup runs next.
func (f *fakeStartups) next(want string) {
	f.t.Helper()
	s := f.q.next()
	if f.name[s] != want || (s != nil && !s.running) {
		f.t.Fatalf("next: %q, want %q", f.name[s], want)
	}
}

func (f *fakeStartups) finish(s *startup, want bool) {
	f.t.Helper()
	if got := f.q.finish(s); got != want {
		f.t.Fatalf("finish %s: %v, want %v", f.name[s], got, want)
	}
}

// The fair sharing of a Listener's places for startups, without sockets.
func TestStartupsPolicy(t *testing.T) {
	t.Run("the greediest runner's oldest makes room", func(t *testing.T) {
		f := newFakeStartups(t, 4, 4)
		f.add("a", "run", "")
		f.add("b", "run", "")
		a2 := f.add("a", "run", "")
		f.add("a", "run", "")
		// a runs 3, c none: c takes a1's place.
		f.add("c", "run", "a1")
		// a runs 2, c 1: swapping them would gain nothing.
		f.add("c", "park", "")
		// a and b tie on 1 each with c: nothing is evicted.
		f.add("b", "park", "")
		// d runs none, a 2 (a2, a3): a2 leaves, the oldest.
		f.add("d", "run", "a2")
		f.finish(a2, false) // its goroutine learns that it was evicted
	})
	t.Run("the greediest newcomer parks", func(t *testing.T) {
		f := newFakeStartups(t, 2, 2)
		f.add("a", "run", "")
		f.add("a", "run", "")
		f.add("a", "park", "")
		f.add("b", "run", "a1")
		f.add("b", "park", "") // a and b run one each
	})
	t.Run("the peer running the fewest starts next", func(t *testing.T) {
		f := newFakeStartups(t, 2, 4)
		a1 := f.add("a", "run", "")
		b1 := f.add("b", "run", "")
		f.add("a", "park", "")
		f.add("a", "park", "")
		f.add("b", "park", "")
		f.add("c", "park", "")
		f.next("") // no place is free
		f.finish(a1, true)
		f.next("a2") // a and c run none; a2 is the older
		f.finish(b1, true)
		f.next("b2")                   // b and c run none; b2 is the older
		f.finish(f.q.running[1], true) // b2
		f.next("c1")                   // a runs a2, c none; a3 is older, yet waits
		f.finish(f.q.running[0], true) // a2
		f.next("a3")
		f.next("")
	})
	t.Run("at the parked cap the greediest parker's newest leaves", func(t *testing.T) {
		f := newFakeStartups(t, 1, 3)
		f.add("a", "run", "")
		f.add("a", "park", "")
		f.add("a", "park", "")
		f.add("b", "park", "")
		f.add("c", "park", "a3")  // a has 2 parked, c none
		f.add("b", "refused", "") // a, b and c have one each
		if f.q.over() {
			t.Fatal("over the parked cap")
		}
	})
	t.Run("a peer alone parks beyond the cap", func(t *testing.T) {
		f := newFakeStartups(t, 1, 1)
		a1 := f.add("a", "run", "")
		f.add("a", "park", "")
		f.add("a", "park", "")
		if !f.q.over() {
			t.Fatal("not over the parked cap")
		}
		f.finish(a1, true)
		f.next("a2")
		if f.q.over() {
			t.Fatal("still over the parked cap")
		}
		// A newcomer of another peer takes a parked place.
		f.add("b", "park", "a3")
	})
	t.Run("beside another peer the cap holds", func(t *testing.T) {
		f := newFakeStartups(t, 2, 1)
		f.add("a", "run", "")
		f.add("b", "run", "")
		f.add("a", "park", "")
		f.add("a", "refused", "")
		if f.q.over() {
			t.Fatal("over the parked cap")
		}
	})
	t.Run("unpark and takeParked", func(t *testing.T) {
		f := newFakeStartups(t, 1, 2)
		a1 := f.add("a", "run", "")
		a2 := f.add("a", "park", "")
		f.add("b", "park", "")
		if f.q.unpark(a1) || !f.q.unpark(a2) || f.q.unpark(a2) {
			t.Fatal("unpark took a running or a gone startup, or not a parked one")
		}
		if p := f.q.takeParked(); len(p) != 1 || f.name[p[0]] != "b1" || len(f.q.parkedOf) != 0 {
			t.Fatalf("takeParked: %d, parkedOf %v", len(p), f.q.parkedOf)
		}
		f.finish(a1, true)
		f.finish(a1, false)
		if len(f.q.runningOf) != 0 {
			t.Fatalf("runningOf %v after the last finished", f.q.runningOf)
		}
	})
}
