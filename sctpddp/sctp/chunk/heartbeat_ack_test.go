package chunk

import "testing"

func TestHeartbeatAck(t *testing.T) {
	golden := hexBytes(t, `
		05 00 00 10 # Type 5, Length 16
		00 01 00 0c # Heartbeat Info, HB Info Length 12
		de ad be ef 00 00 00 01 # the info echoed from the HEARTBEAT
	`)
	checkChunk(t, golden, HeartbeatAck{Info: golden[8:]}, ParseHeartbeatAck)

	hb := Heartbeat{Info: []byte("nonce-64")}
	ack, _, err := ParseHeartbeatAck(HeartbeatAck(hb).Append(nil))
	if err != nil || string(ack.Info) != "nonce-64" {
		t.Errorf("echo: %q %v", ack.Info, err)
	}
}
