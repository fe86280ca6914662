package sctp

import (
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The tests drive a Sender with scripted SACKs on a fake clock. Chunks are
// 1200 bytes (16 of header, 1184 of user data) and PMDCS is 1200, so that
// sizes count in whole chunks.

const (
	sndTestPMDCS    = 1200
	sndTestUserData = sndTestPMDCS - chunk.DataHeaderLen
	sndTestRTT      = 40 * time.Millisecond
)

var sndTestPayload = make([]byte, sndTestUserData)

type sndHarness struct {
	t   testing.TB
	s   *Sender
	now time.Time
}

func newSndHarness(t testing.TB, cfg SenderConfig) *sndHarness {
	t.Helper()
	if cfg.PMDCS == 0 {
		cfg.PMDCS = sndTestPMDCS
	}
	if cfg.PeerRwnd == 0 {
		cfg.PeerRwnd = 1 << 20
	}
	if cfg.InitialTSN == 0 {
		cfg.InitialTSN = 1000
	}
	now := time.Unix(1_700_000_000, 0)
	return &sndHarness{t: t, s: NewSender(cfg, now), now: now}
}

func (h *sndHarness) queue(n int) {
	h.t.Helper()
	for range n {
		if _, ok := h.s.Queue(chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, UserData: sndTestPayload}, nil); !ok {
			h.t.Fatal("Queue: queue full")
		}
	}
}

// send takes every chunk Next gives, one per packet.
func (h *sndHarness) send() []TSN {
	var tsns []TSN
	for {
		d, ok := h.s.Next(h.now, sndTestPMDCS)
		if !ok {
			return tsns
		}
		tsns = append(tsns, TSN(d.TSN))
	}
}

func (h *sndHarness) advance(d time.Duration) { h.now = h.now.Add(d) }

// at advances the clock to deadline d.
func (h *sndHarness) at(d time.Time) {
	h.t.Helper()
	if d.IsZero() {
		h.t.Fatal("no deadline armed")
	}
	h.now = d
}

func sndSACK(cum TSN, arwnd uint32, gaps ...[2]uint16) chunk.SACK {
	s := chunk.SACK{CumulativeTSNAck: uint32(cum), ARwnd: arwnd}
	for _, g := range gaps {
		s.GapAckBlocks = s.GapAckBlocks.AppendBlock(g[0], g[1])
	}
	return s
}

func (h *sndHarness) sack(cum TSN, gaps ...[2]uint16) SACKResult {
	return h.s.HandleSACK(h.now, sndSACK(cum, 1<<20, gaps...))
}

func sndWantTSNs(t testing.TB, what string, got []TSN, want ...TSN) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: sent %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: sent %v, want %v", what, got, want)
		}
	}
}

func sndSeq(from TSN, n int) []TSN {
	out := make([]TSN, n)
	for i := range out {
		out[i] = from + TSN(i)
	}
	return out
}

func TestSendSlowStartThenCongestionAvoidance(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	h.s.ObserveRTT(sndTestRTT)
	h.queue(1000)
	// §7.2.1: "The initial cwnd before data transmission MUST be set to
	// min(4 * PMDCS, max(2 * PMDCS, 4404)) bytes" (4344 for IPv6).
	if got, want := h.s.Cwnd(), 4344; got != want {
		t.Fatalf("initial cwnd = %d, want %d", got, want)
	}
	// Rule B: new data while flightsize < cwnd; the last chunk exceeds
	// cwnd by less than PMDCS.
	sndWantTSNs(t, "first flight", h.send(), sndSeq(1000, 4)...)
	h.s.ssthresh = 8000
	h.advance(sndTestRTT)
	// Slow start: cwnd += min(bytes acked, L*PMDCS) = 2400.
	h.sack(1001)
	if got, want := h.s.Cwnd(), 4344+2400; got != want {
		t.Fatalf("cwnd after first SACK = %d, want %d", got, want)
	}
	sndWantTSNs(t, "after first SACK", h.send(), sndSeq(1004, 4)...)
	h.sack(1003)
	if got, want := h.s.Cwnd(), 4344+4800; got != want {
		t.Fatalf("cwnd after second SACK = %d, want %d", got, want)
	}
	// Now cwnd > ssthresh: congestion avoidance. "partial_bytes_acked is
	// reset to (partial_bytes_acked - cwnd). Next, cwnd is increased by
	// PMDCS", once per cwnd bytes acknowledged while the window is full.
	cum := TSN(1003)
	acked := 0
	cwnd := h.s.Cwnd()
	for range 40 {
		h.send()
		if h.s.FlightSize() < h.s.Cwnd() {
			t.Fatalf("window not full: flightsize %d, cwnd %d", h.s.FlightSize(), h.s.Cwnd())
		}
		h.advance(sndTestRTT / 4)
		cum += 2
		h.sack(cum)
		acked += 2 * sndTestPMDCS
		if c := h.s.Cwnd(); c != cwnd {
			if c != cwnd+sndTestPMDCS || acked < cwnd {
				t.Fatalf("cwnd %d -> %d after %d bytes acked", cwnd, c, acked)
			}
			acked -= cwnd
			cwnd = c
		}
		if h.s.PartialBytesAcked() != acked {
			t.Fatalf("partial_bytes_acked = %d, want %d", h.s.PartialBytesAcked(), acked)
		}
	}
	if cwnd < 4344+4800+3*sndTestPMDCS {
		t.Fatalf("cwnd %d grew less than 3 PMDCS in congestion avoidance", cwnd)
	}
	// "When all of the data transmitted by the sender has been
	// acknowledged by the receiver, partial_bytes_acked is initialized to
	// 0."
	h.sack(h.s.nextSend - 1)
	if h.s.PartialBytesAcked() != 0 {
		t.Fatalf("partial_bytes_acked = %d after all data acked", h.s.PartialBytesAcked())
	}
}

func TestSendSlowStartNeedsFullWindow(t *testing.T) {
	// §7.2.1: cwnd grows "only if the current congestion window is being
	// fully utilized".
	h := newSndHarness(t, SenderConfig{})
	h.queue(1)
	h.send()
	h.advance(sndTestRTT)
	h.sack(1000)
	if got := h.s.Cwnd(); got != 4344 {
		t.Fatalf("cwnd = %d after an application-limited SACK, want 4344", got)
	}
}

