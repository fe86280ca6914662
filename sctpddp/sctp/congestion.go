package sctp

// ccRecovery is the loss recovery state of the congestion controller.
type ccRecovery uint8

const (
	ccNone ccRecovery = iota
	// ccFast is §7.2.4's Fast Recovery: entered on the first loss a SACK
	// reveals, left when the Cumulative TSN Ack reaches the Fast
	// Recovery exit point.
	ccFast
	// ccRTO follows a T3-rtx expiry until the Cumulative TSN Ack reaches
	// the highest TSN sent at expiry (RFC 8985's "RTO recovery"): cwnd
	// grows by slow start, and losses of that flight found meanwhile do
	// not reduce it again.
	ccRTO
)

// ccInitialCwnd returns §7.2.1's initial cwnd: "min(4 * PMDCS, max(2 *
// PMDCS, 4404)) bytes if the peer address is an IPv4 address and ...
// 4344 ... if the peer address is an IPv6 address". The association runs
// over DTLS over UDP, whichever IP version carries it; the IPv6 value, the
// smaller, is the one never too aggressive.
func ccInitialCwnd(pmdcs int) int {
	return min(4*pmdcs, max(2*pmdcs, 4344))
}

// ccReduce is the response to a loss found from SACK chunks (§7.2.3):
//
//	ssthresh = max(cwnd / 2, 4 * PMDCS)
//	cwnd = ssthresh
//	partial_bytes_acked = 0
func (s *Sender) ccReduce() {
	s.ssthresh = max(s.cwnd/2, 4*s.pmdcs)
	s.cwnd = s.ssthresh
	s.pba = 0
}

// ccOnAck grows cwnd for bytesAcked bytes newly acknowledged by one SACK
// (§7.2.1, §7.2.2). preFlight is the flightsize before the SACK; advanced
// says whether the SACK moved the Cumulative TSN Ack Point.
func (s *Sender) ccOnAck(bytesAcked, preFlight int, advanced bool) {
	if bytesAcked == 0 {
		return
	}
	if s.cwnd <= s.ssthresh {
		// §7.2.1: "When cwnd is less than or equal to ssthresh, an SCTP
		// endpoint MUST use the slow-start algorithm to increase cwnd only
		// if the current congestion window is being fully utilized and
		// the data sender is not in Fast Recovery". Fully utilized: before
		// the SACK there was no room for one more full-size chunk. The
		// increase is "at most, the lesser of (1) the total size of the
		// previously outstanding DATA chunk(s) acknowledged and (2) L
		// times the destination's PMDCS", on a SACK that advances the
		// Cumulative TSN Ack Point. Fast Recovery sets cwnd = ssthresh, so
		// cwnd does not grow until it ends.
		if advanced && s.recovery != ccFast && preFlight+s.pmdcs > s.cwnd {
			s.cwnd += min(bytesAcked, s.cfg.L*s.pmdcs)
		}
		return
	}
	// §7.2.2: "Whenever cwnd is greater than ssthresh, upon each SACK
	// chunk arrival, increase partial_bytes_acked by the total number of
	// bytes ... of all new DATA chunks acknowledged in that SACK chunk".
	s.pba += bytesAcked
	switch {
	case s.pba >= s.cwnd && preFlight >= s.cwnd:
		// "When (1) partial_bytes_acked is equal to or greater than cwnd
		// and (2) before the arrival of the SACK chunk the sender had
		// cwnd or more bytes of data outstanding ..., partial_bytes_acked
		// is reset to (partial_bytes_acked - cwnd). Next, cwnd is
		// increased by PMDCS."
		s.pba -= s.cwnd
		s.cwnd += s.pmdcs
	case s.pba > s.cwnd && preFlight < s.cwnd:
		// "When (1) partial_bytes_acked is greater than cwnd and (2)
		// before the arrival of the SACK chunk the sender had less than
		// cwnd bytes of data outstanding ..., reset partial_bytes_acked
		// to cwnd."
		s.pba = s.cwnd
	}
}

