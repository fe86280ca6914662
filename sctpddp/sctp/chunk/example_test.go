package chunk_test

import (
	"fmt"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// Build a packet of a SACK and a DATA chunk in a reused buffer, then
// receive it.
func Example() {
	buf := make([]byte, 0, 1500)
	var w chunk.Builder
	w.Start(buf, 5000, 5000, 0x1234abcd)
	w.Buf = chunk.SACK{
		CumulativeTSNAck: 41,
		ARwnd:            1 << 20,
		GapAckBlocks:     chunk.GapAckBlocks(nil).AppendBlock(2, 3),
	}.Append(w.Buf)
	seg := []byte("DDP segment")
	copy(w.ReserveData(chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, TSN: 42, StreamID: 1, PPID: 16}, len(seg)), seg)
	pkt := w.Finish()

	if err := chunk.VerifyChecksum(pkt); err != nil {
		fmt.Println(err)
		return
	}
	it := chunk.Chunks(pkt)
	for it.Next() {
		switch c := it.Chunk(); c.Type() {
		case chunk.TypeSACK:
			s, _, _ := chunk.ParseSACK(c)
			fmt.Println("SACK", s.CumulativeTSNAck, s.GapAckBlocks.At(0))
		case chunk.TypeData:
			d, _, _ := chunk.ParseData(c)
			fmt.Printf("DATA TSN %d stream %d %q\n", d.TSN, d.StreamID, d.UserData)
		default:
			fmt.Println("unrecognized:", c.Type().Unrecognized())
		}
	}
	if err := it.Err(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// SACK 41 {2 3}
	// DATA TSN 42 stream 1 "DDP segment"
}
