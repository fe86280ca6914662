package sctp

import (
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// Sender is the send side of an association (RFC 9260 §6.1 to §6.3, §7.2,
// §8.1) as pure state: the retransmission queue of DATA chunks by TSN, the
// peer's rwnd, the congestion controller (cwnd, ssthresh,
// partial_bytes_acked, Fast Recovery), the RTO estimator and T3-rtx, the
// RACK-TLP loss detector (RFC 8985) and the association error counter. It
// starts no goroutines, arms no timers and reads no clock: every method
// that needs the time takes it as now, and timers are deadlines the run
// loop arms (NextDeadline) and reports back (OnTimeout). One goroutine
// owns a Sender; it has no locks.
//
// The association's loop drives it so:
//
//	snd := NewSender(SenderConfig{PMDCS: pmdcs, InitialTSN: myTSN, PeerRwnd: peerARwnd}, now)
//	snd.ObserveRTT(handshakeRTT)
//	// the ULP writes: fragment into DATA chunks of at most PMDCS bytes
//	for _, frag := range frags {
//		if _, ok := snd.Queue(chunk.Data{...UserData: frag}, ref); !ok {
//			break // the queue is full: wait for SACKs
//		}
//	}
//	// a packet may go out (after any of the calls here)
//	for {
//		d, ok := snd.Next(now, room)
//		if !ok { break }
//		room -= d.Len()
//		w.Buf = d.Append(w.Buf)
//	}
//	// a SACK arrives
//	r := snd.HandleSACK(now, sack)
//	for _, c := range r.Released { release(c.Ref) }
//	// the timer armed at snd.NextDeadline() fires
//	snd.OnTimeout(now)
//	// then Next again
//	if snd.Dead() || !snd.SilentSince().IsZero() && now.Sub(snd.SilentSince()) > bound {
//		// §8.1: the peer is unreachable
//		for _, c := range snd.Drain() { release(c.Ref) }
//	}
//
// # Loss detection: the 3-miss rule and RACK together
//
// Both run on every SACK and either marks a chunk for retransmission,
// whichever is first: §7.2.4's miss indications (HTNA, three of them,
// once per chunk: a fast retransmitted chunk is "ineligible for a
// subsequent Fast Retransmit") and RACK's time rule (a chunk is lost when
// a chunk transmitted after it has been delivered and RACK.reo_wnd has
// passed). RACK runs on retransmissions too, which is what finds a lost
// retransmission in about a round trip: the 3-miss rule never looks at
// that chunk again, and without RACK only T3-rtx would. With no
// reordering seen, RACK's reo_wnd is 0 as soon as three chunks are
// gap-acked or a recovery runs, so the two rules rarely disagree. Once
// reordering has been seen (a chunk never retransmitted is acknowledged
// below the highest TSN acknowledged), the 3-miss rule stops: "if some
// reordering has been observed, then RACK does not trigger fast recovery
// based on DupThresh" (RFC 8985 §6.2 step 4). A chunk overtaken by three
// others is then not retransmitted before RACK's window, min_RTT/4 and
// growing with Duplicate TSN reports, has passed.
//
// A loss starts one Fast Recovery (one cwnd reduction per round trip,
// §7.2.4 step 6); every chunk marked for retransmission goes out as soon
// as cwnd allows, before new data (§6.1 rule C), so a burst loss is
// repaired in one recovery, the first packet of it regardless of cwnd
// (step 3). A lost retransmission sent during a recovery is a second
// congestion signal (RFC 8985 §9.3) and starts a new one.
//
// # Timers and probes
//
// T3-rtx follows §6.3.2 R1 to R4 and §6.1 (restart only when the earliest
// outstanding chunk is retransmitted); the RACK reordering timer and the
// TLP PTO are separate deadlines, never later than T3-rtx, and
// NextDeadline returns the earliest. RFC 8985 §8 multiplexes the three on
// one timer; keeping T3-rtx apart keeps RFC 9260's rules for it exact.
// A zero window probe waits one RTO (§6.1 rule A) on its own deadline.
//
// The PTO runs whenever chunks are in flight outside the RTO recovery that
// follows a T3-rtx expiry, Fast Recovery included, and doubles with each
// probe until new data is acknowledged (RFC 9002 §6.2.1's backoff); a
// probe unanswered by the next PTO is deemed lost. RFC 8985 §7.2 leaves
// recoveries to the RACK reordering timer, which needs a chunk delivered
// after the lost ones: when a small flight or all of its SACKs are lost,
// only T3-rtx would be left, at RTO.Min or more. A probe is the lowest
// chunk waiting for retransmission if any (it may advance the Cumulative
// TSN Ack), else new data, else the highest TSN in flight. Probes, and
// chunks that fill cwnd or rwnd or end the queue, carry the I bit (RFC
// 7053, §6.1) so that the peer does not delay their SACK.
//
// # Deviations and choices
//
//   - One destination address: the association runs over one DTLS
//     connection. cwnd, ssthresh, RTO and the error counter are per
//     association, and the error counter is the path's too (§8.2's
//     Path.Max.Retrans has nothing to fail over to).
//   - RACK_sent_after orders chunks by transmission, not by xmit_ts with
//     ties broken by TSN (see rack.go).
//   - Sizes count whole chunks with padding (§7.2: "the length of the DATA
//     chunk, including the padding, SHOULD be used"), rwnd included.
//   - partial_bytes_acked does not count the bytes of Duplicate TSNs that
//     §7.2.2 adds: a duplicate is the result of a spurious retransmission
//     and crediting it would grow cwnd for sending twice.
//   - RTT measurement (C4, C5) times one chunk per round trip: the timed
//     chunk is the first new chunk sent while none is timed, and the
//     measurement is dropped when a chunk at or below it is retransmitted.
//     RACK takes its own samples from every SACK (RFC 8985 §6.2).
//   - Miss indications (§7.2.4) count for a chunk only if a chunk the SACK
//     newly acknowledges was transmitted after it: a retransmission below
//     the HTNA but sent after it is not missing yet, and counting it would
//     fast retransmit it again while it is in flight.
//   - A reneged chunk (gap-acked, then missing from a later SACK) counts
//     again in flightsize, gets one miss indication and T3-rtx (§6.2.1 D
//     iii, R4).
//   - Blocks of a SACK that are empty, start at 0, or are not in ascending
//     order are ignored; a SACK whose Cumulative TSN Ack is beyond the
//     highest TSN sent is dropped (SACKResult.Invalid).
//   - Sender-side silly window avoidance (§6.1 rule A) is left to the
//     association, which decides the chunk sizes.
type Sender struct {
	cfg   SenderConfig
	epoch time.Time
	pmdcs int

	// The retransmission queue: a ring of entries for TSNs cumAck+1 up to
	// nextTSN-1; those from nextSend on are queued and not yet sent.
	q        []sndEntry
	mask     uint32
	cumAck   TSN // the Cumulative TSN Ack Point
	nextSend TSN // the TSN of the next new chunk to transmit
	nextTSN  TSN // the TSN Queue gives the next chunk

	flight          int // flightsize: bytes sent, not acked, not marked lost
	rwnd            int // the peer's rwnd (§6.2.1); may go below 0 by overbooking
	peerARwnd       uint32
	numGapAcked     int // RACK.segs_sacked
	highestGapAcked TSN // valid when numGapAcked > 0
	numLost         int // chunks marked for retransmission, not yet resent
	lostLow         TSN // no chunk below it is marked for retransmission

	// Congestion control (§7.2).
	cwnd, ssthresh int
	pba            int // partial_bytes_acked
	recovery       ccRecovery
	recoveryExit   TSN     // the Fast Recovery exit point
	recoveryStart  sndTime // when the current recovery began
	rtxBypass      int     // retransmitted bytes allowed beyond cwnd
	onePacket      bool    // after T3-rtx: one packet in flight until an ack
	burstCap       int     // Max.Burst: flightsize limit for new data
	burstPackets   int     // the packets of new data burstCap allows
	burstOpen      bool    // no new data sent since the last SACK
	lastXmit       sndTime

	// RTO and RTT measurement (§6.3.1).
	rto      rtoEstimator
	timing   bool
	timedTSN TSN

	// RACK-TLP.
	rack                    rackState
	listHead, listTail      TSN // chunks in flight by Segment.xmit_ts
	listLen                 int
	xmitSeq                 uint64 // counts (re)transmissions
	sackSeq                 uint64 // the latest xmit_seq a SACK newly acknowledges
	tlpEnd                  TSN    // TLP.end_seq when tlpEndSet
	tlpEndSet, tlpIsRetrans bool
	tlpBackoff              int // probes sent since new data was last acknowledged
	probe                   sndProbe
	probeTSN                TSN // the chunk a sndProbeRtx retransmits

	// Deadlines; 0 means not armed.
	t3, rackTimer, pto, zwp sndTime

	// Failure detection (§8.1).
	errorCount int
	lastAck    sndTime // when a SACK last acknowledged new data
	busySince  sndTime // when data last became outstanding after none was
	lastSACK   sndTime // when a SACK was last accepted

	released []ReleasedChunk
}

// SenderConfig holds the parameters of a Sender. Zero fields take the
// defaults given.
type SenderConfig struct {
	// PMDCS is the Path Maximum Data Chunk Size (RFC 9260 §7.3): the
	// largest DATA chunk, header and padding included, that fits in one
	// packet on the path. cwnd, ssthresh and partial_bytes_acked count in
	// its units. It must be positive; DATA chunks given to Queue are no
	// larger.
	PMDCS int
	// InitialTSN is the TSN of the first DATA chunk: the Initial TSN this
	// endpoint sent in its INIT or INIT ACK.
	InitialTSN TSN
	// PeerRwnd is the a_rwnd of the peer's INIT or INIT ACK (§6.2.1 A).
	PeerRwnd uint32

	// RTOInitial, RTOMin and RTOMax are §6.3.1's RTO.Initial, RTO.Min and
	// RTO.Max; defaults DefaultRTOInitial, DefaultRTOMin, DefaultRTOMax.
	RTOInitial, RTOMin, RTOMax time.Duration
	// ClockGranularity is G of rule G1; default DefaultClockGranularity.
	ClockGranularity time.Duration

	// MaxBurst is §6.1 rule D's Max.Burst, packets of new data a single
	// SACK may release; default 4, negative disables it.
	MaxBurst int
	// L bounds slow start's growth per SACK to L*PMDCS (§7.2.1). Default
	// 2: "The positive integer L SHOULD be 1 and MAY be larger than 1. See
	// [RFC3465]", whose §2.2 recommends 2 so that delayed SACKs, one per
	// two packets, still double cwnd per round trip.
	L int
	// AssociationMaxRetrans is §8.1's Association.Max.Retrans; default
	// 10 (§16).
	AssociationMaxRetrans int
	// MaxAckDelay is RFC 8985's TLP.max_ack_delay, the peer's SACK delay
	// budget, added to the PTO when one chunk is in flight; default 200
	// ms, §16's SACK.Delay.
	MaxAckDelay time.Duration
	// MaxChunks bounds the retransmission queue, chunks queued and
	// outstanding together; rounded up to a power of 2 and at most 2^20
	// (far below §6.1's "The data sender MUST NOT use a TSN that is more
	// than 2^31 - 1 above the beginning TSN of the current send window");
	// default 4096. The ring starts small and doubles as needed up to the
	// bound.
	MaxChunks int
}

// ReleasedChunk is a DATA chunk the peer acknowledged cumulatively: the
// Sender no longer refers to its user data and Ref.
type ReleasedChunk struct {
	Data chunk.Data
	Ref  any
}

// SACKResult is what HandleSACK did with a SACK.
type SACKResult struct {
	// Dropped reports a SACK discarded without effect: out of order
	// (§6.2.1 D i) or Invalid.
	Dropped bool
	// Invalid reports a Cumulative TSN Ack beyond the highest TSN sent, a
	// protocol violation the association may answer with ABORT.
	Invalid bool
	// BytesAcked is the size of the chunks newly acknowledged, by the
	// Cumulative TSN Ack or by Gap Ack Blocks.
	BytesAcked int
	// Released lists the chunks the Cumulative TSN Ack covered, in TSN
	// order, for the association to release. It is valid until the next
	// call of HandleSACK.
	Released []ReleasedChunk
	// Lost is the number of chunks newly marked for retransmission; Next
	// returns them before new data.
	Lost int
	// Reneged is the number of chunks the peer had gap-acked that this
	// SACK no longer reports.
	Reneged int
}

// sndTime is a time as the duration since Sender.epoch; 0 means unset.
type sndTime time.Duration

type sndState uint8

const (
	sndSent          sndState = 1 << iota // transmitted at least once
	sndInFlight                           // counted in flightsize
	sndAcked                              // gap-acked
	sndLost                               // marked for retransmission
	sndFastRtx                            // ineligible for a subsequent Fast Retransmit
	sndRetransmitted                      // Segment.retransmitted
	sndInList                             // linked in the xmit_ts list
)

type sndProbe uint8

const (
	sndProbeNone sndProbe = iota
	sndProbeNew           // a TLP probe of new data is due
	sndProbeRtx           // a TLP probe retransmitting the highest TSN sent is due
)

// sndEntry is one DATA chunk of the retransmission queue.
type sndEntry struct {
	data       chunk.Data
	ref        any
	xmit       sndTime // Segment.xmit_ts: the last (re)transmission
	xmitSeq    uint64  // the order of the last (re)transmission
	size       int32   // the chunk's length with padding
	nRtx       uint16  // how many times it was retransmitted
	misses     uint8   // miss indications (§7.2.4)
	st         sndState
	prev, next TSN // xmit_ts list links
}

const (
	sndMinRing = 64
	sndMaxRing = 1 << 20
)

// NewSender returns a Sender for an association established at now.
func NewSender(cfg SenderConfig, now time.Time) *Sender {
	if cfg.PMDCS <= 0 {
		panic("sctp: SenderConfig.PMDCS must be positive")
	}
	if cfg.RTOInitial <= 0 {
		cfg.RTOInitial = DefaultRTOInitial
	}
	if cfg.RTOMin <= 0 {
		cfg.RTOMin = DefaultRTOMin
	}
	if cfg.RTOMax <= 0 {
		cfg.RTOMax = DefaultRTOMax
	}
	cfg.RTOMax = max(cfg.RTOMax, cfg.RTOMin)
	if cfg.ClockGranularity <= 0 {
		cfg.ClockGranularity = DefaultClockGranularity
	}
	if cfg.MaxBurst == 0 {
		cfg.MaxBurst = 4
	}
	if cfg.L <= 0 {
		cfg.L = 2
	}
	if cfg.AssociationMaxRetrans <= 0 {
		cfg.AssociationMaxRetrans = 10
	}
	if cfg.MaxAckDelay <= 0 {
		cfg.MaxAckDelay = 200 * time.Millisecond
	}
	if cfg.MaxChunks <= 0 {
		cfg.MaxChunks = 4096
	}
	cfg.MaxChunks = min(cfg.MaxChunks, sndMaxRing)
	n := sndMinRing
	for n < cfg.MaxChunks {
		n *= 2
	}
	cfg.MaxChunks = n
	ring := min(sndMinRing, n)
	s := &Sender{
		cfg: cfg,
		// The epoch lies a second before now so that no time of the
		// association is the unset 0.
		epoch:     now.Add(-time.Second),
		pmdcs:     cfg.PMDCS,
		q:         make([]sndEntry, ring),
		mask:      uint32(ring - 1),
		cumAck:    cfg.InitialTSN - 1,
		nextSend:  cfg.InitialTSN,
		nextTSN:   cfg.InitialTSN,
		rwnd:      int(cfg.PeerRwnd),
		peerARwnd: cfg.PeerRwnd,
		cwnd:      ccInitialCwnd(cfg.PMDCS),
		// §7.2.1: "The initial value of ssthresh SHOULD be arbitrarily
		// high (e.g., the size of the largest-possible advertised
		// window)."
		ssthresh: 1<<31 - 1,
		burstCap: 1<<31 - 1,
	}
	s.rto.init(cfg.RTOInitial, cfg.RTOMin, cfg.RTOMax, cfg.ClockGranularity)
	s.rack.reoWndMult = 1
	s.rack.fack = s.cumAck
	return s
}

func (s *Sender) at(now time.Time) sndTime {
	return sndTime(max(now.Sub(s.epoch), 1))
}

func (s *Sender) time(t sndTime) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return s.epoch.Add(time.Duration(t))
}