// sndLossSetup sends n chunks with RACK's reordering window open (reordering
// seen, min_RTT large), so that only the 3-miss rule marks losses.
func sndLossSetup(t *testing.T, n int) *sndHarness {
	h := newSndHarness(t, SenderConfig{})
	h.s.ObserveRTT(sndTestRTT)
	h.s.cwnd = n * sndTestPMDCS
	h.queue(2 * n)
	sndWantTSNs(t, "flight", h.send(), sndSeq(1000, n)...)
	return h
}

func TestSendFastRetransmitThreeMisses(t *testing.T) {
	h := sndLossSetup(t, 10)
	h.advance(sndTestRTT)
	// TSN 1000 lost. "Whenever an endpoint receives a SACK chunk that
	// indicates that some TSNs are missing, it SHOULD wait for two further
	// miss indications (via subsequent SACK chunks for a total of three
	// missing reports) on the same TSNs before taking action". With fewer
	// than three chunks gap-acked, RACK's reo_wnd is min_RTT/4 and these
	// SACKs come within it.
	for i, end := range []uint16{2, 3} {
		r := h.sack(999, [2]uint16{2, end})
		if r.Lost != 0 {
			t.Fatalf("SACK %d: Lost = %d", i+1, r.Lost)
		}
		if got := h.send(); len(got) != 0 && got[0] == 1000 {
			t.Fatalf("SACK %d: TSN 1000 retransmitted after %d miss indications", i+1, i+1)
		}
		h.advance(time.Millisecond)
	}
	cwnd := h.s.Cwnd()
	r := h.sack(999, [2]uint16{2, 4})
	if r.Lost != 1 {
		t.Fatalf("third miss indication: Lost = %d, want 1", r.Lost)
	}
	if h.s.ent(1000).st&sndFastRtx == 0 {
		t.Fatal("TSN 1000 not marked by the 3-miss rule")
	}
	// §7.2.3: "ssthresh = max(cwnd / 2, 4 * PMDCS); cwnd = ssthresh".
	if want := max(cwnd/2, 4*sndTestPMDCS); h.s.Cwnd() != want || h.s.Ssthresh() != want {
		t.Fatalf("cwnd, ssthresh = %d, %d, want %d", h.s.Cwnd(), h.s.Ssthresh(), want)
	}
	if !h.s.InFastRecovery() {
		t.Fatal("not in Fast Recovery")
	}
	// Step 3: "When a Fast Retransmit is being performed, the sender
	// SHOULD ignore the value of cwnd". Rule C: retransmissions first.
	got := h.send()
	if len(got) == 0 || got[0] != 1000 {
		t.Fatalf("after three miss indications sent %v, want 1000 first", got)
	}
	// Step 5: "ineligible for a subsequent Fast Retransmit".
	for range 3 {
		h.advance(time.Millisecond)
		if r := h.sack(999, [2]uint16{2, 8}); r.Lost != 0 {
			t.Fatalf("TSN 1000 fast retransmitted twice: Lost = %d", r.Lost)
		}
	}
	// D iv: "If the Cumulative TSN Ack matches or exceeds the Fast
	// Recovery exit point ..., Fast Recovery is exited." The exit point
	// is the highest TSN outstanding at entry.
	h.sack(1008)
	if !h.s.InFastRecovery() {
		t.Fatal("left Fast Recovery before its exit point")
	}
	h.sack(h.s.recoveryExit)
	if h.s.InFastRecovery() {
		t.Fatal("still in Fast Recovery at the exit point")
	}
}

func TestSendReorderingStopsThreeMisses(t *testing.T) {
	// RFC 8985 §6.2 step 4: "if some reordering has been observed, then
	// RACK does not trigger fast recovery based on DupThresh".
	h := sndLossSetup(t, 10)
	h.s.rack.reorderingSeen = true
	h.advance(sndTestRTT)
	for i, end := range []uint16{2, 3, 4, 5, 6} {
		if r := h.sack(999, [2]uint16{2, end}); r.Lost != 0 {
			t.Fatalf("SACK %d: Lost = %d inside the reordering window", i+1, r.Lost)
		}
		h.advance(time.Millisecond)
	}
	// RACK decides when the window has passed: min_RTT/4 after the
	// chunks were sent together.
	h.at(h.s.RACKDeadline())
	h.s.OnTimeout(h.now)
	if got := h.send(); len(got) == 0 || got[0] != 1000 {
		t.Fatalf("after the RACK timer sent %v, want 1000", got)
	}
}

func TestSendOneReductionPerRecovery(t *testing.T) {
	// Step 6: "While in Fast Recovery, the ssthresh and cwnd SHOULD NOT
	// change for any destinations due to a subsequent Fast Recovery
	// event".
	h := sndLossSetup(t, 20)
	h.advance(sndTestRTT)
	h.sack(999, [2]uint16{2, 5}) // 1000 lost: RACK with 4 gap-acked chunks
	if !h.s.InFastRecovery() {
		t.Fatal("not in Fast Recovery")
	}
	cwnd := h.s.Cwnd()
	h.send()
	h.advance(time.Millisecond)
	h.sack(999, [2]uint16{2, 5}, [2]uint16{7, 12}) // 1005 lost too
	if h.s.Cwnd() != cwnd {
		t.Fatalf("cwnd %d -> %d on a second loss in the same recovery", cwnd, h.s.Cwnd())
	}
}

