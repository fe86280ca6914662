//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// FuzzSessionMessages plays a peer that sends whatever messages it likes
// on a DDP stream (a data channel's, fed by hand; the session layer is
// the same on every MessageStream): the first must be a legal Initiate
// for a session to start (RFC 5043 §6.1); the rest go to the running
// session. The input is the list of messages, each after two octets
// giving its length. Nothing may panic or hang, and memory the peer has
// no right to write (a region with remote read access only, one with
// local access only) stays untouched. STag 0x1000 in a seed's tagged
// segment stands for the writable region, 0x2000 for the read-only one.
func FuzzSessionMessages(f *testing.F) {
	initiate := (&wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: ddp.Offer(4, 4, nil), PrivateData: []byte("hi")}).Append(nil)
	chunk := func(ssn wire.SSN, h ddp.Header, payload string) []byte {
		return wire.SegmentChunk{SSN: ssn, Segment: append(h.Append(nil), payload...)}.Append(nil)
	}
	write := func(stag uint32, to uint64) ddp.Header {
		return ddp.Header{Tagged: true, Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpWrite))}, STag: stag, TO: to}
	}
	send := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpSend))}, QN: rdmap.QNSend, MSN: 1}
	terminate := (&wire.SessionControl{Function: wire.FunctionTerminate}).Append(nil)
	for _, msgs := range [][][]byte{
		{initiate, chunk(1, write(0x1000, 0), "placed"), chunk(2, send, "a send")},
		{initiate, chunk(1, write(0x2000, 0), "refused"), chunk(2, write(0x1000, 0), "after")},
		{initiate, chunk(3, write(0x1000, 8), "ahead"), chunk(1, send, "x"), chunk(2, write(0x1000, 60), "past the end")},
		{initiate, initiate, chunk(1, send, "a second Initiate")},
		{initiate, terminate, chunk(1, write(0x1000, 0), "after the Terminate")},
		{initiate, chunk(0xffff, send, "far off")},
	} {
		var in []byte
		for _, m := range msgs {
			in = binary.BigEndian.AppendUint16(in, uint16(len(m)))
			in = append(in, m...)
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var msgs [][]byte
		for len(in) >= 2 && len(msgs) < 64 {
			l := min(int(binary.BigEndian.Uint16(in)), len(in)-2)
			msgs = append(msgs, bytes.Clone(in[2:2+l]))
			in = in[2+l:]
		}
		if len(msgs) == 0 {
			return
		}
		ch := &fakeChannel{}
		st, err := NewChannelStream(ch, 1, ChannelConfig{MULPDU: 1000})
		if err != nil {
			t.Fatal(err)
		}
		st.Opened()
		p := rdmaptest.NewPeer(t, rdmap.QPConfig{})
		targets := rdmaptest.NewTargets(t, p)
		stags := targets.STags()
		for i, m := range msgs {
			if c, _, err := wire.ParseSegmentChunk(m); err == nil && ddp.Control(c.Segment[0]).Tagged() {
				if s, ok := stags[binary.BigEndian.Uint32(c.Segment[2:6])]; ok {
					binary.BigEndian.PutUint32(msgs[i][wire.SSNLen+2:], s)
				}
			}
		}
		st.Receive(msgs[0], false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := ReadInitiate(ctx, st, time.Second)
		if err != nil {
			return
		}
		s, err := req.Accept(p.QP, SessionConfig{})
		if err != nil {
			return
		}
		for _, m := range msgs[1:] {
			st.Receive(m, false)
		}
		time.Sleep(time.Millisecond)
		ch.ack() // the Accept has arrived: the Terminate may go at once
		s.Close()
		p.QP.Close(ctx)
		targets.Untouched(t)
	})
}