func (s *Sender) ent(tsn TSN) *sndEntry { return &s.q[uint32(tsn)&s.mask] }

// Queue appends a DATA chunk to the send queue, gives it the next TSN and
// returns it; d.TSN is ignored. d.UserData and ref are kept, not copied,
// until the chunk is acknowledged cumulatively and HandleSACK returns them
// in SACKResult.Released. Queue reports false, keeping nothing, when the
// queue holds SenderConfig.MaxChunks chunks. It panics if the chunk is
// larger than PMDCS, a programming error of the caller that would stall
// the association: no packet could carry the chunk.
func (s *Sender) Queue(d chunk.Data, ref any) (TSN, bool) {
	if d.Len() > s.pmdcs {
		panic("sctp: Sender.Queue: DATA chunk larger than PMDCS")
	}
	n := uint32(s.nextTSN - s.cumAck - 1)
	if n == uint32(len(s.q)) {
		if len(s.q) >= s.cfg.MaxChunks {
			return 0, false
		}
		s.sndGrow()
	}
	tsn := s.nextTSN
	d.TSN = uint32(tsn)
	e := s.ent(tsn)
	*e = sndEntry{data: d, ref: ref, size: int32(d.Len())}
	s.nextTSN++
	return tsn, true
}

func (s *Sender) sndGrow() {
	q := make([]sndEntry, 2*len(s.q))
	mask := uint32(len(q) - 1)
	for tsn := s.cumAck + 1; tsn != s.nextTSN; tsn++ {
		q[uint32(tsn)&mask] = *s.ent(tsn)
	}
	s.q, s.mask = q, mask
}

