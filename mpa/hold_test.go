package mpa

import (
	"fmt"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
)

// TestConnHold: between Hold and Release (ddp.Batcher) whole messages
// stay in the Writer's gather list, which is written whenever it is full;
// Release writes the rest, and everything arrives in order. With Markers
// every FPDU still leaves at once.
func TestConnHold(t *testing.T) {
	for _, markers := range []bool{false, true} {
		t.Run(fmt.Sprintf("markers=%v", markers), func(t *testing.T) {
			noLeaks(t)
			a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{RecvDepth: 64})
			ac, _ := connectPair(t, Config{Markers: markers}, Config{Markers: markers}, a, b)
			const n = 2*maxQueued + 8
			rbuf := b.Reg(t, n*8, rdmap.LocalWrite)
			for i := range n {
				if err := b.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(8 * i), Length: 8}}}); err != nil {
					t.Fatal(err)
				}
			}
			// Sends written straight to the LLP, as the queue pair's
			// sender would (MSNs from 1).
			ac.Hold()
			for i := range n {
				h := ddp.Header{Last: true, DV: ddp.Version, QN: rdmap.QNSend, MSN: uint32(i + 1)}
				h.RsvdULP[0] = byte(rdmap.MakeControl(rdmap.OpSend))
				if err := ac.WriteSegment(h.Append(nil), [][]byte{fmt.Appendf(nil, "msg%05d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			sent := n - 8 // two full gather lists
			if markers {
				sent = n
			}
			got := 0
			check := func(c rdmap.Completion) {
				if want := fmt.Sprintf("msg%05d", got); c.WRID != uint64(got) || c.Status != rdmap.StatusSuccess || string(rbuf.Bytes()[8*got:8*got+8]) != want {
					t.Fatalf("receive %d: %+v, %q", got, c, rbuf.Bytes()[8*got:8*got+8])
				}
				got++
			}
			for got < sent {
				check(waitC(t, b.RCQ))
			}
			time.Sleep(50 * time.Millisecond)
			var more [1]rdmap.Completion
			if b.RCQ.Poll(more[:]) != 0 {
				t.Fatalf("a message held after %d arrived before Release", got)
			}
			if err := ac.Release(); err != nil {
				t.Fatal(err)
			}
			for got < n {
				check(waitC(t, b.RCQ))
			}
		})
	}
}
