package chunk

import (
	"bytes"
	"testing"
)

// dataPacket builds a packet of a SACK and n DATA chunks of size bytes of
// user data each.
func dataPacket(buf []byte, n, size int) []byte {
	var w Builder
	w.Start(buf, 5000, 5000, 0x11223344)
	w.Buf = SACK{CumulativeTSNAck: 99, ARwnd: 1 << 20,
		GapAckBlocks:  GapAckBlocks{0, 2, 0, 3, 0, 5, 0, 9},
		DuplicateTSNs: TSNList{0, 0, 0, 0x60}}.Append(w.Buf)
	for i := range n {
		clear(w.ReserveData(Data{Flags: FlagBeginning | FlagEnding, TSN: 100 + uint32(i), StreamID: 1, SSN: uint16(i), PPID: 16}, size))
	}
	return w.Finish()
}

// receive is what the association does with a packet of DATA and SACK
// chunks: verify, iterate, parse, read every field.
func receive(pkt []byte) (sum uint64, err error) {
	if err := VerifyChecksum(pkt); err != nil {
		return 0, err
	}
	it := Chunks(pkt)
	for it.Next() {
		switch c := it.Chunk(); c.Type() {
		case TypeData:
			d, _, err := ParseData(c)
			if err != nil {
				return 0, err
			}
			sum += uint64(d.TSN) + uint64(len(d.UserData))
		case TypeSACK:
			s, _, err := ParseSACK(c)
			if err != nil {
				return 0, err
			}
			for i := range s.GapAckBlocks.Len() {
				b := s.GapAckBlocks.At(i)
				sum += uint64(b.Start) + uint64(b.End)
			}
			for i := range s.DuplicateTSNs.Len() {
				sum += uint64(s.DuplicateTSNs.At(i))
			}
		}
	}
	return sum, it.Err()
}

func TestParseAllocs(t *testing.T) {
	pkt := dataPacket(nil, 4, 256)
	if _, err := receive(pkt); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = receive(pkt) }); n != 0 {
		t.Errorf("parsing a DATA/SACK packet: %v allocations", n)
	}
}

func TestBuildAllocs(t *testing.T) {
	buf := make([]byte, 0, 1500)
	payload := bytes.Repeat([]byte{0xab}, 256)
	blocks := GapAckBlocks(make([]byte, 0, 64))
	dups := TSNList(make([]byte, 0, 16))
	var w Builder
	build := func() {
		w.Start(buf, 5000, 5000, 0x11223344)
		blocks = blocks[:0].AppendBlock(2, 3).AppendBlock(5, 5)
		dups = dups[:0].AppendTSN(7)
		w.Buf = SACK{CumulativeTSNAck: 1, ARwnd: 1 << 20, GapAckBlocks: blocks, DuplicateTSNs: dups}.Append(w.Buf)
		for i := range 4 {
			copy(w.ReserveData(Data{Flags: FlagBeginning | FlagEnding, TSN: uint32(i), StreamID: 1, PPID: 16}, len(payload)), payload)
		}
		w.Buf = Data{Flags: FlagBeginning | FlagEnding, TSN: 5, StreamID: 1, PPID: 16, UserData: payload[:10]}.Append(w.Buf)
		w.Finish()
	}
	build()
	if n := testing.AllocsPerRun(100, build); n != 0 {
		t.Errorf("building a DATA/SACK packet into a reused buffer: %v allocations", n)
	}
	if _, err := receive(w.Buf); err != nil {
		t.Error(err)
	}
}