// Next returns the next DATA chunk to transmit in a packet with room bytes
// left for chunks, and records its transmission at now; it reports false
// when nothing may be sent now or the next chunk does not fit in room.
// The returned chunk's UserData is the slice given to Queue; its I bit
// (RFC 7053) may be set where the SACK is wanted without delay.
//
// The order is §6.1's: chunks marked for retransmission first, lowest TSN
// first, "limited by the current cwnd" (rule C), then a TLP probe, then new
// data as rule A (rwnd, zero window probes) and rule B (cwnd, exceeded by
// at most one chunk) allow, and Max.Burst (rule D).
func (s *Sender) Next(now time.Time, room int) (chunk.Data, bool) {
	t := s.at(now)
	if s.numLost > 0 {
		tsn, e := s.sndFirstLost()
		if int(e.size) > room {
			return chunk.Data{}, false
		}
		switch {
		case s.rtxBypass >= int(e.size):
			s.rtxBypass -= int(e.size)
		case s.onePacket:
			return chunk.Data{}, false
		case s.probe != sndProbeNone:
			// A probe is due while chunks wait for cwnd: the lowest of them
			// is the probe, the one whose SACK may advance the Cumulative
			// TSN Ack.
			s.sndTransmit(t, tsn, e, true)
			s.tlpSent(t, tsn, true)
			return s.sndOut(e, true)
		case s.flight >= s.cwnd:
			return chunk.Data{}, false
		}
		s.sndTransmit(t, tsn, e, true)
		return s.sndOut(e, false)
	}
	if s.onePacket {
		return chunk.Data{}, false
	}
	switch s.probe {
	case sndProbeNew:
		if s.nextSend == s.nextTSN || int(s.ent(s.nextSend).size) > s.rwnd {
			s.probe = sndProbeNone
			break
		}
		tsn, e := s.nextSend, s.ent(s.nextSend)
		if int(e.size) > room {
			return chunk.Data{}, false
		}
		s.sndTransmit(t, tsn, e, false)
		s.tlpSent(t, tsn, false)
		return s.sndOut(e, true)
	case sndProbeRtx:
		tsn := s.probeTSN
		e := s.ent(tsn)
		if !s.cumAck.Before(tsn) || !tsn.Before(s.nextSend) || e.st&sndInFlight == 0 {
			s.probe = sndProbeNone
			break
		}
		if int(e.size) > room {
			return chunk.Data{}, false
		}
		s.sndTransmit(t, tsn, e, true)
		s.tlpSent(t, tsn, true)
		return s.sndOut(e, true)
	}
	if s.nextSend == s.nextTSN {
		return chunk.Data{}, false
	}
	tsn, e := s.nextSend, s.ent(s.nextSend)
	if int(e.size) > room {
		return chunk.Data{}, false
	}
	s.ccIdle(t)
	// Rule B: "The sender MUST NOT transmit new data to a given transport
	// address if it has cwnd + (PMDCS - 1) or more bytes of data
	// outstanding to that transport address. If data is available, the
	// sender SHOULD exceed cwnd by up to (PMDCS - 1) bytes on a new data
	// transmission if the flightsize does not currently reach cwnd."
	if s.flight >= s.cwnd || s.flight >= s.burstCap {
		return chunk.Data{}, false
	}
	s.burstOpen = false
	if int(e.size) > s.rwnd {
		// Rule A: no new data when "rwnd is smaller than the size of the
		// next DATA chunk ..., except for zero window probes". "A zero
		// window probe SHOULD only be sent when all outstanding DATA
		// chunks have been cumulatively acknowledged and no DATA chunks
		// are in flight", and "The sender SHOULD send the first zero
		// window probe after 1 RTO when it detects that the receiver has
		// closed its window"; T3-rtx then backs the probe interval off.
		if s.nextSend != s.cumAck+1 {
			return chunk.Data{}, false
		}
		if s.zwp == 0 {
			s.zwp = t + sndTime(s.rto.rto)
			return chunk.Data{}, false
		}
		if t < s.zwp {
			return chunk.Data{}, false
		}
		s.zwp = 0
		s.sndTransmit(t, tsn, e, false)
		return s.sndOut(e, true)
	}
	s.sndTransmit(t, tsn, e, false)
	s.tlpArm(t)
	return s.sndOut(e, false)
}

