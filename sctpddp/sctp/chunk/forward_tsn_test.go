package chunk

import "testing"

func TestForwardTSN(t *testing.T) {
	golden := hexBytes(t, `
		c0 00 00 10 # Type 192, Length 16
		00 00 01 00 # New Cumulative TSN 256
		00 01 00 05 # Stream 1, Stream Sequence 5
		00 03 ff ff # Stream 3, Stream Sequence 65535
	`)
	want := ForwardTSN{NewCumulativeTSN: 256, Streams: ForwardTSNStreams(nil).AppendStream(1, 5).AppendStream(3, 0xffff)}
	checkChunk(t, golden, want, ParseForwardTSN)
	if s := want.Streams; s.Len() != 2 || s.At(1) != (ForwardTSNStream{StreamID: 3, SSN: 0xffff}) {
		t.Errorf("streams %v", s.At(1))
	}
	checkChunk(t, hexBytes(t, "c0000008 00000007"), ForwardTSN{NewCumulativeTSN: 7}, ParseForwardTSN)
	_, _, err := ParseForwardTSN(hexBytes(t, "c000000a 00000007 0001 0000"))
	wantErr(t, "half an entry", err, ErrLength)
}