func TestSendRACKFindsLostFastRetransmission(t *testing.T) {
	h := sndLossSetup(t, 10)
	start := h.now
	h.advance(sndTestRTT)
	// 1000 is lost; four chunks gap-acked and no reordering seen: RACK's
	// reo_wnd is 0 and 1000, sent before them, is lost at once.
	r := h.sack(999, [2]uint16{2, 5})
	if r.Lost != 1 {
		t.Fatalf("Lost = %d, want 1", r.Lost)
	}
	got := h.send()
	if len(got) == 0 || got[0] != 1000 {
		t.Fatalf("sent %v, want the fast retransmission of 1000 first", got)
	}
	rtxAt := h.now
	// The retransmission is lost too; chunks sent after it (new data) are
	// delivered about a round trip later. "RACK considers that segment
	// lost if another segment that was sent later has been delivered and
	// the reordering window has passed."
	newTSN := got[len(got)-1]
	if newTSN == 1000 {
		h.advance(time.Millisecond)
		h.sack(999, [2]uint16{2, 8})
		got = h.send()
		if len(got) == 0 {
			t.Fatal("no new data after the retransmission")
		}
		newTSN = got[len(got)-1]
	}
	h.advance(sndTestRTT)
	r = h.sack(999, [2]uint16{2, uint16(newTSN - 999)})
	if r.Lost != 1 {
		t.Fatalf("lost retransmission: Lost = %d, want 1 (RACK state %+v)", r.Lost, h.s.rack)
	}
	if d := h.now.Sub(rtxAt); d > 2*sndTestRTT {
		t.Fatalf("lost retransmission found %v after it was sent, want about one RTT", d)
	}
	if !h.s.T3Deadline().After(h.now) {
		t.Fatal("T3-rtx expired")
	}
	got = h.send()
	if len(got) == 0 || got[0] != 1000 {
		t.Fatalf("sent %v, want 1000 retransmitted again", got)
	}
	if h.s.ent(1000).nRtx != 2 {
		t.Fatalf("TSN 1000 retransmitted %d times, want 2", h.s.ent(1000).nRtx)
	}
	// RFC 8985 §9.3: a lost retransmission is a second congestion signal.
	if h.s.recoveryStart <= h.s.at(start.Add(sndTestRTT)) {
		t.Fatal("the lost retransmission did not start a new recovery")
	}
}

func TestSendRACKReorderingTimer(t *testing.T) {
	// With reordering seen, reo_wnd = min_RTT/4: the chunk is lost when
	// the RACK reordering timer fires, not on the SACK.
	h := sndLossSetup(t, 4)
	h.s.rack.reorderingSeen = true
	h.advance(sndTestRTT)
	if r := h.sack(999, [2]uint16{2, 2}); r.Lost != 0 {
		t.Fatalf("Lost = %d inside the reordering window", r.Lost)
	}
	d := h.s.RACKDeadline()
	if d.IsZero() {
		t.Fatal("RACK reordering timer not armed")
	}
	// "remaining = Segment.xmit_ts + RACK.rtt + RACK.reo_wnd - Now()":
	// both chunks left together, so remaining = reo_wnd = min_RTT/4.
	if got, want := d.Sub(h.now), sndTestRTT/4; got != want {
		t.Fatalf("RACK timer in %v, want %v", got, want)
	}
	if !h.s.NextDeadline().Equal(d) {
		t.Fatalf("NextDeadline = %v, want the RACK timer %v", h.s.NextDeadline(), d)
	}
	h.at(d)
	h.s.OnTimeout(h.now)
	if got := h.send(); len(got) == 0 || got[0] != 1000 {
		t.Fatalf("after the RACK timer sent %v, want 1000", got)
	}
}

func TestSendReorderingDetectedWidensWindow(t *testing.T) {
	// RFC 8985 step 3: "If a never-retransmitted segment that's below
	// RACK.fack is (selectively or cumulatively) acknowledged, it has been
	// delivered out of order."
	h := sndLossSetup(t, 4)
	h.advance(sndTestRTT)
	h.sack(999, [2]uint16{2, 2})
	if h.s.rack.reorderingSeen {
		t.Fatal("reordering seen before any")
	}
	h.sack(1001)
	if !h.s.rack.reorderingSeen {
		t.Fatal("late TSN 1000 not seen as reordering")
	}
}

func TestSendDuplicateTSNsGrowReoWnd(t *testing.T) {
	// RFC 8985 step 4: "The RACK.reo_wnd increases linearly for every round
	// trip in which the sender receives some DSACK option"; SCTP's
	// Duplicate TSNs are that signal.
	h := sndLossSetup(t, 4)
	h.s.rack.reorderingSeen = true
	h.advance(sndTestRTT)
	s := sndSACK(1000, 1<<20)
	s.DuplicateTSNs = s.DuplicateTSNs.AppendTSN(1000)
	h.s.HandleSACK(h.now, s)
	if h.s.rack.reoWndMult != 2 {
		t.Fatalf("reo_wnd_mult = %d, want 2", h.s.rack.reoWndMult)
	}
	// Once per round: a second report in the same round does not grow it.
	s.CumulativeTSNAck = 1001
	h.s.HandleSACK(h.now, s)
	if h.s.rack.reoWndMult != 2 {
		t.Fatalf("reo_wnd_mult = %d after a second report in the round, want 2", h.s.rack.reoWndMult)
	}
}

func TestSendTLPTailLoss(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	h.s.ObserveRTT(sndTestRTT)
	h.queue(4)
	sndWantTSNs(t, "flight", h.send(), sndSeq(1000, 4)...)
	h.advance(sndTestRTT)
	h.sack(1001) // 1002 and 1003, the tail, are lost
	// RFC 8985 §7.2: "the default PTO interval is 2*SRTT".
	srtt, _ := h.s.SRTT()
	if got, want := h.s.PTODeadline().Sub(h.now), 2*srtt; got != want {
		t.Fatalf("PTO in %v, want 2*SRTT = %v", got, want)
	}
	if !h.s.PTODeadline().Before(h.s.T3Deadline()) {
		t.Fatal("PTO not before T3-rtx")
	}
	h.at(h.s.PTODeadline())
	h.s.OnTimeout(h.now)
	// "If such an unsent segment is not available, then the sender SHOULD
	// retransmit the highest-sequence segment sent so far".
	sndWantTSNs(t, "probe", h.send(), 1003)
	h.advance(sndTestRTT)
	// The probe's SACK: 1003 arrived, 1002 did not. RACK: 1002 was sent
	// before the probe and a round trip has passed.
	r := h.sack(1001, [2]uint16{2, 2})
	if r.Lost != 1 {
		t.Fatalf("after the probe's SACK Lost = %d, want 1", r.Lost)
	}
	sndWantTSNs(t, "repair", h.send(), 1002)
	h.advance(sndTestRTT)
	h.sack(1003)
	if h.s.Outstanding() {
		t.Fatal("data outstanding after the repair")
	}
	if !h.s.T3Deadline().IsZero() {
		t.Fatal("T3-rtx running with nothing outstanding (R2)")
	}
}

