//go:build !js

package sctpddp

import (
	"context"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// RFC 5043 §6.1: "If the adaptation layer receives a Payload Data Chunk
// that conforms to none of the enumerated legal patterns, the DDP Stream
// Session MUST be terminated."

// encode returns m's wire form, unchecked.
func encode(m wire.SessionControl) []byte { return m.Append(nil) }

// The active side terminates a session whose reply fits no legal
// sequence (§6.1: "If the adaptation layer receives a Payload Data Chunk
// that conforms to none of the enumerated legal patterns, the DDP Stream
// Session MUST be terminated."), and one it gives up waiting for.
func TestConnectTerminatesIllegalReply(t *testing.T) {
	enhanced := wire.EnhancedData{IRD: 8, ORD: 8}
	seg := func(ssn wire.SSN) []byte {
		return wire.SegmentChunk{SSN: ssn, Segment: []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}}.Append(nil)
	}
	control := func(m wire.SessionControl) func(t *testing.T, st *Stream) {
		return func(t *testing.T, st *Stream) { rawWrite(t, st, wire.PPIDSessionControl, encode(m)) }
	}
	cases := []struct {
		name  string
		reply func(t *testing.T, st *Stream)
		ctx   time.Duration // the Connect's, if not the test's
	}{
		{"an Accept with DDP-SSN 5", control(wire.SessionControl{SSN: 5, Function: wire.FunctionEnhancedAccept, Enhanced: enhanced}), 0},
		{"an Initiate", control(wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: enhanced}), 0},
		{"a message that does not parse", func(t *testing.T, st *Stream) { rawWrite(t, st, wire.PPIDSessionControl, []byte{0, 0, 0}) }, 0},
		{"a basic Accept to an enhanced Initiate", control(wire.SessionControl{Function: wire.FunctionAccept}), 0},
		{"65 DDP Segments and no Accept", func(t *testing.T, st *Stream) {
			for i := range maxEarlySegments + 1 {
				rawWrite(t, st, wire.PPIDSegment, seg(wire.SSN(i+1)))
			}
		}, 0},
		{"no reply before the context ends", func(*testing.T, *Stream) {}, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := pinnedConfigs(t)
			server, client := connect(t, srv, cli)
			ctx := testCtx(t)
			cctx := ctx
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				cctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			qp := newPeer(t, nil).QP
			errc := make(chan error, 1)
			go func() {
				_, err := Connect(cctx, client, 1, qp, SessionConfig{})
				errc <- err
			}()
			// The server is scripted by hand.
			st, err := server.AcceptStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m := readControl(t, ctx, st); m.Function != wire.FunctionEnhancedInitiate {
				t.Fatalf("first message %v", m.Function)
			}
			tc.reply(t, st)
			if err := <-errc; err == nil {
				t.Fatal("Connect succeeded")
			}
			if m := readControl(t, ctx, st); m.Function != wire.FunctionTerminate || m.SSN != 1 {
				t.Fatalf("after the Initiate: %v with DDP-SSN %d", m.Function, m.SSN)
			}
		})
	}
}

// The passive side answers every first message that is no legal
// Initiate with a DDP Stream Session Terminate (§6.1), however long.
func TestInitiateTooLongTerminated(t *testing.T) {
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	server.Sessions(0)
	big := server.MULPDU() + 1000
	cases := []struct {
		name string
		ppid wire.PPID
		msg  []byte
	}{
		{"an Initiate with 513 octets of Private Data", wire.PPIDSessionControl,
			encode(wire.SessionControl{Function: wire.FunctionInitiate, PrivateData: make([]byte, 513)})},
		{"an Initiate with 600 octets of Private Data", wire.PPIDSessionControl,
			encode(wire.SessionControl{Function: wire.FunctionInitiate, PrivateData: make([]byte, 600)})},
		{"a 700-octet DDP Segment Chunk", wire.PPIDSegment, append([]byte{0, 0, 0xc1, 0x40}, make([]byte, 696)...)},
		{"a session control message longer than the MULPDU", wire.PPIDSessionControl,
			encode(wire.SessionControl{Function: wire.FunctionInitiate, PrivateData: make([]byte, big)})},
		{"a DDP Segment Chunk longer than the MULPDU", wire.PPIDSegment, append([]byte{0, 0, 0xc1, 0x40}, make([]byte, big)...)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := client.OpenStream(uint16(11 + 2*i))
			if err != nil {
				t.Fatal(err)
			}
			rawWrite(t, st, tc.ppid, tc.msg)
			if m := readControl(t, testCtx(t), st); m.Function != wire.FunctionTerminate || m.SSN != 0 {
				t.Fatalf("reply %v with DDP-SSN %d", m.Function, m.SSN)
			}
		})
	}
}
