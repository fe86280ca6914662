package sctp_test

import (
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The association's run loop gives the Receiver each packet's DATA
// chunks, asks when the SACK is due and builds it.
func ExampleReceiver() {
	r, err := sctp.NewReceiver(sctp.ReceiverConfig{PeerInitialTSN: 100, InboundStreams: 2}, func(m sctp.RecvMessage) {
		// m.Data is valid until this function returns.
		fmt.Printf("stream %d SSN %d PPID %d: %q\n", m.StreamID, m.SSN, m.PPID, m.Data)
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	receive := func(ds ...chunk.Data) {
		for _, d := range ds {
			// In the association: d, _, err := chunk.ParseData(c).
			res, err := r.Data(d)
			if err != nil {
				fmt.Println("ABORT:", err) // with err.(*sctp.RecvError).AppendCause
				return
			}
			if res == sctp.RecvInvalidStream {
				fmt.Println("ERROR: Invalid Stream Identifier", d.StreamID)
			}
		}
		r.EndPacket(now)
		sendNow, deadline := r.SACKWhen(now)
		switch {
		case sendNow:
			s, _, _ := chunk.ParseSACK(r.AppendSACK(nil, 1200))
			fmt.Printf("SACK cum %d a_rwnd %d gaps %d\n", s.CumulativeTSNAck, s.ARwnd, s.GapAckBlocks.Len())
		case !deadline.IsZero():
			fmt.Println("delayed SACK due in", deadline.Sub(now))
		}
	}
	whole := chunk.FlagBeginning | chunk.FlagEnding
	receive(chunk.Data{Flags: whole, TSN: 100, StreamID: 0, SSN: 0, PPID: 16, UserData: []byte("first")})
	receive(chunk.Data{Flags: whole, TSN: 103, StreamID: 0, SSN: 2, PPID: 16, UserData: []byte("third")})
	receive(chunk.Data{Flags: chunk.FlagBeginning, TSN: 101, StreamID: 0, SSN: 1, PPID: 16, UserData: []byte("sec")},
		chunk.Data{Flags: chunk.FlagEnding, TSN: 102, StreamID: 0, SSN: 1, PPID: 16, UserData: []byte("ond")})
	// Output:
	// stream 0 SSN 0 PPID 16: "first"
	// delayed SACK due in 25ms
	// SACK cum 100 a_rwnd 1048571 gaps 1
	// stream 0 SSN 1 PPID 16: "second"
	// stream 0 SSN 2 PPID 16: "third"
	// SACK cum 103 a_rwnd 1048576 gaps 0
}