// sndOut returns the chunk Next hands out, with the I bit set where its
// SACK is wanted at once. §6.1: "Whenever the sender of a DATA chunk can
// benefit from the corresponding SACK chunk being sent back without delay,
// the sender MAY set the I bit in the DATA chunk header": a probe (TLP or
// zero window), a chunk that fills cwnd or rwnd ("The sending of a DATA
// chunk fills the congestion or receiver window"), and the last chunk
// queued, so that a tail does not wait for the peer's delayed SACK.
func (s *Sender) sndOut(e *sndEntry, probe bool) (chunk.Data, bool) {
	d := e.data
	if probe || s.flight >= s.cwnd || s.rwnd < s.pmdcs || s.nextSend == s.nextTSN && s.numLost == 0 {
		d.Flags |= chunk.FlagImmediate
	}
	return d, true
}

// sndFirstLost returns the lowest TSN marked for retransmission; numLost
// is not 0.
func (s *Sender) sndFirstLost() (TSN, *sndEntry) {
	for tsn := s.lostLow; tsn != s.nextSend; tsn++ {
		e := s.ent(tsn)
		if e.st&sndLost != 0 {
			s.lostLow = tsn
			return tsn, e
		}
	}
	panic("sctp: Sender: the count of chunks marked for retransmission is out of step")
}