func TestSendTLPProbesNewData(t *testing.T) {
	// "the sender SHOULD transmit a previously unsent data segment, if one
	// exists and the receive window allows".
	h := newSndHarness(t, SenderConfig{})
	h.s.ObserveRTT(sndTestRTT)
	h.queue(8)
	h.send()
	h.at(h.s.PTODeadline())
	h.s.OnTimeout(h.now)
	sndWantTSNs(t, "probe", h.send(), 1004)
	// The next PTO is doubled.
	srtt, _ := h.s.SRTT()
	if got, want := h.s.PTODeadline().Sub(h.now), 4*srtt; got != want {
		t.Fatalf("second PTO in %v, want %v", got, want)
	}
}

func TestSendTLPRepairReducesCwnd(t *testing.T) {
	// RFC 8985 §7.4.2: a probe retransmission acknowledged without a
	// duplicate report repaired a loss: "The sender then SHOULD invoke a
	// congestion control response equivalent to a fast recovery."
	for _, dup := range []bool{false, true} {
		h := newSndHarness(t, SenderConfig{})
		h.s.ObserveRTT(sndTestRTT)
		h.queue(4)
		h.send()
		h.at(h.s.PTODeadline())
		h.s.OnTimeout(h.now)
		sndWantTSNs(t, "probe", h.send(), 1003)
		cwnd := h.s.Cwnd()
		s := sndSACK(1003, 1<<20)
		if dup {
			s.DuplicateTSNs = s.DuplicateTSNs.AppendTSN(1003)
		}
		h.advance(sndTestRTT)
		h.s.HandleSACK(h.now, s)
		reduced := h.s.Ssthresh() == max(cwnd/2, 4*sndTestPMDCS)
		if reduced == dup {
			t.Errorf("duplicate report %v: ssthresh %d (cwnd before %d)", dup, h.s.Ssthresh(), cwnd)
		}
	}
}

func TestSendBurstLossOneRecovery(t *testing.T) {
	h := sndLossSetup(t, 40)
	h.advance(sndTestRTT)
	// 1010 to 1019 lost; 1000 to 1009 and 1020 to 1039 delivered.
	r := h.sack(1009, [2]uint16{11, 30})
	if r.Lost != 10 {
		t.Fatalf("Lost = %d, want 10", r.Lost)
	}
	// The Note of §7.2.4: slow start first (cwnd += 2*PMDCS for the ten
	// chunks the Cumulative TSN Ack covers), then one reduction.
	want := (40*sndTestPMDCS + 2*sndTestPMDCS) / 2
	if h.s.Cwnd() != want {
		t.Fatalf("cwnd = %d, want %d (one reduction)", h.s.Cwnd(), want)
	}
	// "Fast retransmit must resend as many chunks as the cwnd allows": all
	// ten fit in the halved cwnd and go out at once, before new data.
	got := h.send()
	if len(got) < 10 {
		t.Fatalf("sent %v, want the ten lost chunks", got)
	}
	sndWantTSNs(t, "retransmissions", got[:10], sndSeq(1010, 10)...)
	h.advance(sndTestRTT)
	h.sack(h.s.nextSend - 1)
	if h.s.InFastRecovery() {
		t.Fatal("still in Fast Recovery")
	}
	if h.s.Cwnd() != want {
		t.Fatalf("cwnd = %d after the recovery, want %d", h.s.Cwnd(), want)
	}
}

func TestSendT3Backoff(t *testing.T) {
	h := newSndHarness(t, SenderConfig{RTOMax: 4 * time.Second, AssociationMaxRetrans: 5})
	h.s.ObserveRTT(sndTestRTT) // RTO = RTO.Min = 250 ms
	h.queue(8)
	h.send()
	cwnd := h.s.Cwnd()
	rto := h.s.RTO()
	if rto != DefaultRTOMin {
		t.Fatalf("RTO = %v, want RTO.Min", rto)
	}
	for i := 1; i <= 6; i++ {
		h.at(h.s.T3Deadline())
		h.s.OnTimeout(h.now)
		if h.s.ErrorCount() != i {
			t.Fatalf("expiry %d: error counter %d", i, h.s.ErrorCount())
		}
		// E2: "set RTO = RTO * 2", bounded by RTO.Max.
		rto = min(2*rto, 4*time.Second)
		if h.s.RTO() != rto {
			t.Fatalf("expiry %d: RTO = %v, want %v", i, h.s.RTO(), rto)
		}
		// E1 and §7.2.3: "ssthresh = max(cwnd / 2, 4 * PMDCS); cwnd =
		// PMDCS".
		if h.s.Cwnd() != sndTestPMDCS || h.s.Ssthresh() != max(cwnd/2, 4*sndTestPMDCS) {
			t.Fatalf("expiry %d: cwnd %d, ssthresh %d", i, h.s.Cwnd(), h.s.Ssthresh())
		}
		cwnd = h.s.Cwnd()
		// E3: the earliest outstanding chunk first, one packet.
		got := h.send()
		if len(got) != 1 || got[0] != 1000 {
			t.Fatalf("expiry %d: sent %v, want [1000]", i, got)
		}
		if got := h.s.T3Deadline().Sub(h.now); got != rto {
			t.Fatalf("expiry %d: T3-rtx in %v, want %v", i, got, rto)
		}
		// §8.1: more than Association.Max.Retrans expiries: dead.
		if h.s.Dead() != (i > 5) {
			t.Fatalf("expiry %d: Dead = %v", i, h.s.Dead())
		}
	}
	// "The counter ... MUST be reset each time a DATA chunk sent to that
	// peer endpoint is acknowledged".
	h.advance(sndTestRTT)
	h.sack(1000)
	if h.s.ErrorCount() != 0 || h.s.Dead() {
		t.Fatalf("error counter %d after an acknowledgement", h.s.ErrorCount())
	}
	if !h.s.LastAck().Equal(h.now) {
		t.Fatalf("LastAck = %v, want %v", h.s.LastAck(), h.now)
	}
	// Karn: the acknowledged chunk was retransmitted; no RTT measurement,
	// so the backed-off RTO stays until one.
	if h.s.RTO() != rto {
		t.Fatalf("RTO = %v after acking a retransmitted chunk, want %v", h.s.RTO(), rto)
	}
}

