//go:build !js

package mpa

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

// mpaHostile is a scripted peer's end of an MPA connection in Full
// Operation, with CRC and without Markers (rdmaptest.Hostile). TCP keeps
// the order the segments are written in, whatever sequence number the
// script gives them.
type mpaHostile struct {
	c net.Conn
	r *Reader
}

func (h mpaHostile) ReadSegment(context.Context) ([]byte, error) {
	ulpdu, err := h.r.Next()
	return bytes.Clone(ulpdu), err
}

func (h mpaHostile) WriteSegment(_ uint16, seg []byte) error {
	fpdu, err := AppendFPDU(nil, 0, Options{CRC: true}, seg)
	if err == nil {
		_, err = h.c.Write(fpdu)
	}
	return err
}

// Two Read Responses for one RDMA Read, and two Atomic Responses for one
// Atomic Request, over MPA/TCP, in order: the first completes the request; the
// second, which answers nothing, gets RDMAP's Terminate Unexpected OpCode
// (0x0/0x2/0x06); nothing is placed after it.
func TestAnsweredTwiceOverMPA(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		name := map[bool]string{false: "Read", true: "Atomic"}[atomic]
		t.Run(name, func(t *testing.T) {
			conns := make(chan net.Conn, 1)
			finished := make(chan struct{})
			addr := rawResponder(t, func(c net.Conn, req Frame) {
				ack := ddp.Offer(4, 4, []ddp.RTR{ddp.RTRWrite})
				c.Write((&Frame{Reply: true, CRC: true, Rev: req.Rev, Enhanced: true, PrivateData: ack.Append(nil)}).Append(nil))
				conns <- c
				<-finished
			})
			p := newPeer(t, rdmap.QPConfig{IRD: 4, ORD: 4})
			conn, err := Dial(tctx(t), "tcp", addr, p.QP, &Config{RTR: []ddp.RTR{ddp.RTRWrite}})
			if err != nil {
				t.Fatal(err)
			}
			c := <-conns
			rdmaptest.AnswerTwice(t, tctx(t), mpaHostile{c: c, r: NewReader(c, Options{CRC: true})}, p, atomic, false)
			close(finished) // the responder closes its end
			conn.Close()
		})
	}
}
