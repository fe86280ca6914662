package chunk

import "testing"

func TestIForwardTSN(t *testing.T) {
	golden := hexBytes(t, `
		c2 00 00 18 # Type 194, Length 24
		00 00 00 63 # New Cumulative TSN 99
		00 04 00 01 # Stream 4, U bit
		00 00 00 0a # MID 10
		00 05 00 00 # Stream 5, ordered
		ff ff ff ff # MID 0xffffffff
	`)
	want := IForwardTSN{NewCumulativeTSN: 99, Streams: IForwardTSNStreams(nil).
		AppendStream(IForwardTSNStream{StreamID: 4, Unordered: true, MID: 10}).
		AppendStream(IForwardTSNStream{StreamID: 5, MID: 0xffffffff})}
	checkChunk(t, golden, want, ParseIForwardTSN)
	if s := want.Streams; s.Len() != 2 || s.At(0) != (IForwardTSNStream{StreamID: 4, Unordered: true, MID: 10}) {
		t.Errorf("entry 0: %v", s.At(0))
	}
	// Reserved bits are ignored on receipt.
	if e := IForwardTSNStreams(hexBytes(t, "0004fffe 00000001")).At(0); e.Unordered {
		t.Error("reserved bits read as U")
	}
	_, _, err := ParseIForwardTSN(hexBytes(t, "c200000c 00000007 00010000"))
	wantErr(t, "half an entry", err, ErrLength)
}
