//go:build !js

package sctpddp_test

import (
	"context"
	"testing"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/datachannel"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// dcHostile is a scripted peer's data channel (rdmaptest.Hostile): its
// messages are RFC 5043's chunks, the DDP-SSN first.
type dcHostile struct{ s *datachannel.Stream }

func (h dcHostile) ReadSegment(ctx context.Context) ([]byte, error) {
	return sctpddp.ReadSegmentChunk(ctx, h.s.ReadMessage)
}

func (h dcHostile) WriteSegment(ssn uint16, seg []byte) error {
	return h.s.DataChannel().Send(wire.SegmentChunk{SSN: wire.SSN(ssn), Segment: seg}.Append(nil))
}

// The same over a WebRTC data channel between two pion PeerConnections.
func TestAnsweredTwiceOverDataChannel(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		name := map[bool]string{false: "Read", true: "Atomic"}[atomic]
		t.Run(name, func(t *testing.T) {
			_, _, victim, hostile := peerConnectionPair(t, 5, sctpddp.ChannelConfig{MULPDU: 1000})
			ctx := testCtx(t)
			p := rdmaptest.NewPeer(t, rdmap.QPConfig{})
			errc := make(chan error, 1)
			go func() {
				_, err := sctpddp.ConnectStream(ctx, victim, p.QP, sctpddp.SessionConfig{})
				errc <- err
			}()
			buf := make([]byte, 1<<16)
			n, ppid, err := hostile.ReadMessage(ctx, buf)
			if err != nil || ppid != wire.PPIDSessionControl {
				t.Fatalf("first message: %v %v", ppid, err)
			}
			if m, _, err := wire.ParseSessionControl(buf[:n]); err != nil || m.Function != wire.FunctionEnhancedInitiate {
				t.Fatalf("first message %v %v", m.Function, err)
			}
			accept := (&wire.SessionControl{Function: wire.FunctionEnhancedAccept, Enhanced: wire.EnhancedData{IRD: 4, ORD: 4}}).Append(nil)
			if err := hostile.DataChannel().Send(accept); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			rdmaptest.AnswerTwice(t, ctx, dcHostile{hostile}, p, atomic, true)
		})
	}
}
