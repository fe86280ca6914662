package rdmaptest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
)

// Targets are what a hostile peer's segments may aim at on a Peer: a
// 64-octet region it may write and read, one it may only read, one of
// local access only, and a posted 64-octet receive buffer. The fuzz tests
// of the transports feed a connection anything and then check that the
// last two never changed (RFC 5040 §8.1.1: "An RNIC MUST ensure that a
// Remote Peer is not able to access memory outside of the buffer
// specified when the STag was enabled for remote access").
type Targets struct {
	Writable, ReadOnly, Local *rdmap.MemoryRegion
}

// NewTargets registers the Targets on p and posts the receive buffer.
func NewTargets(t testing.TB, p *Peer) *Targets {
	t.Helper()
	g := &Targets{
		Writable: p.Reg(t, 64, rdmap.RemoteWrite|rdmap.RemoteRead),
		ReadOnly: p.Reg(t, 64, rdmap.RemoteRead),
		Local:    p.Reg(t, 64, rdmap.LocalWrite),
	}
	rbuf := p.Reg(t, 64, rdmap.LocalWrite)
	if err := p.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}}); err != nil {
		t.Fatal(err)
	}
	return g
}

// STags maps the stand-ins a seed's tagged segments use, 0x1000 for the
// writable region and 0x2000 for the read-only one, to their STags.
func (g *Targets) STags() map[uint32]uint32 {
	return map[uint32]uint32{0x1000: g.Writable.STag(), 0x2000: g.ReadOnly.STag()}
}

// Untouched fails the test if the regions the peer may not write changed.
func (g *Targets) Untouched(t testing.TB) {
	t.Helper()
	for name, mr := range map[string]*rdmap.MemoryRegion{"read-only": g.ReadOnly, "local": g.Local} {
		if !bytes.Equal(mr.Bytes(), make([]byte, 64)) {
			t.Fatalf("the %s region changed: % x", name, mr.Bytes())
		}
	}
}

// FixedORD is a queue pair whose ORD cannot be changed: SetORD fails, a
// local failure in the middle of a connection's start (RFC 6581 §9.3).
type FixedORD struct{ *rdmap.QueuePair }

// SetORD fails.
func (FixedORD) SetORD(int) error { return errors.New("this device cannot change its ORD") }

// ExpectRejected runs the dials at once, each an initiator that nobody
// accepts, and checks that every one is rejected (a ddp.RejectedError)
// within within of its start: a listener that nobody serves gives each
// initiator an answer, and the peer its places back, in time.
func ExpectRejected(t testing.TB, within time.Duration, dials []func() error) {
	t.Helper()
	type result struct {
		err  error
		took time.Duration
	}
	out := make(chan result, len(dials))
	for _, dial := range dials {
		go func() {
			start := time.Now()
			err := dial()
			out <- result{err, time.Since(start)}
		}()
	}
	for range dials {
		r := <-out
		var re *ddp.RejectedError
		if !errors.As(r.err, &re) {
			t.Fatalf("an initiator nobody accepted got %v after %v, want a rejection", r.err, r.took)
		}
		if r.took > within {
			t.Fatalf("an initiator was rejected after %v, want within %v", r.took, within)
		}
	}
}