// sndTransmit records a transmission (rtx: a retransmission) of tsn.
func (s *Sender) sndTransmit(t sndTime, tsn TSN, e *sndEntry, rtx bool) {
	if rtx {
		// RACK_retransmit_data: "Segment.retransmitted = TRUE".
		e.st |= sndRetransmitted
		e.nRtx++
		e.misses = 0
		if e.st&sndLost != 0 {
			e.st &^= sndLost
			s.numLost--
		}
		// C5: "RTT measurements SHOULD only be made using a DATA chunk
		// with TSN r if no DATA chunk with TSN less than or equal to r
		// was retransmitted since the DATA chunk with TSN r was sent
		// first."
		if s.timing && tsn.AtOrBefore(s.timedTSN) {
			s.timing = false
		}
	} else {
		if s.nextSend == s.cumAck+1 {
			s.busySince = t
		}
		e.st |= sndSent
		s.nextSend++
		if !s.timing {
			s.timing = true
			s.timedTSN = tsn
		}
	}
	e.xmit = t
	s.xmitSeq++
	e.xmitSeq = s.xmitSeq
	s.listRemove(tsn, e)
	s.listPushTail(tsn, e)
	if e.st&sndInFlight == 0 {
		e.st |= sndInFlight
		s.flight += int(e.size)
	}
	// §6.2.1 B: "Any time a DATA chunk is transmitted (or retransmitted)
	// to a peer, the endpoint subtracts the data size of the chunk from
	// the rwnd of that peer."
	s.rwnd -= int(e.size)
	s.lastXmit = t
	// R1 and §6.1: "Whenever a transmission or retransmission is made to
	// any address, if the T3-rtx timer of that address is not currently
	// running, the sender MUST start that timer. If the timer for that
	// address is already running, the sender MUST restart the timer if
	// the earliest (i.e., lowest TSN) outstanding DATA chunk sent to that
	// address is being retransmitted."
	if s.t3 == 0 || rtx && tsn == s.cumAck+1 {
		s.t3 = t + sndTime(s.rto.rto)
	}
}

// sndMarkLost marks a chunk in flight for retransmission and reports
// whether it was a retransmission sent during the current recovery.
func (s *Sender) sndMarkLost(tsn TSN, e *sndEntry) bool {
	if e.st&(sndLost|sndAcked) != 0 {
		return false
	}
	e.st |= sndLost
	if e.st&sndInFlight != 0 {
		e.st &^= sndInFlight
		s.flight -= int(e.size)
		// §6.2.1 C: "Any time a DATA chunk is marked for retransmission
		// ... add the data size of those chunks to the rwnd."
		s.rwnd += int(e.size)
	}
	s.listRemove(tsn, e)
	if s.numLost == 0 || tsn.Before(s.lostLow) {
		s.lostLow = tsn
	}
	s.numLost++
	return e.st&sndRetransmitted != 0 && s.recovery != ccNone && e.xmit >= s.recoveryStart
}

func (s *Sender) listRemove(tsn TSN, e *sndEntry) {
	if e.st&sndInList == 0 {
		return
	}
	e.st &^= sndInList
	if tsn == s.listHead {
		s.listHead = e.next
	} else {
		s.ent(e.prev).next = e.next
	}
	if tsn == s.listTail {
		s.listTail = e.prev
	} else {
		s.ent(e.next).prev = e.prev
	}
	s.listLen--
}

func (s *Sender) listPushTail(tsn TSN, e *sndEntry) {
	e.st |= sndInList
	if s.listLen == 0 {
		s.listHead = tsn
	} else {
		s.ent(s.listTail).next = tsn
		e.prev = s.listTail
	}
	s.listTail = tsn
	s.listLen++
}

// listInsertSorted links a chunk by its xmit_seq among those in the list.
func (s *Sender) listInsertSorted(tsn TSN, e *sndEntry) {
	at := s.listHead
	for n := s.listLen; n > 0; n-- {
		o := s.ent(at)
		if o.xmitSeq > e.xmitSeq {
			// Insert before at.
			e.st |= sndInList
			e.next = at
			if at == s.listHead {
				s.listHead = tsn
			} else {
				e.prev = o.prev
				s.ent(o.prev).next = tsn
			}
			o.prev = tsn
			s.listLen++
			return
		}
		at = o.next
	}
	s.listPushTail(tsn, e)
}

