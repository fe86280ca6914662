package sctp

import "time"

// Default RTO parameters of a Sender (RFC 9260 §6.3.1 and §16).
//
// DefaultRTOMin is 250 ms instead of §16's 1 second. C6 gives the reason
// for a floor: "RTOs that do not have a high minimum value are
// susceptible to unnecessary timeouts". The timeout that matters is a
// lone chunk whose SACK the peer delays: §6.2 says the SACK "SHOULD be
// generated within 200 ms" (SACK.Delay, which may be configured up to 500
// ms), the delay Linux and pion/sctp use. The Sender sets the I bit where
// a SACK is wanted at once (RFC 7053), but a peer may ignore it. 250 ms
// stays above that delay plus a LAN or regional round trip, so a delayed
// SACK does not fire T3-rtx, while a path whose measured RTO is
// a few milliseconds (a DTLS/UDP path on a LAN) does not sit idle for a
// second after a loss nothing else repairs. T3-rtx is the last resort
// here: RACK-TLP (rack.go) finds lost chunks, lost retransmissions
// included, in about a round trip, so the floor is paid only when the
// peer falls silent. On longer paths SRTT + 4*RTTVAR exceeds the floor and
// the floor has no effect.
//
// DefaultRTOInitial keeps §16's 1 second: it applies only until the first
// measurement (C1), and the association measures the handshake's round
// trip ("a packet sent to the given destination", INIT or COOKIE ECHO,
// §8.3 counts both as chunks "that can be used for updating path RTT")
// and hands it to Sender.ObserveRTT before any DATA is sent. A smaller
// value would fire spurious T3-rtx on long paths before that.
//
// DefaultRTOMax keeps §16's 60 seconds: C7 allows a cap only "provided it
// is at least 'RTO.Max' seconds". The run loop bounds how long a silent
// peer is tolerated by time (Sender.LastAck), not by this cap.
const (
	DefaultRTOInitial       = time.Second
	DefaultRTOMin           = 250 * time.Millisecond
	DefaultRTOMax           = 60 * time.Second
	DefaultClockGranularity = time.Millisecond
)

// rtoEstimator computes SRTT, RTTVAR and RTO for one destination address
// (RFC 9260 §6.3.1) and backs RTO off on T3-rtx expiry (§6.3.3 E2).
// RTO.Alpha is 1/8 and RTO.Beta 1/4.
type rtoEstimator struct {
	srtt, rttvar, rto time.Duration
	measured          bool // an RTT measurement has been made (C1)

	min, max, granularity time.Duration
}

func (r *rtoEstimator) init(initial, min, max, granularity time.Duration) {
	*r = rtoEstimator{min: min, max: max, granularity: granularity}
	// C1: "Until an RTT measurement has been made for a packet sent to
	// the given destination transport address, set RTO to the protocol
	// parameter 'RTO.Initial'."
	r.rto = r.bound(initial)
}

// sample updates the estimate with one RTT measurement R (rules C2, C3,
// G1, C6, C7).
func (r *rtoEstimator) sample(R time.Duration) {
	if R < 0 {
		R = 0
	}
	if !r.measured {
		// C2: SRTT = R, RTTVAR = R/2.
		r.measured = true
		r.srtt = R
		r.rttvar = R / 2
	} else {
		// C3: "RTTVAR = (1 - RTO.Beta) * RTTVAR + RTO.Beta * |SRTT - R'|"
		// then "SRTT = (1 - RTO.Alpha) * SRTT + RTO.Alpha * R'"; the SRTT
		// in the first is its value before the second.
		d := r.srtt - R
		if d < 0 {
			d = -d
		}
		r.rttvar = r.rttvar - r.rttvar/4 + d/4
		r.srtt = r.srtt - r.srtt/8 + R/8
	}
	// G1: "Whenever RTTVAR is computed, if RTTVAR == 0, then adjust
	// RTTVAR = G."
	if r.rttvar == 0 {
		r.rttvar = r.granularity
	}
	// "RTO = SRTT + 4 * RTTVAR"
	r.rto = r.bound(r.srtt + 4*r.rttvar)
}

// backOff doubles RTO on T3-rtx expiry: E2 "set RTO = RTO * 2 ("back off
// the timer")", bounded by RTO.Max.
func (r *rtoEstimator) backOff() {
	r.rto = r.bound(2 * r.rto)
}

// bound applies C6 ("if it is less than 'RTO.Min' seconds, then it is
// rounded up to 'RTO.Min' seconds") and C7 (RTO.Max).
func (r *rtoEstimator) bound(d time.Duration) time.Duration {
	if d < r.min {
		d = r.min
	}
	if d > r.max {
		d = r.max
	}
	return d
}
