package rdmap

import (
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/term"
)

// Faults injected by the test lower layer: a corrupted byte, a truncated
// segment, a cut stream. Each stops the receiving stream with the triple
// it deserves, places nothing more, and flushes the work outstanding.
func TestInjectedFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault ddptest.Fault
		want  error
	}{
		// Octet 5 is the last octet of the STag of the first segment: the
		// Write now names an STag nobody registered.
		{"corrupted STag", ddptest.Fault{Corrupt: true, CorruptSegment: 0, CorruptOffset: 5}, term.DDPInvalidSTag},
		// Octet 0 is the DDP control byte: T flips, so a tagged segment
		// reads as untagged and its "QN" is garbage.
		{"corrupted control byte", ddptest.Fault{Corrupt: true, CorruptSegment: 0, CorruptOffset: 0}, term.DDPUntaggedInvalidVersion},
		{"truncated header", ddptest.Fault{Truncate: true, TruncateSegment: 0, TruncateTo: 9}, term.DDPLocalCatastrophic},
		{"cut stream", ddptest.Fault{CutAfter: 1}, ddp.ErrLLPLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: 100, Fault: tc.fault}})
			target := b.reg(t, 1000, RemoteWrite)
			rbuf := b.reg(t, 64, LocalWrite)
			b.qp.PostRecv(RecvWR{ID: 5, SGL: []SGE{{MR: rbuf, Length: 64}}})
			src := a.reg(t, 1000, 0)
			fill(src.Bytes(), 1)
			a.qp.PostWrite(WriteWR{ID: 1, SGL: []SGE{{MR: src, Length: 300}}, RemoteSTag: target.STag()})
			waitState(t, b.qp, StateTerminating)
			if !errors.Is(b.qp.Err(), tc.want) {
				t.Fatalf("error %v, want %v", b.qp.Err(), tc.want)
			}
			if c := wait(t, b.rcq); c.WRID != 5 || c.Status != StatusWRFlushErr {
				t.Fatalf("%+v", c)
			}
			// Nothing was placed past the fault: the first segment was the
			// faulty one (or, cut after it, the only one delivered). The
			// pipe's delivery goroutine is stopped first, so that reading
			// the memory does not race with a placement.
			b.end.Close()
			placed := 0
			for _, x := range target.Bytes() {
				if x != 0 {
					placed++
				}
			}
			if tc.fault.CutAfter == 0 && placed != 0 {
				t.Fatalf("%d octets placed", placed)
			}
			if tc.fault.CutAfter == 1 && placed > 100 {
				t.Fatalf("%d octets placed after the cut", placed)
			}
		})
	}
}
