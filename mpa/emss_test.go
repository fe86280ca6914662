//go:build linux

package mpa

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/iwarpgo/iwarp/rdmap"
)

// TestMULPDUFollowsEMSS: a Conn's MULPDU follows the EMSS its TCP
// connection reports while it sends, "If the TCP implementation needs to
// adjust EMSS to support MTU changes or changing TCP options, the MULPDU
// value is changed accordingly" (RFC 5044 §4.5), and DDP's segments grow
// with it. Linux starts a loopback connection with an MSS bounded by half
// the peer's first window (32741 octets here) and raises it to 65483 as
// the window opens; the MULPDU stops at 64768 octets, "The range of
// MULPDU values MUST be between 128 octets and 64768 octets, inclusive"
// (§3). The dialer is traced, so the EMSS is read through the tracing
// wrapper too.
func TestMULPDUFollowsEMSS(t *testing.T) {
	noLeaks(t)
	rec := &traceRecorder{}
	// Room for the 128 Writes beside what the startup may still hold
	// (the RTR indication).
	a, b := newPeer(t, rdmap.QPConfig{SendDepth: 256}), newPeer(t, rdmap.QPConfig{})
	ac, bc := connectPair(t, Config{}, Config{Trace: rec.tracer}, a, b)
	defer bc.Close()
	defer ac.Close()
	tc := ac.nc.(*tracedConn).Conn.(*net.TCPConn)
	emss0, err := EMSS(tc)
	if err != nil {
		t.Fatal(err)
	}
	first := ac.MULPDU()
	if first != MULPDU(emss0, false) {
		t.Fatalf("MULPDU %d at the start, want %d for the EMSS of %d", first, MULPDU(emss0, false), emss0)
	}

	const size, count = 64 << 10, 128 // 8 MiB, eight looks at the EMSS
	src := a.Reg(t, size, 0)
	fillp(src.Bytes(), 3)
	sink := b.Reg(t, size, rdmap.RemoteWrite)
	for i := range count {
		wr := rdmap.WriteWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: src, Length: size}}, RemoteSTag: sink.STag(), Unsignaled: i < count-1}
		if err := a.QP.PostWrite(wr); err != nil {
			t.Fatal(err)
		}
	}
	if c := waitC(t, a.SCQ); c.Status != rdmap.StatusSuccess {
		t.Fatalf("completion %+v", c)
	}
	// A Send after the Writes: once it is delivered, so are they.
	rbuf := b.Reg(t, 16, rdmap.LocalWrite)
	if err := b.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 16}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.QP.PostSend(rdmap.SendWR{ID: 2}); err != nil {
		t.Fatal(err)
	}
	waitC(t, a.SCQ)
	waitC(t, b.RCQ)
	if !bytes.Equal(sink.Bytes(), src.Bytes()) {
		t.Fatal("the sink does not hold what was written")
	}

	emss, err := EMSS(tc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ac.MULPDU(), MULPDU(emss, false); got != want {
		t.Fatalf("MULPDU %d after 8 MiB, want %d for the EMSS of %d (%d at the start)", got, want, emss, emss0)
	}
	longest := 0
	rec.mu.Lock()
	for _, u := range rec.units[1:] { // after the MPA Request
		if u.fromClient {
			longest = max(longest, int(binary.BigEndian.Uint16(u.b)))
		}
	}
	rec.mu.Unlock()
	if longest > MULPDU(max(emss, emss0), false) {
		t.Fatalf("an FPDU of %d octets of ULPDU, above the MULPDU of every EMSS seen (%d, %d)", longest, emss0, emss)
	}
	if emss > emss0 && longest <= first {
		t.Fatalf("the EMSS grew from %d to %d, but no FPDU was longer than the first MULPDU (%d)", emss0, emss, first)
	}
	t.Logf("EMSS %d at the start, %d after 8 MiB; longest ULPDU sent %d", emss0, emss, longest)
}
