package sctp

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The simulation connects a Sender to a receiver model through a link
// with a one-way delay, a bandwidth, a drop-tail queue and random loss, as
// a deterministic discrete-event loop on a fake clock, and measures the
// goodput: bytes delivered in order per simulated second.

const (
	simHeader   = 12   // SCTP common header
	simMTU      = 1200 // SCTP packet size on the path (DTLS/UDP/IP overhead aside)
	simUserData = 1172 // a DATA chunk of 1188 bytes fills one packet
)

type simConfig struct {
	oneWay    time.Duration // propagation delay each way
	bandwidth float64       // bytes per second, both ways
	queue     int           // packets the bottleneck queue holds
	loss      float64       // probability a packet is lost, each way
	reorder   float64       // probability a DATA packet is held back by jitter
	jitter    time.Duration // how long a reordered packet is held back
	sackDelay time.Duration // the receiver's delayed SACK timer
	total     int           // bytes to transfer
	limit     time.Duration // simulated time limit
	seed      uint64
}

type simResult struct {
	elapsed   time.Duration // until the last byte was acknowledged
	delivered int           // bytes delivered in order at the receiver
	packets   int           // DATA packets sent
	rtx       int           // DATA chunks retransmitted
	dropped   int           // DATA packets the link lost or dropped
	t3        int           // T3-rtx expiries
	pto       int           // PTO expiries
	rack      int           // RACK reordering timer expiries
	done      bool
}

func (r simResult) goodput() float64 { return float64(r.delivered) / r.elapsed.Seconds() }

type simEventKind uint8

const (
	simDataArrives simEventKind = iota // a DATA packet reaches the receiver
	simSACKArrives                     // a SACK reaches the sender
	simDelayedAck                      // the receiver's SACK timer
	simSenderTimer                     // the sender's deadline
)

type simEvent struct {
	at   time.Time
	seq  int // ties by order of scheduling
	kind simEventKind
	tsns []TSN      // DATA packet
	imm  bool       // a DATA chunk of the packet has the I bit
	sack chunk.SACK // SACK
	gen  int        // timer generation
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simLink is one direction of the path: a bottleneck serializing packets
// at the bandwidth, a drop-tail queue in front of it, a propagation delay
// and random loss.
type simLink struct {
	cfg    *simConfig
	rng    *rand.Rand
	freeAt time.Time // when the bottleneck finishes the packets it holds
	// reorders says the link holds packets back (cfg.reorder): packets
	// sent after one held back overtake it.
	reorders bool
	drops    int // packets lost or dropped
}

// send returns when a packet of size bytes sent at now arrives, or false
// if it is lost or dropped.
func (l *simLink) send(now time.Time, size int) (time.Time, bool) {
	tx := time.Duration(float64(size) / l.cfg.bandwidth * float64(time.Second))
	start := l.freeAt
	if start.Before(now) {
		start = now
	}
	if start.Sub(now) > time.Duration(l.cfg.queue)*tx {
		l.drops++
		return time.Time{}, false // the queue is full
	}
	l.freeAt = start.Add(tx)
	if l.rng.Float64() < l.cfg.loss {
		l.drops++
		return time.Time{}, false
	}
	at := l.freeAt.Add(l.cfg.oneWay)
	if l.reorders && l.cfg.reorder > 0 && l.rng.Float64() < l.cfg.reorder {
		at = at.Add(l.cfg.jitter)
	}
	return at, true
}

// simReceiver is an SCTP data receiver reduced to its acknowledgements
// (RFC 9260 §6.2, §6.7): a SACK for every second packet, at once when a
// packet arrives out of order, fills a gap or repeats a TSN, and after
// sackDelay otherwise.
type simReceiver struct {
	cum       TSN
	above     map[TSN]bool // received above cum
	dups      []TSN
	unacked   int // packets since the last SACK
	delivered int
	timerGen  int
	timerOn   bool
	gaps      chunk.GapAckBlocks
	dupList   chunk.TSNList
}

func (r *simReceiver) receive(tsns []TSN, iBit bool) (immediate bool) {
	hadGap := len(r.above) > 0
	for _, tsn := range tsns {
		switch {
		case tsn.AtOrBefore(r.cum) || r.above[tsn]:
			r.dups = append(r.dups, tsn)
			immediate = true
		case tsn == r.cum+1:
			r.cum = tsn
			r.delivered += simUserData
			for r.above[r.cum+1] {
				delete(r.above, r.cum+1)
				r.cum++
				r.delivered += simUserData
			}
		default:
			r.above[tsn] = true
			immediate = true
		}
	}
	r.unacked++
	// "Upon receipt of an SCTP packet containing a DATA chunk with the I
	// bit set, the receiver SHOULD NOT delay the sending of the
	// corresponding SACK chunk".
	return immediate || iBit || hadGap || r.unacked >= 2
}

func (r *simReceiver) sack() chunk.SACK {
	r.unacked = 0
	r.timerOn = false
	r.timerGen++
	keys := make([]TSN, 0, len(r.above))
	for k := range r.above {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b TSN) int { return int(int32(a - b)) })
	gaps := chunk.GapAckBlocks(nil)
	for i := 0; i < len(keys); {
		j := i
		for j+1 < len(keys) && keys[j+1] == keys[j]+1 {
			j++
		}
		gaps = gaps.AppendBlock(uint16(keys[i]-r.cum), uint16(keys[j]-r.cum))
		i = j + 1
	}
	var dups chunk.TSNList
	for _, d := range r.dups {
		dups = dups.AppendTSN(uint32(d))
	}
	r.dups = r.dups[:0]
	return chunk.SACK{
		CumulativeTSNAck: uint32(r.cum),
		ARwnd:            uint32(4<<20 - len(r.above)*simUserData),
		GapAckBlocks:     gaps,
		DuplicateTSNs:    dups,
	}
}

