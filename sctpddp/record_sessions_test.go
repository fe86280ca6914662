//go:build !js

package sctpddp

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

var updateCaptures = flag.Bool("update", false, "record the bundled captures this package records (web/static/captures/sessions-sctp.pcap, reorder-sctp.pcap, loss-streams-sctp.pcap)")

// recordTo starts a recorder of SCTP packets into a temporary file, or,
// with -update, into the bundled capture name, and returns it and the
// file's path.
func recordTo(t *testing.T, name string) (*capture.Recorder, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if *updateCaptures {
		path = filepath.Join("..", "web", "static", "captures", name)
	}
	rec, err := capture.NewRecorder(path, capture.SCTP)
	if err != nil {
		t.Fatal(err)
	}
	return rec, path
}

// TestRecordSessions records, over a real association on loopback, two
// DDP Stream Sessions on one SCTP association (RFC 5043 §6): each Writes
// and Sends; then the second Writes past the end of the region it was
// given and is terminated (DDP Base or Bounds), while the first goes on
// Sending. The capture, the SCTP packets before DTLS encryption, must
// decode to both sessions' Initiate and Accept, and the Terminate on the
// second's stream alone. With -update it writes the bundled capture the
// demo page replays.
func TestRecordSessions(t *testing.T) {
	rec, path := recordTo(t, "sessions-sctp.pcap")
	srv, cli := pinnedConfigs(t)
	cli.Trace = rec.SCTPTrace
	server, client := connect(t, srv, cli)
	rec.SetLocal(client.LocalAddr())
	sa := server.Sessions(0)
	var as, bs [2]*peer
	for i := range as {
		as[i], bs[i] = newPeer(t, nil), newPeer(t, nil)
		sessionPair(t, server, client, sa, uint16(10+i), as[i], bs[i])
	}
	var regions [2]*rdmap.MemoryRegion
	for i, b := range bs {
		regions[i] = b.Reg(t, 64, rdmap.RemoteWrite)
		rbuf := b.Reg(t, 2*32, rdmap.LocalWrite)
		for k := range 2 {
			if err := b.QP.PostRecv(rdmap.RecvWR{ID: uint64(k), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(32 * k), Length: 32}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, a := range as {
		src := a.Reg(t, 32, 0)
		copy(src.Bytes(), "session one: a Write, a Send")
		if i == 1 {
			copy(src.Bytes(), "session two: a Write, a Send")
		}
		if err := a.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 28}}, RemoteSTag: regions[i].STag(), RemoteTO: regions[i].Base()}); err != nil {
			t.Fatal(err)
		}
		if err := a.QP.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: src, Length: 12}}}); err != nil {
			t.Fatal(err)
		}
		if c := waitC(t, bs[i].RCQ); c.Status != rdmap.StatusSuccess {
			t.Fatalf("session %d: receive %v", i+1, c.Status)
		}
	}
	// The second session Writes past its region's end.
	over := as[1].Reg(t, 32, 0)
	if err := as[1].QP.PostWrite(rdmap.WriteWR{ID: 3, SGL: []rdmap.SGE{{MR: over, Length: 32}}, RemoteSTag: regions[1].STag(), RemoteTO: regions[1].Base() + 48}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-as[1].QP.Terminated():
	case <-testCtx(t).Done():
		t.Fatal("no Terminate for a Write past the region's end")
	}
	var te *term.Error
	if err := as[1].QP.Err(); !errors.As(err, &te) || !te.Remote || te.Layer != term.LayerDDP {
		t.Fatalf("session 2 stopped with %v, want the peer's DDP Terminate", err)
	}
	// The first goes on.
	src := as[0].Reg(t, 16, 0)
	copy(src.Bytes(), "still here")
	if err := as[0].QP.PostSend(rdmap.SendWR{ID: 4, SGL: []rdmap.SGE{{MR: src, Length: 10}}}); err != nil {
		t.Fatal(err)
	}
	if c := waitC(t, bs[0].RCQ); c.Status != rdmap.StatusSuccess {
		t.Fatalf("session 1 after session 2 ended: %v", c.Status)
	}
	client.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := capture.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	terms := map[uint16]int{}
	var inits, accepts int
	for _, r := range recs {
		switch {
		case strings.HasSuffix(r.Function, "Session Initiate"):
			inits++
		case strings.HasSuffix(r.Function, "Session Accept"):
			accepts++
		case r.Terminate != nil && r.SCTPStream != nil:
			terms[*r.SCTPStream]++
		}
	}
	if inits != 2 || accepts != 2 || len(terms) != 1 {
		t.Fatalf("%d Initiates, %d Accepts, Terminates by SCTP stream %v: want 2, 2 and one stream's", inits, accepts, terms)
	}
}