func TestSendKarn(t *testing.T) {
	// C5: "RTT measurements MUST NOT be made using chunks that were
	// retransmitted".
	h := newSndHarness(t, SenderConfig{})
	h.queue(1)
	h.send()
	h.at(h.s.T3Deadline())
	h.s.OnTimeout(h.now)
	sndWantTSNs(t, "retransmission", h.send(), 1000)
	h.advance(sndTestRTT)
	h.sack(1000)
	if h.s.rto.measured {
		t.Fatal("RTT measured from a retransmitted chunk")
	}
	// A chunk sent once gives the measurement.
	h.queue(1)
	h.send()
	h.advance(sndTestRTT)
	h.sack(1001)
	if srtt, _ := h.s.SRTT(); srtt != sndTestRTT {
		t.Fatalf("SRTT = %v, want %v", srtt, sndTestRTT)
	}
}

func TestSendKarnLowerRetransmission(t *testing.T) {
	// C5: "RTT measurements SHOULD only be made using a DATA chunk with TSN
	// r if no DATA chunk with TSN less than or equal to r was
	// retransmitted since the DATA chunk with TSN r was sent first."
	h := newSndHarness(t, SenderConfig{})
	h.queue(4)
	h.send() // 1000 is timed
	h.at(h.s.T3Deadline())
	h.s.OnTimeout(h.now)
	h.send() // 1000 retransmitted
	h.advance(sndTestRTT)
	h.sack(1003)
	if h.s.rto.measured {
		t.Fatal("RTT measured across a retransmission")
	}
}

func TestRTOComputation(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	var r rtoEstimator
	r.init(time.Second, 10*time.Millisecond, 60*time.Second, time.Millisecond)
	// C1: RTO.Initial until a measurement.
	if r.rto != time.Second {
		t.Fatalf("initial RTO = %v", r.rto)
	}
	for i, c := range []struct {
		r                 time.Duration
		srtt, rttvar, rto time.Duration
	}{
		// C2: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4*RTTVAR.
		{ms(100), ms(100), ms(50), ms(300)},
		// C3: RTTVAR = 3/4*50 + 1/4*|100-200| = 62.5; SRTT = 7/8*100 +
		// 1/8*200 = 112.5; RTO = 112.5 + 250.
		{ms(200), ms(112.5), ms(62.5), ms(362.5)},
		// RTTVAR = 3/4*62.5 + 1/4*|112.5-112.5| = 46.875; SRTT = 112.5.
		{ms(112.5), ms(112.5), ms(46.875), ms(300)},
	} {
		r.sample(c.r)
		if r.srtt != c.srtt || r.rttvar != c.rttvar || r.rto != c.rto {
			t.Fatalf("sample %d (%v): SRTT %v RTTVAR %v RTO %v, want %v %v %v", i, c.r, r.srtt, r.rttvar, r.rto, c.srtt, c.rttvar, c.rto)
		}
	}
	// C6: "if it is less than 'RTO.Min' seconds, then it is rounded up".
	for range 100 {
		r.sample(ms(1))
	}
	if r.rto != 10*time.Millisecond {
		t.Fatalf("RTO = %v, want RTO.Min", r.rto)
	}
	// E2 and C7: doubling bounded by RTO.Max.
	for range 20 {
		r.backOff()
	}
	if r.rto != 60*time.Second {
		t.Fatalf("backed-off RTO = %v, want RTO.Max", r.rto)
	}
	// G1: "if RTTVAR == 0, then adjust RTTVAR = G".
	r.init(time.Second, 0, time.Minute, time.Millisecond)
	r.sample(0)
	if r.rttvar != time.Millisecond || r.rto != 4*time.Millisecond {
		t.Fatalf("RTTVAR %v RTO %v, want G and 4G", r.rttvar, r.rto)
	}
	// The "collapse" after backoff (§6.3.3): the next measurement
	// recomputes RTO.
	r.init(time.Second, 0, time.Minute, time.Millisecond)
	r.sample(ms(100))
	r.backOff()
	r.sample(ms(100))
	if r.rto != ms(100)+4*ms(37.5) {
		t.Fatalf("RTO after backoff and a measurement = %v", r.rto)
	}
}

func TestSendSACKOutOfOrder(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	h.queue(4)
	h.send()
	h.advance(sndTestRTT)
	h.sack(1002)
	rwnd := h.s.Rwnd()
	// D i: "If Cumulative TSN Ack is less than the Cumulative TSN Ack
	// Point, then drop the SACK chunk."
	r := h.s.HandleSACK(h.now, sndSACK(1000, 0))
	if !r.Dropped || r.Invalid {
		t.Fatalf("out-of-order SACK: %+v", r)
	}
	if h.s.Rwnd() != rwnd || h.s.CumulativeTSNAck() != 1002 {
		t.Fatalf("out-of-order SACK changed state: rwnd %d, cum %d", h.s.Rwnd(), h.s.CumulativeTSNAck())
	}
	// A SACK for a TSN never sent is invalid.
	if r := h.sack(1004); !r.Dropped || !r.Invalid {
		t.Fatalf("SACK beyond the highest TSN sent: %+v", r)
	}
}

func TestSendRwnd(t *testing.T) {
	h := newSndHarness(t, SenderConfig{PeerRwnd: 3 * sndTestPMDCS})
	h.queue(8)
	// §6.2.1 B: each transmission subtracts its size from rwnd; rule A
	// stops new data when rwnd is smaller than the next chunk.
	sndWantTSNs(t, "first flight", h.send(), sndSeq(1000, 3)...)
	h.advance(sndTestRTT)
	// D ii: "Set rwnd equal to the newly received a_rwnd minus the number
	// of bytes still outstanding".
	h.s.HandleSACK(h.now, sndSACK(1000, 3*sndTestPMDCS))
	if got, want := h.s.Rwnd(), sndTestPMDCS; got != want {
		t.Fatalf("rwnd = %d, want %d", got, want)
	}
	sndWantTSNs(t, "after SACK", h.send(), 1003)
}

