package sctp

import (
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The graceful shutdown of RFC 9260 §9.2.

// sendQueueEmpty reports that no user message waits and the Sender holds
// no chunk, sent or not.
func (a *Association) sendQueueEmpty() bool {
	if a.cur != nil || a.snd.Queued() > 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pending.len() == 0
}

// advanceShutdown moves SHUTDOWN-PENDING and SHUTDOWN-RECEIVED on once
// all outstanding data is acknowledged: "Once all its outstanding data
// has been acknowledged, the endpoint MUST send a SHUTDOWN chunk to its
// peer" and "the endpoint MUST send a SHUTDOWN ACK chunk" (§9.2).
func (a *Association) advanceShutdown(now time.Time) {
	switch a.state {
	case stateShutdownPending:
		if a.sendQueueEmpty() {
			a.state = stateShutdownSent
			a.t2Count = 0
			a.retransmitShutdown(now)
		}
	case stateShutdownReceived:
		if a.sendQueueEmpty() {
			a.state = stateShutdownAckSent
			a.t2Count = 0
			a.retransmitShutdown(now)
		}
	}
}

// retransmitShutdown sends the SHUTDOWN or SHUTDOWN ACK of the current
// state and restarts T2-shutdown.
func (a *Association) retransmitShutdown(now time.Time) {
	var b chunk.Builder
	b.Start(a.wbuf[:0], a.est.LocalPort, a.est.PeerPort, a.est.PeerVerificationTag)
	switch a.state {
	case stateShutdownSent:
		// "If there are gaps ... the SHUTDOWN chunk ... MUST be
		// accompanied by a SACK": a SACK when there is anything a
		// SHUTDOWN cannot say.
		if a.rcv.GapsOrDuplicates() {
			b.Buf = a.rcv.AppendSACK(b.Buf, a.cfg.MTU-b.Len()-8)
		}
		b.Buf = chunk.Shutdown{CumulativeTSNAck: a.rcv.CumulativeTSN()}.Append(b.Buf)
	case stateShutdownAckSent:
		b.Buf = chunk.ShutdownAck{}.Append(b.Buf)
	default:
		return
	}
	a.send(b.Finish())
	rto := a.snd.RTO()
	for range min(a.t2Count, 6) {
		rto = min(2*rto, a.cfg.RTOMax)
	}
	a.t2 = now.Add(rto)
}

// handleShutdown handles a received SHUTDOWN: its Cumulative TSN Ack
// acknowledges as a SACK's would ("verify, by checking the Cumulative
// TSN Ack field of the chunk, that all its outstanding DATA chunks have
// been received by the SHUTDOWN sender", §9.2).
func (a *Association) handleShutdown(now time.Time, s chunk.Shutdown) {
	r := a.snd.HandleSACK(now, chunk.SACK{CumulativeTSNAck: s.CumulativeTSNAck, ARwnd: uint32(a.snd.Rwnd() + a.snd.FlightSize())})
	a.released = append(a.released, r.Released...)
	switch a.state {
	case stateEstablished, stateShutdownPending:
		a.state = stateShutdownReceived
		a.mu.Lock()
		a.closing = true
		a.mu.Unlock()
	case stateShutdownSent:
		// §9.2: "If an endpoint is in the SHUTDOWN-SENT state and
		// receives a SHUTDOWN chunk from its peer, the endpoint MUST
		// respond immediately with a SHUTDOWN ACK".
		a.state = stateShutdownAckSent
		a.t2Count = 0
		a.retransmitShutdown(now)
	case stateShutdownAckSent:
		a.retransmitShutdown(now)
	}
}

// finishShutdown closes the association after SHUTDOWN COMPLETE.
func (a *Association) finishShutdown() {
	a.state = stateClosed
	a.t2 = time.Time{}
	a.setErr(ErrClosed)
}
