//go:build !js

package mpa

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

// FuzzConnSegments plays an initiator that completes the MPA startup and
// then sends any DDP segments, each framed as an FPDU with its CRC (or,
// when the octet before it is odd, with the CRC's last octet flipped):
// the responder's Conn, and the queue pair it runs, must not panic or
// hang, and must not change memory the peer has no right to write. The
// input is the list of segments, each after two octets, the first
// giving the flag, the second its length. STag 0x1000 in a seed's tagged
// segment stands for the writable region, 0x2000 for the read-only one.
func FuzzConnSegments(f *testing.F) {
	ctl := func(op rdmap.Opcode) [5]byte { return [5]byte{byte(rdmap.MakeControl(op))} }
	write := func(stag uint32, to uint64, p string) []byte {
		h := ddp.Header{Tagged: true, Last: true, DV: 1, RsvdULP: ctl(rdmap.OpWrite), STag: stag, TO: to}
		return append(h.Append(nil), p...)
	}
	send := func(msn uint32, p string) []byte {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: ctl(rdmap.OpSend), QN: rdmap.QNSend, MSN: msn}
		return append(h.Append(nil), p...)
	}
	readReq := (&rdmap.ReadRequest{SinkSTag: 7, RDMARDSZ: 8, SrcSTag: 0x1000}).Append((&ddp.Header{Last: true, DV: 1, RsvdULP: ctl(rdmap.OpReadRequest), QN: rdmap.QNReadReq, MSN: 1}).Append(nil))
	for _, segs := range [][][]byte{
		{write(0x1000, 0, "placed"), send(1, "a send")},
		{write(0x2000, 0, "refused"), write(0x1000, 0, "after")},
		{readReq, write(0x1000, 60, "past the end")},
	} {
		for _, bad := range []byte{0, 1} {
			var in []byte
			for i, s := range segs {
				in = append(in, bad&byte(i), byte(len(s)))
				in = append(in, s...)
			}
			f.Add(in)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p := newPeer(t, rdmap.QPConfig{})
		targets := rdmaptest.NewTargets(t, p)
		stags := targets.STags()

		srvNC, cliNC := net.Pipe()
		defer cliNC.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cfg := &Config{HandshakeTimeout: 2 * time.Second}
		served := make(chan *Conn, 1)
		go func() {
			defer close(served)
			r, err := Server(ctx, srvNC, cfg)
			if err != nil {
				srvNC.Close()
				return
			}
			c, err := r.Accept(p.QP, nil)
			if err != nil {
				srvNC.Close()
				return
			}
			served <- c
		}()
		go io.Copy(io.Discard, cliNC) // the Reply, Terminates, Read Responses
		cliNC.SetWriteDeadline(time.Now().Add(3 * time.Second))
		if _, err := cliNC.Write((&Frame{Rev: 1, CRC: true}).Append(nil)); err != nil {
			t.Fatal(err)
		}
		var stream []byte
		for len(in) >= 2 {
			flag, l := in[0], min(int(in[1]), len(in)-2)
			seg := bytes.Clone(in[2 : 2+l])
			in = in[2+l:]
			if len(seg) >= 6 && ddp.Control(seg[0]).Tagged() {
				if s, ok := stags[binary.BigEndian.Uint32(seg[2:6])]; ok {
					binary.BigEndian.PutUint32(seg[2:6], s)
				}
			}
			fpdu, err := AppendFPDU(nil, 0, Options{CRC: true}, seg)
			if err != nil {
				continue
			}
			if flag&1 == 1 {
				fpdu[len(fpdu)-1] ^= 0xff
			}
			stream = append(stream, fpdu...)
		}
		cliNC.Write(stream) // ends early once the responder has closed
		cliNC.Close()
		if c := <-served; c != nil {
			c.Close()
		}
		p.QP.Close(ctx)
		targets.Untouched(t)
	})
}
