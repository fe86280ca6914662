package chunk

import "testing"

func TestSACK(t *testing.T) {
	// RFC 9260 §3.3.4's example: TSNs 10, 11, 12, 14, 15 and 17 received,
	// a_rwnd 4660: "Cumulative TSN Ack = 12 ... block #1 start = 2 | block
	// #1 end = 3 ... block #2 start = 5 | block #2 end = 5".
	golden := hexBytes(t, `
		03 00 00 18 # Type 3, flags 0, Length 24
		00 00 00 0c # Cumulative TSN Ack 12
		00 00 12 34 # a_rwnd 4660
		00 02 00 00 # 2 Gap Ack Blocks, 0 Duplicate TSNs
		00 02 00 03 # block #1: 2 to 3 (TSNs 14, 15)
		00 05 00 05 # block #2: 5 to 5 (TSN 17)
	`)
	want := SACK{
		CumulativeTSNAck: 12,
		ARwnd:            4660,
		GapAckBlocks:     GapAckBlocks(nil).AppendBlock(2, 3).AppendBlock(5, 5),
	}
	checkChunk(t, golden, want, ParseSACK)
	if g := want.GapAckBlocks; g.Len() != 2 || g.At(0) != (GapAckBlock{2, 3}) || g.At(1) != (GapAckBlock{5, 5}) {
		t.Errorf("blocks %v %v", g.At(0), g.At(1))
	}

	// "if a receiver were to get the TSN 19 three times, it would list 19
	// twice in the outbound SACK chunk"
	dups := hexBytes(t, `
		03 00 00 1c # Length 28
		00 00 00 13 # Cumulative TSN Ack 19
		00 01 00 00 # a_rwnd 65536
		00 01 00 02 # 1 Gap Ack Block, 2 Duplicate TSNs
		00 02 00 02 # block: 2 to 2
		00 00 00 13 # duplicate 19
		00 00 00 13 # duplicate 19
	`)
	checkChunk(t, dups, SACK{
		CumulativeTSNAck: 19,
		ARwnd:            65536,
		GapAckBlocks:     GapAckBlocks(nil).AppendBlock(2, 2),
		DuplicateTSNs:    TSNList(nil).AppendTSN(19).AppendTSN(19),
	}, ParseSACK)

	checkChunk(t, hexBytes(t, "03000010 00000001 00000002 00000000"), SACK{CumulativeTSNAck: 1, ARwnd: 2}, ParseSACK)
}

func TestSACKCounts(t *testing.T) {
	for name, b := range map[string]string{
		"more blocks than the length holds":   "03000014 00000001 00000002 00020000 00010001",
		"fewer blocks than the length":        "03000018 00000001 00000002 00010000 00010001 00020002",
		"more Duplicate TSNs than the length": "03000014 00000001 00000002 00000002 00000005",
	} {
		_, _, err := ParseSACK(hexBytes(t, b))
		wantErr(t, name, err, ErrLength)
	}
}