// ccOnLoss reacts to chunks newly marked for retransmission from SACK
// feedback or the RACK reordering timer (§7.2.4 steps 2, 3 and 6).
// lostRetransmission says whether one of them was a retransmission sent
// during the current Fast Recovery.
func (s *Sender) ccOnLoss(t sndTime, lostRetransmission bool) {
	switch s.recovery {
	case ccNone:
		// Step 2: "If not in Fast Recovery, adjust the ssthresh and cwnd
		// ... according to the formula described in Section 7.2.3."
		// Step 6: "enter Fast Recovery and mark the highest outstanding
		// TSN as the Fast Recovery exit point."
		s.ccEnterFast(t)
	case ccFast:
		// Step 6: "While in Fast Recovery, the ssthresh and cwnd SHOULD
		// NOT change ... due to a subsequent Fast Retransmit." A lost
		// retransmission is not such a subsequent event: RFC 8985 §9.3,
		// "when RACK-TLP detects a lost retransmission, the congestion
		// control MUST trigger an additional congestion response". It
		// starts a new recovery episode with a new exit point, so each
		// episode reduces cwnd at most once.
		if lostRetransmission {
			s.ccEnterFast(t)
		}
	case ccRTO:
		// cwnd is already PMDCS; the T3-rtx expiry was this flight's
		// response.
	}
}

func (s *Sender) ccEnterFast(t sndTime) {
	s.ccReduce()
	s.recovery = ccFast
	s.recoveryExit = s.nextSend - 1
	s.recoveryStart = t
	// Step 3: "Retransmit those K DATA chunks in a single packet. When a
	// Fast Retransmit is being performed, the sender SHOULD ignore the
	// value of cwnd and SHOULD NOT delay retransmission for this single
	// packet." The rest follow "as soon as cwnd allows" (step 5).
	s.rtxBypass = s.pmdcs
	s.tlpReset()
}

// ccOnT3 is the congestion response to a T3-rtx expiry (§6.3.3 E1,
// §7.2.3):
//
//	ssthresh = max(cwnd / 2, 4 * PMDCS)
//	cwnd = PMDCS
//	partial_bytes_acked = 0
func (s *Sender) ccOnT3(t sndTime) {
	s.ssthresh = max(s.cwnd/2, 4*s.pmdcs)
	s.cwnd = s.pmdcs
	s.pba = 0
	s.recovery = ccRTO
	s.recoveryExit = s.nextSend - 1
	s.recoveryStart = t
	// E3: the K earliest outstanding chunks go out in one packet, and
	// §7.2.3: "ensure that no more than one SCTP packet will be in flight
	// for that address until the endpoint receives acknowledgement for
	// successful delivery of data to that address".
	s.rtxBypass = s.pmdcs
	s.onePacket = true
}

// ccIdle applies §7.2.1's decay before a transmission that follows an idle
// period: "While the endpoint does not transmit data on a given transport
// address, the cwnd of the transport address SHOULD be adjusted to
// max(cwnd / 2, 4 * PMDCS) once per RTO. Before the first cwnd
// adjustment, the ssthresh of the transport address SHOULD be set to the
// cwnd." The period counts only while nothing is in flight: with data in
// flight, T3-rtx governs. cwnd never grows here.
func (s *Sender) ccIdle(t sndTime) {
	if s.flight > 0 || s.lastXmit == 0 {
		return
	}
	rto := sndTime(s.rto.rto)
	n := (t - s.lastXmit) / rto
	if n <= 0 {
		return
	}
	s.lastXmit += n * rto
	floor := 4 * s.pmdcs
	if s.cwnd <= floor {
		return
	}
	s.ssthresh = s.cwnd
	for ; n > 0 && s.cwnd > floor; n-- {
		s.cwnd = max(s.cwnd/2, floor)
	}
}