// HandleSACK processes a received SACK chunk (§6.2.1): it advances the
// Cumulative TSN Ack Point, marks chunks gap-acked or reneged, updates
// rwnd, the RTO, cwnd and the RACK state, marks lost chunks for
// retransmission and rearms T3-rtx, the RACK timer and the PTO. The lists
// of sack are read during the call only.
func (s *Sender) HandleSACK(now time.Time, sack chunk.SACK) SACKResult {
	t := s.at(now)
	s.released = s.released[:0]
	cum := TSN(sack.CumulativeTSNAck)
	// D i: "If Cumulative TSN Ack is less than the Cumulative TSN Ack
	// Point, then drop the SACK chunk."
	if cum.Before(s.cumAck) {
		return SACKResult{Dropped: true}
	}
	highestSent := s.nextSend - 1
	if cum.After(highestSent) {
		return SACKResult{Dropped: true, Invalid: true}
	}
	var res SACKResult
	s.lastSACK = t
	preFlight := s.flight
	advanced := cum != s.cumAck
	var htna TSN
	htnaSet := false
	s.sackSeq = 0

	// The Cumulative TSN Ack.
	for tsn := s.cumAck + 1; tsn.AtOrBefore(cum); tsn++ {
		e := s.ent(tsn)
		if e.st&sndAcked == 0 {
			res.BytesAcked += int(e.size)
			s.sndOnNewlyAcked(t, tsn, e)
			htna, htnaSet = tsn, true
		} else {
			s.numGapAcked--
		}
		if e.st&sndInFlight != 0 {
			s.flight -= int(e.size)
		}
		if e.st&sndLost != 0 {
			s.numLost--
		}
		s.listRemove(tsn, e)
		s.released = append(s.released, ReleasedChunk{Data: e.data, Ref: e.ref})
		*e = sndEntry{}
	}
	s.cumAck = cum
	if s.numLost > 0 && s.lostLow.AtOrBefore(cum) {
		s.lostLow = cum + 1
	}
	if s.timing && s.timedTSN.AtOrBefore(cum) {
		s.timing = false
	}

	// The Gap Ack Blocks: a merge of the blocks, in ascending order, with
	// the chunks from cum+1 up to the last block or the highest chunk
	// gap-acked before, whichever is higher.
	oldHighest := cum
	if s.numGapAcked > 0 && s.highestGapAcked.After(cum) {
		oldHighest = s.highestGapAcked
	}
	prevEnd := cum
	for i := range sack.GapAckBlocks.Len() {
		b := sack.GapAckBlocks.At(i)
		start, end := cum+TSN(b.Start), cum+TSN(b.End)
		if b.Start == 0 || b.Start > b.End || !start.After(prevEnd) {
			continue
		}
		if start.After(highestSent) {
			break
		}
		if end.After(highestSent) {
			end = highestSent
		}
		res.Reneged += s.sndRenege(t, prevEnd+1, start)
		for tsn := start; tsn.AtOrBefore(end); tsn++ {
			e := s.ent(tsn)
			if e.st&sndAcked != 0 {
				continue
			}
			e.st |= sndAcked
			s.numGapAcked++
			res.BytesAcked += int(e.size)
			if e.st&sndInFlight != 0 {
				e.st &^= sndInFlight
				s.flight -= int(e.size)
			}
			if e.st&sndLost != 0 {
				// The original arrived after all: nothing to resend.
				e.st &^= sndLost
				s.numLost--
			}
			s.listRemove(tsn, e)
			s.sndOnNewlyAcked(t, tsn, e)
			htna, htnaSet = tsn, true
		}
		prevEnd = end
	}
	if oldHighest.After(prevEnd) {
		res.Reneged += s.sndRenege(t, prevEnd+1, oldHighest+1)
	}
	s.highestGapAcked = prevEnd

	if res.BytesAcked > 0 {
		// §8.1: "The counter used for endpoint failure detection MUST be
		// reset each time a DATA chunk sent to that peer endpoint is
		// acknowledged".
		s.errorCount = 0
		s.lastAck = t
		s.onePacket = false
	}

	// Note to §7.2.4: "Before the above adjustments, if the received SACK
	// chunk also acknowledges new DATA chunks and advances the Cumulative
	// TSN Ack Point, the cwnd adjustment rules defined in Sections 7.2.1
	// and 7.2.2 MUST be applied first."
	s.ccOnAck(res.BytesAcked, preFlight, advanced)
	exiting := false
	if s.recovery != ccNone && !cum.Before(s.recoveryExit) {
		// D iv: "If the Cumulative TSN Ack matches or exceeds the Fast
		// Recovery exit point (Section 7.2.4), Fast Recovery is exited."
		s.recovery = ccNone
		s.rtxBypass = 0
		exiting = true
	}
	if s.nextSend == s.cumAck+1 {
		// §7.2.2: "When all of the data transmitted by the sender has
		// been acknowledged by the receiver, partial_bytes_acked is
		// initialized to 0."
		s.pba = 0
	}

	// Loss detection: miss indications, then RACK.
	lostRtx := false
	if htnaSet && !s.rack.reorderingSeen {
		lost, lr := s.sndCountMisses(cum, htna, advanced)
		res.Lost += lost
		lostRtx = lostRtx || lr
	}
	s.rackUpdate(t)
	s.rackUpdateReoWnd(sack.DuplicateTSNs.Len() > 0, exiting)
	lost, lr := s.rackDetectLoss(t)
	res.Lost += lost
	lostRtx = lostRtx || lr
	s.tlpProcessAck(sack.DuplicateTSNs)
	if res.Lost > 0 {
		s.ccOnLoss(t, lostRtx)
	}

	// D ii: "Set rwnd equal to the newly received a_rwnd minus the number
	// of bytes still outstanding after processing the Cumulative TSN Ack
	// and the Gap Ack Blocks."
	s.peerARwnd = sack.ARwnd
	s.rwnd = int(sack.ARwnd) - s.flight
	if s.rwnd >= s.pmdcs {
		s.zwp = 0
	}

	// Timers.
	if s.nextSend == s.cumAck+1 {
		// R2: "Whenever all outstanding data sent to an address have been
		// acknowledged, turn off the T3-rtx timer of that address."
		s.t3 = 0
		s.pto = 0
		s.rackTimer = 0
	} else if advanced {
		// R3: "Whenever a SACK chunk is received that acknowledges the
		// DATA chunk with the earliest outstanding TSN for that address,
		// restart the T3-rtx timer for that address with its current RTO
		// (if there is still outstanding data on that address)."
		s.t3 = t + sndTime(s.rto.rto)
	}
	if res.BytesAcked > 0 {
		s.tlpBackoff = 0
		s.tlpArm(t)
	} else if s.flight == 0 {
		s.pto = 0
	}
	if s.cfg.MaxBurst > 0 {
		// Rule D: "if ((flightsize + Max.Burst * PMDCS) < cwnd) cwnd =
		// flightsize + Max.Burst * PMDCS", applied without changing cwnd.
		// Each SACK releases Max.Burst packets: SACKs handled one after
		// the other with no transmission between them (the association
		// handles the packets that wait before it sends) add up, as
		// if each had been followed by its own burst.
		if !s.burstOpen {
			s.burstPackets = 0
		}
		s.burstPackets += s.cfg.MaxBurst
		s.burstOpen = true
		s.burstCap = s.flight + s.burstPackets*s.pmdcs
	}
	res.Released = s.released
	return res
}

