//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"testing"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// sctpHostile is a scripted peer's raw SCTP stream (rdmaptest.Hostile).
type sctpHostile struct{ st *Stream }

func (h sctpHostile) ReadSegment(ctx context.Context) ([]byte, error) {
	return readSegmentChunk(ctx, h.st.ReadMessage)
}

func (h sctpHostile) WriteSegment(ssn uint16, seg []byte) error {
	return h.st.s.Write(context.Background(), wire.SegmentChunk{SSN: wire.SSN(ssn), Segment: seg}.Append(nil), wire.PPIDSegment)
}

// readSegmentChunk reads messages until a DDP Segment Chunk and returns
// its segment.
func readSegmentChunk(ctx context.Context, read func(context.Context, []byte) (int, wire.PPID, error)) ([]byte, error) {
	buf := make([]byte, 1<<16)
	for {
		n, ppid, err := read(ctx, buf)
		if err != nil {
			return nil, err
		}
		if ppid != wire.PPIDSegment {
			continue
		}
		c, _, err := wire.ParseSegmentChunk(buf[:n])
		if err != nil {
			return nil, err
		}
		return bytes.Clone(c.Segment), nil
	}
}

// Two Read Responses for one RDMA Read, and two Atomic Responses for one
// Atomic Request, the later DDP-SSN first, over a DTLS/SCTP association:
// the queue pair answers with the exact Terminate and places nothing
// more (rdmaptest.AnswerTwice).
func TestAnsweredTwiceOverSCTP(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		name := map[bool]string{false: "Read", true: "Atomic"}[atomic]
		t.Run(name, func(t *testing.T) {
			srv, cli := pinnedConfigs(t)
			server, client := connect(t, srv, cli)
			ctx := testCtx(t)
			p := rdmaptest.NewPeer(t, rdmap.QPConfig{})
			errc := make(chan error, 1)
			go func() {
				_, err := Connect(ctx, client, 1, p.QP, SessionConfig{})
				errc <- err
			}()
			st, err := server.AcceptStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m := readControl(t, ctx, st); m.Function != wire.FunctionEnhancedInitiate {
				t.Fatalf("first message %v", m.Function)
			}
			rawWrite(t, st, wire.PPIDSessionControl, encode(wire.SessionControl{Function: wire.FunctionEnhancedAccept, Enhanced: wire.EnhancedData{IRD: 4, ORD: 4}}))
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			rdmaptest.AnswerTwice(t, ctx, sctpHostile{st}, p, atomic, true)
		})
	}
}
