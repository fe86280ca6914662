//go:build !js

package mpa

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/linuxguest"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// TestAtomicSiw sends RFC 7306's messages to Linux siw, which implements
// none of them (it advertises no atomics, and refuses every opcode past
// Terminate: siw_get_hdr's "received unknown packet type"), in a QEMU
// guest: stock "rping -s" is the responder. siw answers an Atomic Request
// with a Terminate (it means Unexpected OpCode, without the Terminated
// DDP Header, but its Layer and Error Type nibbles go out swapped as its
// bitfields lay them out on x86, so that RFC 5040 §4.8 reads MPA's
// Insufficient IRD); the atomic work request completes with an error
// (flushed, with siw's Terminate as the reason) and the stream stops: the
// request fails cleanly. Immediate Data fares the same, except that it
// had completed already, as a Send does when the LLP took it.
func TestAtomicSiw(t *testing.T) {
	if testing.Short() {
		t.Skip("the Linux guest is slow; skipped in -short mode")
	}
	const port = 7175
	g := linuxguest.ForTest(t, linuxguest.Options{Forward: []int{port}})
	addr := g.HostAddr(port)
	for _, tc := range []struct {
		name string
		post func(p *peer, res *rdmap.MemoryRegion) error
		want rdmap.WorkOp
	}{
		{"FetchAdd", func(p *peer, res *rdmap.MemoryRegion) error {
			// RFC 7306 §1.1's probe: a FetchAdd of 0 changes nothing.
			return p.QP.PostAtomic(rdmap.AtomicWR{ID: 1, Op: rdmap.FetchAdd, Local: rdmap.SGE{MR: res, Length: 8}, RemoteSTag: 0x100})
		}, rdmap.WorkFetchAdd},
		{"Immediate Data", func(p *peer, _ *rdmap.MemoryRegion) error {
			return p.QP.PostSend(rdmap.SendWR{ID: 1, WithImm: true, Imm: 7})
		}, rdmap.WorkSend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv, err := g.Start(fmt.Sprintf("rping -s -v -a %s -p %d", linuxguest.GuestIP, port))
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Kill()
			if err := g.WaitListening(ctx, port); err != nil {
				t.Fatal(err)
			}
			a := newPeer(t, rdmap.QPConfig{})
			rec := &traceRecorder{}
			c, err := Dial(ctx, "tcp4", addr, a.QP, &Config{ClientServer: true, FirstFPDUDelay: 100 * time.Millisecond, Trace: rec.tracer})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res := a.Reg(t, 8, rdmap.LocalWrite)
			if err := tc.post(a, res); err != nil {
				t.Fatal(err)
			}
			comp := waitC(t, a.SCQ)
			select {
			case <-a.QP.Terminated():
			case <-time.After(20 * time.Second):
				t.Fatal("the stream did not stop")
			}
			t.Logf("completion: %v %v: %v", comp.Op, comp.Status, comp.Err)
			t.Logf("the queue pair stopped: %v", a.QP.Err())
			var th *rdmap.TerminateHeader
			rec.mu.Lock()
			for _, u := range rec.units {
				if u.fromClient || len(u.b) < 2+ddp.UntaggedHeaderLen {
					continue
				}
				seg := u.b[2:]
				h, hl, err := ddp.ParseHeader(seg)
				if err == nil && rdmap.Control(h.RsvdULP[0]).Opcode() == rdmap.OpTerminate {
					x, _, err := rdmap.ParseTerminate(seg[hl:])
					if err == nil {
						th = &x
						t.Logf("siw's Terminate: % x", seg[hl:hl+4])
					}
				}
			}
			rec.mu.Unlock()
			if th == nil {
				t.Fatal("siw sent no Terminate")
			}
			if comp.WRID != 1 || comp.Op != tc.want {
				t.Fatalf("completion %+v", comp)
			}
			// siw's Terminate: 20 06 00 00, RDMAP / Remote Operation Error
			// / Unexpected OpCode with the nibbles swapped, no headers.
			if th.Layer != term.LayerLLP || th.EType != 0 || th.Code != 0x06 || th.M || th.D || th.R {
				t.Fatalf("siw's Terminate %v", th)
			}
			// Decoded by the RFC, whoever sent it.
			if !errors.Is(a.QP.Err(), term.MPAInsufficientIRD) {
				t.Fatalf("the stream stopped with %v", a.QP.Err())
			}
			switch tc.want {
			case rdmap.WorkFetchAdd:
				if comp.Status == rdmap.StatusSuccess || !errors.Is(comp.Err, term.MPAInsufficientIRD) {
					t.Fatalf("the atomic completed %v: %v", comp.Status, comp.Err)
				}
			default:
				// Immediate Data completed when the LLP took it (RFC 7306
				// §6.4, as a Send).
				if comp.Status != rdmap.StatusSuccess {
					t.Fatalf("Immediate Data completed %v", comp.Status)
				}
			}
			out, _ := srv.Wait(ctx)
			t.Logf("rping -s: %s", out)
		})
	}
}
