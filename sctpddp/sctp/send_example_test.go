package sctp_test

import (
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The send side of an association: chunks are queued, Next hands out what
// cwnd and rwnd allow, a SACK releases them, and the run loop arms one
// timer at NextDeadline.
func ExampleSender() {
	now := time.Unix(1_700_000_000, 0)
	snd := sctp.NewSender(sctp.SenderConfig{PMDCS: 1188, InitialTSN: 1, PeerRwnd: 1 << 20}, now)
	snd.ObserveRTT(2 * time.Millisecond) // the handshake's round trip

	payload := make([]byte, 1172)
	for i := range 6 {
		snd.Queue(chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, PPID: 16, UserData: payload}, i)
	}
	var pkt []byte
	for {
		room := 1188
		pkt = pkt[:0]
		for {
			d, ok := snd.Next(now, room)
			if !ok {
				break
			}
			room -= d.Len()
			pkt = d.Append(pkt)
			fmt.Printf("DATA TSN %d I=%v\n", d.TSN, d.Flags&chunk.FlagImmediate != 0)
		}
		if len(pkt) == 0 {
			break
		}
	}
	fmt.Println("cwnd", snd.Cwnd(), "flightsize", snd.FlightSize(), "T3-rtx in", snd.T3Deadline().Sub(now))

	now = now.Add(2 * time.Millisecond)
	r := snd.HandleSACK(now, chunk.SACK{CumulativeTSNAck: 2, ARwnd: 1 << 20})
	for _, c := range r.Released {
		fmt.Println("released", c.Data.TSN, "ref", c.Ref)
	}
	fmt.Println("cwnd", snd.Cwnd(), "next deadline in", snd.NextDeadline().Sub(now))
	// Output:
	// DATA TSN 1 I=false
	// DATA TSN 2 I=false
	// DATA TSN 3 I=false
	// DATA TSN 4 I=true
	// cwnd 4344 flightsize 4752 T3-rtx in 250ms
	// released 1 ref 0
	// released 2 ref 1
	// cwnd 6720 next deadline in 4ms
}
