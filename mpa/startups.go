package mpa

import (
	"net"
	"net/netip"
	"slices"
	"time"
)

// startup is a connection a Listener accepted whose MPA Request has not
// been read yet. It runs (a goroutine reads the Request) or it is parked
// (only its connection is held, nothing is read) until a place to run is
// free.
type startup struct {
	peer     netip.Addr
	running  bool
	nc       net.Conn
	deadline time.Time   // the handshake timeout from the TCP connection
	timer    *time.Timer // a parked startup's: closes it at deadline
}

// startups shares a Listener's places to run among peers, so that peers
// holding silent connections do not keep another peer waiting (Listener's
// doc comment says it in words). It only decides; the Listener holds its
// lock around every call, and closes, starts and reports the connections.
type startups struct {
	maxRunning, maxParked int
	running, parked       []*startup // in the order they began to run, or were parked
	runningOf, parkedOf   map[netip.Addr]int
}

func newStartups(maxRunning, maxParked int) startups {
	return startups{maxRunning: maxRunning, maxParked: maxParked,
		runningOf: map[netip.Addr]int{}, parkedOf: map[netip.Addr]int{}}
}

// add takes in s, a newly accepted connection, and returns the startup
// that leaves to make room, if one does: another peer's, evicted, or s
// itself, refused. s runs if a place is free, or in place of the oldest
// running startup of the peer that runs the most, when that peer runs two
// more than s's (one more would only swap them). Otherwise s is parked;
// if every parked place is taken, in place of the newest parked startup
// of the peer that has the most parked, when that peer has more than
// s's. Else s is refused, unless every startup is its peer's: then s is
// parked beyond maxParked, and the Listener takes no more connections
// until over is false again (a burst from one peer waits in the kernel's
// queue).
func (q *startups) add(s *startup) (out *startup) {
	if len(q.running) < q.maxRunning {
		q.run(s)
		return nil
	}
	if v := greediest(q.running, q.runningOf, false); q.runningOf[v.peer] >= q.runningOf[s.peer]+2 {
		q.remove(v)
		q.run(s)
		return v
	}
	if len(q.parked) >= q.maxParked {
		switch v := greediest(q.parked, q.parkedOf, true); {
		case q.parkedOf[v.peer] > q.parkedOf[s.peer]:
			q.remove(v)
			out = v
		case !q.alone(s.peer):
			return s
		}
	}
	q.park(s)
	return out
}

// finish removes s, a startup that stopped running (its Request read, an
// error, its time run out), and reports whether it was still there: false
// if add evicted it, when whoever evicted it has released it.
func (q *startups) finish(s *startup) bool {
	if !s.running || !slices.Contains(q.running, s) {
		return false
	}
	q.remove(s)
	return true
}

// next runs the parked startup whose peer runs the fewest (the oldest
// parked of them on a tie) if a place is free, and returns it.
func (q *startups) next() *startup {
	if len(q.running) >= q.maxRunning || len(q.parked) == 0 {
		return nil
	}
	s := q.parked[0]
	for _, p := range q.parked[1:] {
		if q.runningOf[p.peer] < q.runningOf[s.peer] {
			s = p
		}
	}
	q.remove(s)
	q.run(s)
	return s
}

// unpark removes s, a parked startup whose time ran out, and reports
// whether it was still parked.
func (q *startups) unpark(s *startup) bool {
	if s.running || !slices.Contains(q.parked, s) {
		return false
	}
	q.remove(s)
	return true
}

// takeParked removes every parked startup and returns them (Close).
func (q *startups) takeParked() []*startup {
	p := q.parked
	q.parked = nil
	clear(q.parkedOf)
	return p
}

// over says that more are parked than maxParked (add's last case).
func (q *startups) over() bool { return len(q.parked) > q.maxParked }

// alone says that every startup, running or parked, is peer's.
func (q *startups) alone(peer netip.Addr) bool {
	return q.runningOf[peer] == len(q.running) && q.parkedOf[peer] == len(q.parked)
}

func (q *startups) run(s *startup) {
	s.running = true
	q.running = append(q.running, s)
	q.runningOf[s.peer]++
}

func (q *startups) park(s *startup) {
	s.running = false
	q.parked = append(q.parked, s)
	q.parkedOf[s.peer]++
}

func (q *startups) remove(s *startup) {
	list, of := &q.parked, q.parkedOf
	if s.running {
		list, of = &q.running, q.runningOf
	}
	*list = slices.DeleteFunc(*list, func(x *startup) bool { return x == s })
	if of[s.peer]--; of[s.peer] <= 0 {
		delete(of, s.peer)
	}
}

// greediest returns, of the startups in list whose peer has the most of
// them (of[peer]), the oldest, or the newest if newest. list is not
// empty.
func greediest(list []*startup, of map[netip.Addr]int, newest bool) *startup {
	most := 0
	for _, n := range of {
		most = max(most, n)
	}
	for i := range list {
		if newest {
			i = len(list) - 1 - i
		}
		if of[list[i].peer] == most {
			return list[i]
		}
	}
	return nil
}
