package sctp

import (
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// RACK-TLP (RFC 8985) on TSNs.
//
// RFC 8985 is written for TCP sequence ranges; here a segment is one DATA
// chunk and its end_seq is its TSN, "SACKed" is gap-acked, a cumulative
// ACK is the Cumulative TSN Ack, SND.NXT is the TSN after the highest one
// sent, and a DSACK is a Duplicate TSN report of a SACK (RFC 9260 §3.3.4:
// the receiver reports every TSN it received more than once, which is what
// a DSACK tells a TCP sender).
//
// The scoreboard is the retransmission queue; chunks in flight are also
// linked in the order of their Segment.xmit_ts (§6.2 step 5's "separate
// doubly linked list ordered by Segment.xmit_ts"), so that loss detection
// visits the chunks it marks lost and one more.
//
// RACK_sent_after breaks ties of Segment.xmit_ts "by using the TCP
// sequence space". Chunks leave in bursts at one instant, retransmissions
// (lower TSNs) after new data as often as before, so the order of
// transmission itself breaks ties here: every (re)transmission takes the
// next value of a counter, Segment.xmit_seq.

const (
	// rackDupThresh is RFC 8985's DupThresh, SCTP's three miss
	// indications.
	rackDupThresh = 3
	// rackReoWndPersist: "RACK persists using the inflated RACK.reo_wnd
	// for up to 16 loss recoveries".
	rackReoWndPersist = 16
	// rackMinRTTWindow is the window of the RACK.min_RTT filter: "The
	// sender SHOULD track a windowed min-filtered estimate of recent RTT
	// measurements that can adapt when migrating to significantly longer
	// paths".
	rackMinRTTWindow = 10 * time.Second
)

// rackState is RFC 8985 §5.3's per-connection variables.
type rackState struct {
	xmitTS         sndTime // RACK.xmit_ts; 0 until a chunk is delivered
	xmitSeq        uint64  // RACK.segment's xmit_seq, in place of RACK.end_seq
	rtt            sndTime // RACK.rtt
	minRTT         sndTime // RACK.min_RTT; 0 until the first sample
	minRTTAt       sndTime // when minRTT was taken
	fack           TSN     // RACK.fack
	reorderingSeen bool    // RACK.reordering_seen
	reoWnd         sndTime // RACK.reo_wnd
	reoWndMult     int     // RACK.reo_wnd_mult
	reoWndPersist  int     // RACK.reo_wnd_persist
	dsackRound     TSN     // RACK.dsack_round when dsackRoundSet
	dsackRoundSet  bool

	// Candidate for step 2 while a SACK is processed: the newly
	// acknowledged chunk sent last that passes the spurious checks.
	candSet  bool
	candXmit sndTime
	candSeq  uint64
}

// rackOnDelivered runs steps 1 to 3 for one newly acknowledged chunk;
// chunks are passed in ascending TSN order.
func (s *Sender) rackOnDelivered(t sndTime, tsn TSN, e *sndEntry) {
	r := &s.rack
	rtt := t - e.xmit
	retransmitted := e.st&sndRetransmitted != 0
	// Step 3: "If a never-retransmitted segment that's below RACK.fack is
	// (selectively or cumulatively) acknowledged, it has been delivered
	// out of order."
	if tsn.After(r.fack) {
		r.fack = tsn
	} else if tsn.Before(r.fack) && !retransmitted {
		r.reorderingSeen = true
	}
	// Step 2: "ignore a segment as invalid if any of its sequence range
	// has been retransmitted before and if ... The segment was last
	// retransmitted less than RACK.min_rtt ago." SCTP has no timestamp
	// option, so the second check is the only one.
	if retransmitted && rtt < r.minRTT {
		return
	}
	if !retransmitted {
		// Step 1: the windowed minimum, from unambiguous samples only.
		if r.minRTT == 0 || rtt <= r.minRTT || t-r.minRTTAt > sndTime(rackMinRTTWindow) {
			r.minRTT = max(rtt, 1)
			r.minRTTAt = t
		}
	}
	if !r.candSet || e.xmitSeq > r.candSeq {
		r.candSet = true
		r.candXmit = e.xmit
		r.candSeq = e.xmitSeq
	}
}

// rackUpdate finishes step 2 for a SACK: "update the RACK.rtt to be the
// RTT sample calculated using this ACK. Furthermore, record the most
// recent Segment.xmit_ts in RACK.xmit_ts if it is ahead of RACK.xmit_ts."
func (s *Sender) rackUpdate(t sndTime) {
	r := &s.rack
	if !r.candSet {
		return
	}
	r.candSet = false
	r.rtt = t - r.candXmit
	if r.xmitTS == 0 || r.candSeq > r.xmitSeq {
		r.xmitTS = r.candXmit
		r.xmitSeq = r.candSeq
	}
}

// rackUpdateReoWnd is step 4, RACK_update_reo_wnd(). dsack says the SACK
// reported Duplicate TSNs; exiting says it ended a recovery.
func (s *Sender) rackUpdateReoWnd(dsack, exiting bool) {
	r := &s.rack
	if r.dsackRoundSet && !s.cumAck.Before(r.dsackRound) {
		r.dsackRoundSet = false
	}
	// "Grow the reordering window per round that sees DSACK. Reset the
	// window after 16 DSACK-free recoveries".
	if !r.dsackRoundSet && dsack {
		r.dsackRound = s.nextSend - 1
		r.dsackRoundSet = true
		r.reoWndMult++
		r.reoWndPersist = rackReoWndPersist
	} else if exiting {
		r.reoWndPersist--
		if r.reoWndPersist <= 0 {
			r.reoWndMult = 1
		}
	}
	r.reoWnd = s.rackReoWnd()
}

// rackReoWnd returns RACK.reo_wnd for the current state.
func (s *Sender) rackReoWnd() sndTime {
	r := &s.rack
	if !r.reorderingSeen {
		// "when no reordering has been observed, the RACK.reo_wnd is set
		// to 0 both upon entering and during fast recovery or RTO
		// recovery", and when RACK.segs_sacked >= DupThresh.
		if s.recovery != ccNone || s.numGapAcked >= rackDupThresh {
			return 0
		}
	}
	// "Return min(RACK.reo_wnd_mult * RACK.min_RTT / 4, SRTT)"
	w := sndTime(r.reoWndMult) * r.minRTT / 4
	if s.rto.measured {
		w = min(w, sndTime(s.rto.srtt))
	}
	return w
}

// rackDetectLoss is step 5, RACK_detect_loss_and_arm_timer(): "For each
// segment that has not been SACKed, RACK considers that segment lost if
// another segment that was sent later has been delivered and the
// reordering window has passed." It marks those chunks for retransmission
// and arms the RACK reordering timer for the earliest chunk sent before
// RACK.xmit_ts that is still within the window. It reports how many
// chunks it marked and whether one was a retransmission sent during the
// current recovery.
func (s *Sender) rackDetectLoss(t sndTime) (lost int, lostRtx bool) {
	r := &s.rack
	s.rackTimer = 0
	if r.xmitTS == 0 {
		return 0, false
	}
	tsn := s.listHead
	for n := s.listLen; n > 0; n-- {
		e := s.ent(tsn)
		next := e.next
		if e.xmitSeq >= r.xmitSeq {
			// The list is in the order of transmission: no later chunk
			// was sent before RACK.segment.
			break
		}
		// "remaining = Segment.xmit_ts + RACK.rtt + RACK.reo_wnd - Now()"
		remaining := e.xmit + r.rtt + r.reoWnd - t
		if remaining > 0 {
			// Later chunks in the list have later deadlines; the timer
			// fires for this one and the scan runs again.
			s.rackTimer = t + remaining
			break
		}
		if s.sndMarkLost(tsn, e) {
			lostRtx = true
		}
		lost++
		tsn = next
	}
	return lost, lostRtx
}

// rackMarkLossesOnRTO is RFC 8985 §6.3, RACK_mark_losses_on_RTO(): "RACK
// marks the first outstanding segment as lost (since it was sent an RTO
// ago); for all the other segments, RACK only marks the segment as lost
// if the time elapsed since the segment was transmitted is at least the
// sum of the recent RTT and the reordering window."
func (s *Sender) rackMarkLossesOnRTO(t sndTime) {
	first := true
	for tsn := s.cumAck + 1; tsn != s.nextSend; tsn++ {
		e := s.ent(tsn)
		if e.st&sndInFlight == 0 {
			continue
		}
		if first || e.xmit+s.rack.rtt+s.rack.reoWnd-t <= 0 {
			s.sndMarkLost(tsn, e)
		}
		first = false
	}
}

// tlpReset is TLP_init(): "Reset TLP.is_retrans and TLP.end_seq when
// initiating a connection, fast recovery, or RTO recovery."
func (s *Sender) tlpReset() {
	s.tlpEndSet = false
	s.tlpIsRetrans = false
	s.probe = sndProbeNone
}

// tlpMaxBackoff bounds the doubling of consecutive PTOs; T3-rtx comes
// first anyway.
const tlpMaxBackoff = 10

// tlpArm starts or restarts the PTO (RFC 8985 §7.2), TLP_calc_PTO():
//
//	If SRTT is available:
//	    PTO = 2 * SRTT
//	    If FlightSize is one segment:
//	       PTO += TLP.max_ack_delay
//	Else:
//	    PTO = 1 sec
//	If Now() + PTO > TCP_RTO_expiration():
//	    PTO = TCP_RTO_expiration() - Now()
//
// doubled for each probe sent since feedback last acknowledged new data.
//
// RFC 8985 arms it "after transmitting new data (that was not itself a
// loss probe) or upon receiving an ACK that cumulatively acknowledges new
// data unless it is already in fast recovery, RTO recovery, or segments
// have been SACKed", leaving those cases to the RACK reordering timer. That
// timer needs a chunk delivered after the lost ones; when every chunk of a
// recovery's small flight, or every SACK for them, is lost, only T3-rtx is
// left, at RTO.Min or more, backed off. So the PTO is armed whenever
// chunks are in flight outside RTO recovery (where §7.2.1 allows "only one
// packet ... in flight until successful acknowledgement"), and backs off as
// RFC 9002 §6.2.1's does. No reduction follows a probe by itself.
func (s *Sender) tlpArm(t sndTime) {
	if s.recovery == ccRTO || s.flight == 0 {
		s.pto = 0
		return
	}
	pto := sndTime(time.Second)
	if s.rto.measured {
		pto = 2 * sndTime(s.rto.srtt)
		if s.flight <= s.pmdcs {
			pto += sndTime(s.cfg.MaxAckDelay)
		}
	}
	pto <<= min(s.tlpBackoff, tlpMaxBackoff)
	s.pto = t + pto
	if s.t3 != 0 && s.pto > s.t3 {
		s.pto = s.t3
	}
}

// tlpOnPTO is TLP_send_probe() up to the transmission, which Next does: a
// probe is "a previously unsent data segment, if one exists and the
// receive window allows", else "the highest-sequence segment sent so far"
// or, when the peer has that one, the last chunk sent still in flight.
//
// RFC 8985 §7.3 sends a probe only if "there is no other previous loss
// probe still in flight" and "the sender has obtained an RTT measurement
// since the last loss probe transmission". Here a probe unanswered when the
// next, doubled, PTO expires is deemed lost, which RFC 8985 lets reset
// TLP.end_seq, and the doubling bounds the probes a longer path would
// draw before its RTT is measured again. T3-rtx keeps running under RFC
// 9260 §6.3.2 (re-arming the RTO after a probe, as RFC 8985 does, would
// restart it, which §6.1 forbids unless the earliest outstanding chunk is
// retransmitted), and the PTO never fires after it.
func (s *Sender) tlpOnPTO() {
	s.pto = 0
	switch {
	case s.nextSend != s.nextTSN && int(s.ent(s.nextSend).size) <= s.rwnd:
		s.probe = sndProbeNew
	case s.nextSend != s.cumAck+1 && s.ent(s.nextSend-1).st&sndInFlight != 0:
		s.probe, s.probeTSN = sndProbeRtx, s.nextSend-1
	case s.listLen > 0:
		// The highest TSN is gap-acked: the chunk sent last of those in
		// flight is the probe.
		s.probe, s.probeTSN = sndProbeRtx, s.listTail
	default:
		s.probe = sndProbeNone
	}
}

// tlpSent records a probe's transmission and arms the next PTO.
func (s *Sender) tlpSent(t sndTime, tsn TSN, retrans bool) {
	s.probe = sndProbeNone
	s.tlpEnd, s.tlpEndSet, s.tlpIsRetrans = tsn, true, retrans
	s.tlpBackoff++
	s.tlpArm(t)
}

// tlpProcessAck is RFC 8985 §7.4.2, TLP_process_ack(), on a SACK. A probe
// that retransmitted TLP.end_seq and is acknowledged without a Duplicate
// TSN report for it repaired a loss: the congestion response is §7.2.3's,
// as for a fast recovery.
func (s *Sender) tlpProcessAck(dups chunk.TSNList) {
	if !s.tlpEndSet || s.cumAck.Before(s.tlpEnd) {
		return
	}
	s.tlpEndSet = false
	if !s.tlpIsRetrans {
		return // "TLP of new data delivered"
	}
	for i := range dups.Len() {
		if TSN(dups.At(i)) == s.tlpEnd {
			return // "Case 1": the original and the probe both arrived
		}
	}
	// "Repaired the single loss": "invoke a congestion control response
	// equivalent to a fast recovery".
	if s.recovery == ccNone {
		s.ccReduce()
	}
}
