package chunk

import "testing"

func TestIData(t *testing.T) {
	first := hexBytes(t, `
		40 06 00 17 # Type 64, flags U|B, Length 23 (20 + 3)
		00 00 00 01 # TSN 1
		00 02 00 00 # Stream Identifier 2, Reserved
		00 00 00 05 # Message Identifier 5
		00 00 00 10 # B set: PPID 16
		78 79 7a 00 # user data "xyz", padding
	`)
	checkChunk(t, first, IData{
		Flags:    FlagUnordered | FlagBeginning,
		TSN:      1,
		StreamID: 2,
		MID:      5,
		PPID:     16,
		UserData: []byte("xyz"),
	}, ParseIData)

	middle := hexBytes(t, `
		40 00 00 18 # Type 64, no flags: a middle fragment, Length 24
		00 00 00 02 # TSN 2
		00 02 00 00 # Stream Identifier 2, Reserved
		00 00 00 05 # Message Identifier 5
		00 00 00 01 # B clear: FSN 1
		01 02 03 04 # user data
	`)
	checkChunk(t, middle, IData{TSN: 2, StreamID: 2, MID: 5, FSN: 1, UserData: []byte{1, 2, 3, 4}}, ParseIData)

	_, _, err := ParseIData(IData{TSN: 3}.Append(nil))
	wantErr(t, "I-DATA with Length 20", err, ErrNoUserData)
}