// sndOnNewlyAcked handles a chunk acknowledged for the first time.
func (s *Sender) sndOnNewlyAcked(t sndTime, tsn TSN, e *sndEntry) {
	s.sackSeq = max(s.sackSeq, e.xmitSeq)
	// C4 and C5: the timed chunk gives the round trip's RTT measurement;
	// Karn's algorithm: "RTT measurements MUST NOT be made using chunks
	// that were retransmitted".
	if s.timing && tsn == s.timedTSN {
		s.timing = false
		if e.st&sndRetransmitted == 0 {
			s.rto.sample(time.Duration(t - e.xmit))
		}
	}
	s.rackOnDelivered(t, tsn, e)
}

// sndRenege un-acks the gap-acked chunks from lo up to hi (exclusive),
// which a SACK no longer reports, and returns how many there were. D iii:
// "If the SACK chunk is missing a TSN that was previously acknowledged via
// a Gap Ack Block (e.g., the data receiver reneged on the data), then
// consider the corresponding DATA that might be possibly missing: Count
// one miss indication towards Fast Retransmit as described in Section
// 7.2.4, and if no retransmit timer is running for the destination address
// to which the DATA chunk was originally transmitted, then T3-rtx is
// started for that destination address."
func (s *Sender) sndRenege(t sndTime, lo, hi TSN) int {
	if s.numGapAcked == 0 {
		return 0
	}
	n := 0
	for tsn := lo; tsn != hi; tsn++ {
		e := s.ent(tsn)
		if e.st&sndAcked == 0 {
			continue
		}
		e.st &^= sndAcked
		s.numGapAcked--
		e.st |= sndInFlight
		s.flight += int(e.size)
		s.listInsertSorted(tsn, e)
		if e.st&sndFastRtx == 0 && e.misses < 255 {
			e.misses++
		}
		n++
	}
	if n > 0 && s.t3 == 0 {
		s.t3 = t + sndTime(s.rto.rto)
	}
	return n
}

// sndCountMisses applies §7.2.4's miss indications and marks chunks with
// three for Fast Retransmit. It returns how many it marked and whether
// one was a retransmission sent during the current recovery.
func (s *Sender) sndCountMisses(cum, htna TSN, advanced bool) (int, bool) {
	// "For each incoming SACK chunk, miss indications are incremented only
	// for missing TSNs prior to the HTNA in the SACK chunk. ... If an
	// endpoint is in Fast Recovery and a SACK chunks arrives that
	// advances the Cumulative TSN Ack Point, the miss indications are
	// incremented for all TSNs reported missing in the SACK chunk."
	limit := htna
	if s.recovery == ccFast && advanced && s.numGapAcked > 0 && s.highestGapAcked.After(limit) {
		limit = s.highestGapAcked
	}
	lost := 0
	lostRtx := false
	for tsn := cum + 1; tsn.Before(limit); tsn++ {
		e := s.ent(tsn)
		if e.st&(sndAcked|sndLost|sndFastRtx) != 0 || e.st&sndInFlight == 0 {
			continue
		}
		if e.xmitSeq > s.sackSeq {
			// A retransmission sent after every chunk this SACK newly
			// acknowledges: the SACK cannot report it missing.
			continue
		}
		e.misses++
		// "When the third consecutive miss indication is received for
		// one or more TSNs, the data sender does the following: 1) Mark
		// the DATA chunk(s) with three miss indications for
		// retransmission." Step 5: "Mark the DATA chunk(s) as being fast
		// retransmitted and thus ineligible for a subsequent Fast
		// Retransmit."
		if e.misses >= rackDupThresh {
			e.st |= sndFastRtx
			if s.sndMarkLost(tsn, e) {
				lostRtx = true
			}
			lost++
		}
	}
	return lost, lostRtx
}

// OnTimeout handles the deadlines that have passed at now: T3-rtx, the
// RACK reordering timer, the PTO. The run loop calls it when the timer it
// armed at NextDeadline fires, then calls Next.
func (s *Sender) OnTimeout(now time.Time) {
	t := s.at(now)
	if s.t3 != 0 && t >= s.t3 {
		s.sndOnT3(t)
		return
	}
	if s.rackTimer != 0 && t >= s.rackTimer {
		if lost, lostRtx := s.rackDetectLoss(t); lost > 0 {
			s.ccOnLoss(t, lostRtx)
		}
	}
	if s.pto != 0 && t >= s.pto {
		s.tlpOnPTO()
	}
}

// sndOnT3 handles a T3-rtx expiry (§6.3.3).
func (s *Sender) sndOnT3(t sndTime) {
	s.t3 = 0
	if s.nextSend == s.cumAck+1 {
		return
	}
	// §8.2: "Each time the T3-rtx timer expires on any address ... the
	// error counter of that destination address will be incremented."
	// Zero window probes do not count while SACKs come back (§6.1 rule
	// A: "the unacknowledged window probes SHOULD NOT increment the error
	// counter").
	if !(s.peerARwnd == 0 && s.lastSACK != 0 && t-s.lastSACK <= sndTime(s.rto.rto)) {
		s.errorCount++
	}
	s.ccOnT3(t)     // E1
	s.rto.backOff() // E2
	s.tlpReset()
	s.pto = 0
	s.rackTimer = 0
	s.rack.reoWnd = s.rackReoWnd()
	// E3: the earliest outstanding chunks are retransmitted first; RACK
	// marks the others sent long enough ago.
	s.rackMarkLossesOnRTO(t)
	s.burstCap = 1<<31 - 1
}