func runSim(t testing.TB, cfg simConfig) simResult {
	start := time.Unix(1_000_000, 0)
	now := start
	rng := rand.New(rand.NewPCG(cfg.seed, 7))
	fwd := simLink{cfg: &cfg, rng: rng, reorders: true}
	rev := simLink{cfg: &cfg, rng: rng}
	const initialTSN = TSN(0xffff_fc00) // wraps during the transfer
	snd := NewSender(SenderConfig{PMDCS: simMTU - simHeader, InitialTSN: initialTSN, PeerRwnd: 4 << 20, MaxChunks: 8192}, now)
	snd.ObserveRTT(2 * cfg.oneWay)
	rcv := simReceiver{cum: initialTSN - 1, above: map[TSN]bool{}}
	payload := make([]byte, simUserData)
	queued := 0

	var q simQueue
	seq := 0
	push := func(e *simEvent) {
		seq++
		e.seq = seq
		heap.Push(&q, e)
	}
	var res simResult
	timerGen := 0
	armedAt := time.Time{}
	armTimer := func() {
		d := snd.NextDeadline()
		if d.IsZero() || d.Equal(armedAt) {
			return
		}
		timerGen++
		armedAt = d
		push(&simEvent{at: d, kind: simSenderTimer, gen: timerGen})
	}
	transmit := func() {
		for queued < cfg.total {
			if _, ok := snd.Queue(chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, UserData: payload}, nil); !ok {
				break
			}
			queued += simUserData
		}
		for {
			room := simMTU - simHeader
			var tsns []TSN
			imm := false
			for {
				d, ok := snd.Next(now, room)
				if !ok {
					break
				}
				room -= d.Len()
				tsns = append(tsns, TSN(d.TSN))
				imm = imm || d.Flags&chunk.FlagImmediate != 0
			}
			if len(tsns) == 0 {
				break
			}
			res.packets++
			if at, ok := fwd.send(now, simMTU-room); ok {
				push(&simEvent{at: at, kind: simDataArrives, tsns: tsns, imm: imm})
			}
		}
		armTimer()
	}
	sendSACK := func() {
		s := rcv.sack()
		if at, ok := rev.send(now, simHeader+s.Len()); ok {
			push(&simEvent{at: at, kind: simSACKArrives, sack: s})
		}
	}

	transmit()
	for q.Len() > 0 {
		e := heap.Pop(&q).(*simEvent)
		now = e.at
		if now.Sub(start) > cfg.limit {
			break
		}
		switch e.kind {
		case simDataArrives:
			if rcv.receive(e.tsns, e.imm) {
				sendSACK()
			} else if !rcv.timerOn {
				rcv.timerOn = true
				push(&simEvent{at: now.Add(cfg.sackDelay), kind: simDelayedAck, gen: rcv.timerGen})
			}
		case simDelayedAck:
			if rcv.timerOn && e.gen == rcv.timerGen {
				sendSACK()
			}
		case simSACKArrives:
			snd.HandleSACK(now, e.sack)
			transmit()
		case simSenderTimer:
			if e.gen != timerGen {
				continue
			}
			armedAt = time.Time{}
			if d := snd.T3Deadline(); !d.IsZero() && !now.Before(d) {
				res.t3++
			}
			if d := snd.PTODeadline(); !d.IsZero() && !now.Before(d) {
				res.pto++
			}
			if d := snd.RACKDeadline(); !d.IsZero() && !now.Before(d) {
				res.rack++
			}
			snd.OnTimeout(now)
			transmit()
		}
		if snd.Dead() {
			t.Fatalf("association dead at %v", now.Sub(start))
		}
		if queued >= cfg.total && !snd.Outstanding() && snd.Unsent() == 0 {
			res.done = true
			break
		}
	}
	res.elapsed = now.Sub(start)
	res.delivered = rcv.delivered
	res.rtx = res.packets - int(uint32(snd.nextSend-initialTSN))
	res.dropped = fwd.drops
	return res
}

