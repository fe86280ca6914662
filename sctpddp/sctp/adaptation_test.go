package sctp

import (
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// RFC 5043 §7.1: "The local interface MUST allow the ULP to specify an
// SCTP endpoint to use a specific Adaptation Indication."
// HandshakeConfig.AdaptationCodePoint is that interface: the INIT ACK
// carries the code point configured, DDP's when none is.
func TestAdaptationCodePointConfigured(t *testing.T) {
	keys := testKeys(t)
	for _, tc := range []struct{ set, want uint32 }{{0, chunk.AdaptationCodePointDDP}, {7, 7}} {
		cfg := testConfig()
		cfg.AdaptationCodePoint = tc.set
		res, err := HandleInit(nil, initPacket(peerInit()), &cfg, &keys, testRand(7, 64), testNow)
		if err != nil {
			t.Fatal(err)
		}
		_, ia := parseInitAck(t, res.Packet)
		found := false
		for _, p := range paramsOf(t, ia.Params) {
			if p.Type() == chunk.ParamAdaptationLayerIndication {
				found = true
				if got := be32(p.Value()); got != tc.want {
					t.Errorf("AdaptationCodePoint %d: INIT ACK announces %d, want %d", tc.set, got, tc.want)
				}
			}
		}
		if !found {
			t.Errorf("AdaptationCodePoint %d: no Adaptation Layer Indication", tc.set)
		}
	}
}