// Drain empties the queue when the association ends (ABORT, or the peer
// found unreachable: §8.1, "optionally report back all outstanding user
// data remaining in its outbound queue") and returns every chunk it held,
// sent or not, in TSN order, for the association to release. The result
// is valid until the next call of Drain or HandleSACK. Timers are
// disarmed; the Sender is not used afterwards.
func (s *Sender) Drain() []ReleasedChunk {
	s.released = s.released[:0]
	for tsn := s.cumAck + 1; tsn != s.nextTSN; tsn++ {
		e := s.ent(tsn)
		s.released = append(s.released, ReleasedChunk{Data: e.data, Ref: e.ref})
		*e = sndEntry{}
	}
	s.cumAck = s.nextTSN - 1
	s.nextSend = s.nextTSN
	s.flight, s.numGapAcked, s.numLost, s.listLen = 0, 0, 0, 0
	s.t3, s.rackTimer, s.pto, s.zwp = 0, 0, 0, 0
	s.probe = sndProbeNone
	return s.released
}

// ObserveRTT feeds an RTT measurement taken outside DATA (the handshake's,
// a HEARTBEAT's, §8.3) into the RTO computation.
func (s *Sender) ObserveRTT(rtt time.Duration) {
	s.rto.sample(rtt)
}

// HeartbeatUnanswered counts a HEARTBEAT not acknowledged within an RTO
// toward Association.Max.Retrans (§8.1).
func (s *Sender) HeartbeatUnanswered() { s.errorCount++ }

// HeartbeatAcked handles a HEARTBEAT ACK with the RTT its HEARTBEAT
// measured. §8.1: "When a HEARTBEAT ACK chunk is received from the peer
// endpoint, the counter SHOULD also be reset. The receiver of the
// HEARTBEAT ACK chunk MAY choose not to clear the counter if there is
// outstanding data on the association." It is kept then, so that a peer
// answering HEARTBEATs but acknowledging no DATA still reaches the limit.
func (s *Sender) HeartbeatAcked(rtt time.Duration) {
	s.rto.sample(rtt)
	if s.nextSend == s.cumAck+1 {
		s.errorCount = 0
	}
}

// Dead reports that the error counter exceeds Association.Max.Retrans:
// "the endpoint SHOULD consider the peer endpoint unreachable and SHALL
// stop transmitting any more data to it" (§8.1).
func (s *Sender) Dead() bool { return s.errorCount > s.cfg.AssociationMaxRetrans }

// ErrorCount returns the association error counter (§8.1).
func (s *Sender) ErrorCount() int { return s.errorCount }

// LastAck returns when a SACK last acknowledged new data, or the zero
// time if none has.
func (s *Sender) LastAck() time.Time { return s.time(s.lastAck) }

// SilentSince returns the zero time when no data is outstanding, and
// otherwise the time since which the peer has acknowledged nothing new:
// when a SACK last acknowledged new data or, if later, when data became
// outstanding after none was. The run loop reports the peer dead when
// now - SilentSince() exceeds its time bound, whatever the error counter
// says.
func (s *Sender) SilentSince() time.Time {
	if !s.Outstanding() {
		return time.Time{}
	}
	return s.time(max(s.lastAck, s.busySince))
}

// NextDeadline returns the earliest armed deadline (T3-rtx, the RACK
// reordering timer, the PTO, the zero window probe), or the zero time.
func (s *Sender) NextDeadline() time.Time {
	d := sndTime(0)
	for _, x := range [...]sndTime{s.t3, s.rackTimer, s.pto, s.zwp} {
		if x != 0 && (d == 0 || x < d) {
			d = x
		}
	}
	return s.time(d)
}

// T3Deadline returns when T3-rtx expires, or the zero time.
func (s *Sender) T3Deadline() time.Time { return s.time(s.t3) }

// RACKDeadline returns when the RACK reordering timer expires, or the zero
// time.
func (s *Sender) RACKDeadline() time.Time { return s.time(s.rackTimer) }

// PTODeadline returns when the TLP PTO expires, or the zero time.
func (s *Sender) PTODeadline() time.Time { return s.time(s.pto) }

// FlightSize returns flightsize: bytes sent, not acknowledged and not
// marked for retransmission.
func (s *Sender) FlightSize() int { return s.flight }

// Cwnd returns cwnd.
func (s *Sender) Cwnd() int { return s.cwnd }

// Ssthresh returns ssthresh.
func (s *Sender) Ssthresh() int { return s.ssthresh }

// PartialBytesAcked returns partial_bytes_acked.
func (s *Sender) PartialBytesAcked() int { return s.pba }

// Rwnd returns the peer's rwnd as the sender sees it (§6.2.1).
func (s *Sender) Rwnd() int { return max(s.rwnd, 0) }

// RTO returns the current RTO, backoff included.
func (s *Sender) RTO() time.Duration { return s.rto.rto }

// SRTT returns SRTT and RTTVAR, zero before any measurement.
func (s *Sender) SRTT() (srtt, rttvar time.Duration) { return s.rto.srtt, s.rto.rttvar }

// InFastRecovery reports whether the sender is in Fast Recovery.
func (s *Sender) InFastRecovery() bool { return s.recovery == ccFast }

// CumulativeTSNAck returns the Cumulative TSN Ack Point.
func (s *Sender) CumulativeTSNAck() TSN { return s.cumAck }

// Queued returns how many chunks the queue holds, sent or not, not yet
// acknowledged cumulatively.
func (s *Sender) Queued() int { return int(uint32(s.nextTSN - s.cumAck - 1)) }

// Unsent returns how many queued chunks were never transmitted.
func (s *Sender) Unsent() int { return int(uint32(s.nextTSN - s.nextSend)) }

// Outstanding reports whether chunks were sent and are not yet
// acknowledged cumulatively.
func (s *Sender) Outstanding() bool { return s.nextSend != s.cumAck+1 }