func simDefaults(loss float64, seed uint64) simConfig {
	return simConfig{
		oneWay:    time.Millisecond, // 2 ms RTT
		bandwidth: 100e6 / 8,        // 100 Mbit/s
		queue:     64,
		loss:      loss,
		sackDelay: 200 * time.Millisecond,
		total:     4 << 20,
		limit:     60 * time.Second,
		seed:      seed,
	}
}

// TestSimLossyLink mirrors the project's targets: goodput under 5 % loss
// at least 0.2 times the clean rate through the same link, and 4 MiB
// through 20 % loss (each way, SACKs too) in well under 10 simulated
// seconds at a 2 ms RTT.
func TestSimLossyLink(t *testing.T) {
	clean := runSim(t, simDefaults(0, 1))
	if !clean.done {
		t.Fatalf("clean transfer incomplete: %+v", clean)
	}
	t.Logf("clean: %v, %.2f MB/s, %d packets, %d dropped by the queue, %d rtx, %d T3", clean.elapsed, clean.goodput()/1e6, clean.packets, clean.dropped, clean.rtx, clean.t3)
	for _, seed := range []uint64{1, 2, 3} {
		r := runSim(t, simDefaults(0.05, seed))
		t.Logf("5%% loss seed %d: %v, %.2f MB/s (%.2fx clean), %d packets, %d lost, %d rtx, %d T3, %d PTO, %d RACK timer", seed, r.elapsed, r.goodput()/1e6, r.goodput()/clean.goodput(), r.packets, r.dropped, r.rtx, r.t3, r.pto, r.rack)
		if !r.done {
			t.Fatalf("5%% loss: transfer incomplete: %+v", r)
		}
		if r.goodput() < 0.2*clean.goodput() {
			t.Errorf("5%% loss: goodput %.2f MB/s is under 0.2x the clean %.2f MB/s", r.goodput()/1e6, clean.goodput()/1e6)
		}
		r = runSim(t, simDefaults(0.20, seed))
		t.Logf("20%% loss seed %d: %v, %.2f MB/s (%.2fx clean), %d packets, %d lost, %d rtx, %d T3, %d PTO, %d RACK timer", seed, r.elapsed, r.goodput()/1e6, r.goodput()/clean.goodput(), r.packets, r.dropped, r.rtx, r.t3, r.pto, r.rack)
		if !r.done || r.elapsed > 6*time.Second {
			t.Errorf("20%% loss: 4 MiB took %v (done %v), want well under 10 s", r.elapsed, r.done)
		}
	}
}

// TestSimReordering runs the transfer through a link that holds one DATA
// packet in 20 back by a quarter of the RTT (later packets overtake it)
// and loses 1 %: RACK's reordering window, opened by the reordering it
// sees (RFC 8985 step 3) and by the peer's Duplicate TSN reports (step 4),
// keeps spurious retransmissions few.
func TestSimReordering(t *testing.T) {
	clean := runSim(t, simDefaults(0, 1))
	cfg := simDefaults(0.01, 1)
	cfg.reorder = 0.05
	cfg.jitter = 500 * time.Microsecond
	r := runSim(t, cfg)
	t.Logf("reordering, 1%% loss: %v, %.2f MB/s (%.2fx clean), %d packets, %d lost, %d rtx, %d T3, %d PTO, %d RACK timer", r.elapsed, r.goodput()/1e6, r.goodput()/clean.goodput(), r.packets, r.dropped, r.rtx, r.t3, r.pto, r.rack)
	if !r.done {
		t.Fatalf("transfer incomplete: %+v", r)
	}
	if r.rtx > 2*r.dropped {
		t.Errorf("%d retransmissions for %d packets lost: more spurious than needed", r.rtx, r.dropped)
	}
	if r.goodput() < 0.4*clean.goodput() {
		t.Errorf("goodput %.2f MB/s under 0.4x the clean %.2f MB/s", r.goodput()/1e6, clean.goodput()/1e6)
	}
}

// TestSimInternetPath runs the transfer over a 40 ms RTT, 20 Mbit/s path
// with a 1 % loss each way, for the figures: a longer path, where RTO is
// above RTO.Min and slow start matters.
func TestSimInternetPath(t *testing.T) {
	for _, loss := range []float64{0, 0.01} {
		cfg := simDefaults(loss, 1)
		cfg.oneWay = 20 * time.Millisecond
		cfg.bandwidth = 20e6 / 8
		cfg.queue = 100
		r := runSim(t, cfg)
		t.Logf("40 ms RTT, 20 Mbit/s, %.0f%% loss: %v, %.2f MB/s (%.2fx the link), %d packets, %d lost, %d rtx, %d T3, %d PTO, %d RACK timer", loss*100, r.elapsed, r.goodput()/1e6, r.goodput()/cfg.bandwidth, r.packets, r.dropped, r.rtx, r.t3, r.pto, r.rack)
		if !r.done {
			t.Fatalf("transfer incomplete: %+v", r)
		}
		if r.rtx > 2*r.dropped+2 {
			t.Errorf("%d retransmissions for %d packets lost", r.rtx, r.dropped)
		}
	}
}