func TestSendZeroWindowProbe(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	h.s.ObserveRTT(sndTestRTT)
	h.queue(4)
	h.send()
	h.advance(sndTestRTT)
	// The receiver closes its window and has all data.
	h.s.HandleSACK(h.now, sndSACK(1003, 0))
	h.queue(2)
	if got := h.send(); len(got) != 0 {
		t.Fatalf("sent %v into a zero window", got)
	}
	// "The sender SHOULD send the first zero window probe after 1 RTO".
	d := h.s.NextDeadline()
	if got := d.Sub(h.now); got != h.s.RTO() {
		t.Fatalf("zero window probe in %v, want RTO %v", got, h.s.RTO())
	}
	h.at(d)
	h.s.OnTimeout(h.now)
	// Rule A: "A zero window probe SHOULD only be sent when all
	// outstanding DATA chunks have been cumulatively acknowledged and no
	// DATA chunks are in flight": one chunk.
	sndWantTSNs(t, "probe", h.send(), 1004)
	// The peer drops it but keeps sending SACKs with a zero window: T3-rtx
	// retransmits the probe with backoff, and "the unacknowledged window
	// probes SHOULD NOT increment the error counter".
	for i := range 3 {
		rto := h.s.RTO()
		h.at(h.s.T3Deadline())
		h.s.HandleSACK(h.now.Add(-time.Millisecond), sndSACK(1003, 0))
		h.s.OnTimeout(h.now)
		sndWantTSNs(t, "probe retransmission", h.send(), 1004)
		if h.s.RTO() != 2*rto {
			t.Fatalf("probe %d: RTO %v, want %v", i, h.s.RTO(), 2*rto)
		}
	}
	if h.s.ErrorCount() != 0 {
		t.Fatalf("zero window probes counted %d errors", h.s.ErrorCount())
	}
	// The window opens.
	h.advance(sndTestRTT)
	h.s.HandleSACK(h.now, sndSACK(1004, 1<<20))
	sndWantTSNs(t, "window open", h.send(), 1005)
}

func TestSendRenege(t *testing.T) {
	h := sndLossSetup(t, 6)
	h.s.rack.reorderingSeen = true
	h.s.rack.minRTT = sndTime(time.Second)
	h.advance(sndTestRTT)
	h.sack(999, [2]uint16{3, 4}) // 1002, 1003 gap-acked
	flight := h.s.FlightSize()
	if flight != 4*sndTestPMDCS {
		t.Fatalf("flightsize = %d, want %d", flight, 4*sndTestPMDCS)
	}
	// The receiver reneged: the next SACK no longer reports them. D iii:
	// "Count one miss indication towards Fast Retransmit ... and if no
	// retransmit timer is running ..., then T3-rtx is started".
	r := h.sack(999)
	if r.Reneged != 2 {
		t.Fatalf("Reneged = %d, want 2", r.Reneged)
	}
	if h.s.FlightSize() != 6*sndTestPMDCS {
		t.Fatalf("flightsize = %d after renege, want %d", h.s.FlightSize(), 6*sndTestPMDCS)
	}
	for _, tsn := range []TSN{1002, 1003} {
		if e := h.s.ent(tsn); e.st&sndAcked != 0 || e.misses != 1 {
			t.Fatalf("TSN %d after renege: state %b, misses %d", tsn, e.st, e.misses)
		}
	}
	if h.s.T3Deadline().IsZero() {
		t.Fatal("T3-rtx not running after renege")
	}
	// They are released only by the Cumulative TSN Ack.
	r = h.sack(1005)
	if len(r.Released) != 6 || r.BytesAcked != 6*sndTestPMDCS {
		t.Fatalf("released %d chunks, %d bytes, want 6 and %d", len(r.Released), r.BytesAcked, 6*sndTestPMDCS)
	}
}

func TestSendReleasesInOrder(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	refs := make([]*int, 4)
	for i := range refs {
		refs[i] = new(int)
		*refs[i] = i
		h.s.Queue(chunk.Data{UserData: sndTestPayload}, refs[i])
	}
	h.send()
	h.advance(sndTestRTT)
	r := h.sack(999, [2]uint16{2, 3})
	if len(r.Released) != 0 || r.BytesAcked != 2*sndTestPMDCS {
		t.Fatalf("gap-acked: released %d, bytes %d", len(r.Released), r.BytesAcked)
	}
	r = h.sack(1003)
	if len(r.Released) != 4 || r.BytesAcked != 2*sndTestPMDCS {
		t.Fatalf("released %d, bytes %d, want 4 and %d", len(r.Released), r.BytesAcked, 2*sndTestPMDCS)
	}
	for i, c := range r.Released {
		if c.Ref.(*int) != refs[i] || c.Data.TSN != uint32(1000+i) {
			t.Fatalf("released %d: TSN %d ref %v", i, c.Data.TSN, c.Ref)
		}
	}
	if h.s.ent(1000).ref != nil {
		t.Fatal("the queue still refers to a released chunk")
	}
}

func TestSendTSNWrap(t *testing.T) {
	// §1.6: "the next TSN a DATA chunk MUST use after transmitting TSN =
	// 2^32 - 1 is TSN = 0".
	h := newSndHarness(t, SenderConfig{InitialTSN: 0xffff_fffe})
	h.queue(6)
	sndWantTSNs(t, "flight", h.send(), 0xffff_fffe, 0xffff_ffff, 0, 1)
	h.advance(sndTestRTT)
	r := h.sack(0xffff_fffe, [2]uint16{2, 3}) // 0 and 1 gap-acked
	if r.BytesAcked != 3*sndTestPMDCS || h.s.numGapAcked != 2 {
		t.Fatalf("BytesAcked %d, gap-acked %d", r.BytesAcked, h.s.numGapAcked)
	}
	r = h.sack(1)
	if len(r.Released) != 3 || h.s.CumulativeTSNAck() != 1 {
		t.Fatalf("released %d, cum %d", len(r.Released), h.s.CumulativeTSNAck())
	}
	sndWantTSNs(t, "after wrap", h.send(), 2, 3)
}

func TestSendQueueBound(t *testing.T) {
	h := newSndHarness(t, SenderConfig{MaxChunks: 100})
	n := 0
	for ; n < 1000; n++ {
		if _, ok := h.s.Queue(chunk.Data{UserData: sndTestPayload}, nil); !ok {
			break
		}
	}
	if n != 128 {
		t.Fatalf("queued %d chunks, want 128 (MaxChunks rounded up)", n)
	}
	h.send()
	h.advance(sndTestRTT)
	h.sack(1001)
	if _, ok := h.s.Queue(chunk.Data{UserData: sndTestPayload}, nil); !ok {
		t.Fatal("no room after an acknowledgement")
	}
}

