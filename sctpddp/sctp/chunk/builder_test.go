package chunk

import (
	"bytes"
	"testing"
)

func TestBuilder(t *testing.T) {
	buf := make([]byte, 0, 1500)
	var w Builder
	w.Start(buf, 5000, 5001, 0xcafef00d)
	sack := SACK{CumulativeTSNAck: 9, ARwnd: 1 << 20, GapAckBlocks: GapAckBlocks(nil).AppendBlock(2, 2)}
	w.Buf = sack.Append(w.Buf)
	seg := []byte("segment")
	copy(w.ReserveData(Data{Flags: FlagBeginning | FlagEnding, TSN: 10, StreamID: 1, PPID: 16}, len(seg)), seg)
	copy(w.ReserveIData(IData{Flags: FlagBeginning, TSN: 11, PPID: 16}, 2), "hi")
	if w.Len() != HeaderLen+sack.Len()+PaddedLen(DataHeaderLen+len(seg))+PaddedLen(IDataHeaderLen+2) {
		t.Errorf("Len %d", w.Len())
	}
	pkt := w.Finish()
	if &pkt[0] != &buf[:1][0] {
		t.Error("the packet is not in the caller's buffer")
	}
	if err := VerifyChecksum(pkt); err != nil {
		t.Fatal(err)
	}

	want := AppendHeader(nil, 5000, 5001, 0xcafef00d)
	want = sack.Append(want)
	want = Data{Flags: FlagBeginning | FlagEnding, TSN: 10, StreamID: 1, PPID: 16, UserData: seg}.Append(want)
	want = IData{Flags: FlagBeginning, TSN: 11, PPID: 16, UserData: []byte("hi")}.Append(want)
	SetPacketChecksum(want)
	if !bytes.Equal(pkt, want) {
		t.Errorf("built  %x\nwant   %x", pkt, want)
	}

	w.Start(pkt, 1, 2, 3)
	w.Buf = CookieAck{}.Append(w.Buf)
	if z := w.FinishZeroChecksum(); Header(z).Checksum() != 0 || len(z) != 16 {
		t.Errorf("zero checksum packet %x", z)
	}
}
