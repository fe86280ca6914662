package chunk

import "testing"

func TestHeartbeat(t *testing.T) {
	golden := hexBytes(t, `
		04 00 00 11 # Type 4, Length 17
		00 01 00 0d # Heartbeat Info, HB Info Length 13
		01 02 03 04 05 06 07 08 09 # 9 bytes of Sender-Specific Heartbeat Info
		00 00 00    # padding
	`)
	checkChunk(t, golden, Heartbeat{Info: golden[8:17]}, ParseHeartbeat)

	// The Heartbeat Info's padding may be counted in the Chunk Length.
	padded := append([]byte{}, golden...)
	padded[3] = 0x14
	if h, n, err := ParseHeartbeat(padded); err != nil || n != 20 || len(h.Info) != 9 {
		t.Errorf("padding counted: %v %d %v", h, n, err)
	}

	for name, b := range map[string]string{
		"no Heartbeat Info":        "04000004",
		"other parameter":          "04000008 00020004",
		"Info past the chunk":      "0400000c 0001000c 00000000",
		"bytes after Info":         "04000010 00010008 00000000 00000000",
		"Info of 3 bytes (length)": "04000008 00010003",
	} {
		if _, _, err := ParseHeartbeat(hexBytes(t, b)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