func TestSendIdleCwndDecay(t *testing.T) {
	// §7.2.1: "While the endpoint does not transmit data ..., the cwnd ...
	// SHOULD be adjusted to max(cwnd / 2, 4 * PMDCS) once per RTO. Before
	// the first cwnd adjustment, the ssthresh ... SHOULD be set to the
	// cwnd."
	h := newSndHarness(t, SenderConfig{})
	h.s.ObserveRTT(sndTestRTT)
	h.queue(1)
	h.send()
	h.advance(sndTestRTT)
	h.sack(1000)
	h.s.cwnd = 32 * sndTestPMDCS
	h.advance(2*h.s.RTO() + time.Millisecond)
	h.queue(1)
	h.send()
	if h.s.Ssthresh() != 32*sndTestPMDCS || h.s.Cwnd() != 8*sndTestPMDCS {
		t.Fatalf("after 2 idle RTOs: cwnd %d, ssthresh %d", h.s.Cwnd(), h.s.Ssthresh())
	}
}

func TestSendHeartbeats(t *testing.T) {
	h := newSndHarness(t, SenderConfig{AssociationMaxRetrans: 2})
	for range 3 {
		h.s.HeartbeatUnanswered()
	}
	if !h.s.Dead() {
		t.Fatal("not dead after 3 unanswered HEARTBEATs")
	}
	h.s.HeartbeatAcked(sndTestRTT)
	if h.s.Dead() || h.s.ErrorCount() != 0 {
		t.Fatal("HEARTBEAT ACK did not reset the error counter")
	}
	if srtt, _ := h.s.SRTT(); srtt != sndTestRTT {
		t.Fatalf("SRTT = %v from the HEARTBEAT, want %v", srtt, sndTestRTT)
	}
	// With data outstanding, the counter is kept (§8.1's MAY).
	h.queue(1)
	h.send()
	h.s.HeartbeatUnanswered()
	h.s.HeartbeatAcked(sndTestRTT)
	if h.s.ErrorCount() != 1 {
		t.Fatalf("error counter %d, want 1 with data outstanding", h.s.ErrorCount())
	}
}

func TestSendAllocs(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	h.s.ObserveRTT(sndTestRTT)
	d := chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, UserData: sndTestPayload}
	ref := any(&d)
	step := func() {
		tsn, ok := h.s.Queue(d, ref)
		if !ok {
			t.Fatal("queue full")
		}
		if _, ok := h.s.Next(h.now, sndTestPMDCS); !ok {
			t.Fatal("Next")
		}
		h.advance(time.Millisecond)
		h.s.HandleSACK(h.now, chunk.SACK{CumulativeTSNAck: uint32(tsn), ARwnd: 1 << 20})
		h.s.OnTimeout(h.now)
		_ = h.s.NextDeadline()
	}
	for range 100 {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per chunk queued, sent and acked", n)
	}
}

func BenchmarkSendAck(b *testing.B) {
	for _, window := range []int{1, 16, 256} {
		b.Run("window="+sndItoa(window), func(b *testing.B) {
			h := newSndHarness(b, SenderConfig{MaxChunks: 1024})
			h.s.ObserveRTT(sndTestRTT)
			h.s.cwnd = 1 << 30
			d := chunk.Data{UserData: sndTestPayload}
			for range window {
				h.s.Queue(d, nil)
				h.s.Next(h.now, sndTestPMDCS)
			}
			b.ReportAllocs()
			b.SetBytes(sndTestUserData)
			for b.Loop() {
				tsn, _ := h.s.Queue(d, nil)
				h.s.Next(h.now, sndTestPMDCS)
				h.now = h.now.Add(time.Microsecond)
				h.s.HandleSACK(h.now, chunk.SACK{CumulativeTSNAck: uint32(tsn) - uint32(window), ARwnd: 1 << 30})
			}
		})
	}
}

func BenchmarkSendAckWithGaps(b *testing.B) {
	// One SACK in 20 reports a gap: loss recovery runs.
	h := newSndHarness(b, SenderConfig{MaxChunks: 1024})
	h.s.ObserveRTT(sndTestRTT)
	d := chunk.Data{UserData: sndTestPayload}
	var gaps chunk.GapAckBlocks
	i, sent := 0, 0
	step := func() {
		for h.s.Queued() < 512 {
			h.s.Queue(d, nil)
		}
		for {
			if _, ok := h.s.Next(h.now, sndTestPMDCS); !ok {
				break
			}
			sent++
		}
		h.now = h.now.Add(100 * time.Microsecond)
		i++
		cum := h.s.CumulativeTSNAck()
		top := h.s.nextSend - 1
		s := chunk.SACK{CumulativeTSNAck: uint32(top), ARwnd: 1 << 30}
		if i%20 == 0 && top.After(cum+2) {
			gaps = gaps[:0].AppendBlock(2, uint16(top-cum))
			s.CumulativeTSNAck = uint32(cum)
			s.GapAckBlocks = gaps
		}
		h.s.HandleSACK(h.now, s)
		h.s.OnTimeout(h.now)
	}
	for range 1000 {
		step() // grow the ring and the lists
	}
	b.ReportAllocs()
	sent = 0
	start := time.Now()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(sent), "ns/chunk")
}

func sndItoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

func TestSendPTOInFastRecovery(t *testing.T) {
	// A recovery whose retransmissions and new data are all lost, with
	// their SACKs: the PTO probes before T3-rtx and backs off.
	h := sndLossSetup(t, 10)
	h.advance(sndTestRTT)
	h.sack(999, [2]uint16{2, 5}) // 1000 lost
	h.send()                     // 1000 and new data, all lost
	pto := h.s.PTODeadline()
	if pto.IsZero() || !pto.Before(h.s.T3Deadline()) {
		t.Fatalf("PTO %v, T3-rtx %v: want a PTO before T3-rtx in Fast Recovery", pto, h.s.T3Deadline())
	}
	h.at(pto)
	h.s.OnTimeout(h.now)
	d, ok := h.s.Next(h.now, sndTestPMDCS)
	if !ok {
		t.Fatal("no probe")
	}
	if d.Flags&chunk.FlagImmediate == 0 {
		t.Fatal("the probe has no I bit")
	}
	first := h.now
	for range 3 {
		next := h.s.PTODeadline()
		if !next.Before(h.s.T3Deadline()) {
			break
		}
		if next.Sub(h.now) <= pto.Sub(first) {
			t.Fatalf("PTO not backed off: %v", next.Sub(h.now))
		}
		h.at(next)
		h.s.OnTimeout(h.now)
		if _, ok := h.s.Next(h.now, sndTestPMDCS); !ok {
			t.Fatal("no probe after a backed-off PTO")
		}
	}
	if h.s.ErrorCount() != 0 {
		t.Fatalf("probes counted %d errors", h.s.ErrorCount())
	}
}

func TestSendMaxBurst(t *testing.T) {
	// Rule D: "the protocol parameter 'Max.Burst' SHOULD be used to limit
	// the number of packets sent".
	h := sndLossSetup(t, 40)
	h.queue(100)
	h.advance(sndTestRTT)
	h.s.cwnd = 100 * sndTestPMDCS
	h.sack(1039)
	if got := h.send(); len(got) != 4 {
		t.Fatalf("sent %d chunks after one SACK, want Max.Burst = 4", len(got))
	}
}

// Two SACKs handled before the association sends again release a burst
// each: the cap follows the SACKs, not only the last of them.
func TestSendMaxBurstPerSACK(t *testing.T) {
	h := sndLossSetup(t, 40)
	h.queue(100)
	h.advance(sndTestRTT)
	h.s.cwnd = 100 * sndTestPMDCS
	h.sack(1019)
	h.sack(1039)
	if got := h.send(); len(got) != 8 {
		t.Fatalf("sent %d chunks after two SACKs, want 2 * Max.Burst = 8", len(got))
	}
	h.sack(1040)
	if got := h.send(); len(got) != 4 {
		t.Fatalf("sent %d chunks after the next SACK, want Max.Burst = 4", len(got))
	}
}

func TestSendIBit(t *testing.T) {
	// §6.1: "The sending of a DATA chunk fills the congestion or receiver
	// window" is a reason for the I bit; so is the end of the queue.
	h := newSndHarness(t, SenderConfig{})
	h.queue(10)
	var flags []bool
	for {
		d, ok := h.s.Next(h.now, sndTestPMDCS)
		if !ok {
			break
		}
		flags = append(flags, d.Flags&chunk.FlagImmediate != 0)
	}
	if len(flags) != 4 || flags[0] || flags[1] || flags[2] || !flags[3] {
		t.Fatalf("I bits %v, want only on the chunk that fills cwnd", flags)
	}
}

func TestSendSilentSince(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	if !h.s.SilentSince().IsZero() {
		t.Fatal("SilentSince set with nothing outstanding")
	}
	h.queue(4)
	h.send()
	sent := h.now
	if !h.s.SilentSince().Equal(sent) {
		t.Fatalf("SilentSince = %v, want the first transmission %v", h.s.SilentSince(), sent)
	}
	h.advance(sndTestRTT)
	h.sack(1001)
	if !h.s.SilentSince().Equal(h.now) {
		t.Fatalf("SilentSince = %v, want the last acknowledgement %v", h.s.SilentSince(), h.now)
	}
	// A SACK acknowledging nothing new does not move it.
	acked := h.now
	h.advance(time.Second)
	h.sack(1001)
	if !h.s.SilentSince().Equal(acked) {
		t.Fatalf("SilentSince = %v after a SACK with nothing new, want %v", h.s.SilentSince(), acked)
	}
	h.sack(1003)
	// After an idle hour, new data starts the count again.
	h.advance(time.Hour)
	h.queue(1)
	h.send()
	if !h.s.SilentSince().Equal(h.now) {
		t.Fatalf("SilentSince = %v after idling, want %v", h.s.SilentSince(), h.now)
	}
}

func TestSendDrain(t *testing.T) {
	h := newSndHarness(t, SenderConfig{})
	for i := range 8 {
		h.s.Queue(chunk.Data{UserData: sndTestPayload}, i)
	}
	h.send()
	h.advance(sndTestRTT)
	h.sack(1000, [2]uint16{2, 2})
	got := h.s.Drain()
	if len(got) != 7 {
		t.Fatalf("Drain returned %d chunks, want 7", len(got))
	}
	for i, c := range got {
		if c.Data.TSN != uint32(1001+i) || c.Ref != i+1 {
			t.Fatalf("chunk %d: TSN %d ref %v", i, c.Data.TSN, c.Ref)
		}
	}
	if h.s.Queued() != 0 || h.s.FlightSize() != 0 || !h.s.NextDeadline().IsZero() {
		t.Fatalf("after Drain: %d queued, flightsize %d, deadline %v", h.s.Queued(), h.s.FlightSize(), h.s.NextDeadline())
	}
	if _, ok := h.s.Next(h.now, sndTestPMDCS); ok {
		t.Fatal("Next after Drain")
	}
}

func TestSendT3OnePacket(t *testing.T) {
	// §7.2.3: after T3-rtx, "no more than one SCTP packet will be in
	// flight ... until the endpoint receives acknowledgement". Small
	// chunks: several fit in the one packet, and no more follow.
	h := newSndHarness(t, SenderConfig{})
	for range 20 {
		h.s.Queue(chunk.Data{UserData: sndTestPayload[:100]}, nil)
	}
	h.send()
	h.at(h.s.T3Deadline())
	h.s.OnTimeout(h.now)
	var got []TSN
	for {
		d, ok := h.s.Next(h.now, sndTestPMDCS)
		if !ok {
			break
		}
		got = append(got, TSN(d.TSN))
	}
	if k := sndTestPMDCS / 116; len(got) != k {
		t.Fatalf("after T3-rtx sent %v, want the %d chunks of one packet", got, k)
	}
	h.advance(sndTestRTT)
	h.sack(got[0])
	if got := h.send(); len(got) == 0 {
		t.Fatal("nothing sent after the acknowledgement")
	}
}
