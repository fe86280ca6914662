//go:build !js

package sctpddp

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
)

// "The adaptation MUST initialize all of its SCTP associations with the
// same number of inbound and outbound streams." (RFC 5043 §8) Read off
// the wire: the dialer's INIT and the Listener's INIT ACK each offer as
// many outbound streams as they allow inbound (RFC 4960 §3.3.2, §3.3.3:
// Number of Outbound Streams and Number of Inbound Streams follow the
// Initiate Tag and the a_rwnd).
func TestSameInboundAndOutboundStreams(t *testing.T) {
	type offer struct{ os, mis uint16 }
	var mu sync.Mutex
	seen := map[byte][]offer{} // chunk type (1 INIT, 2 INIT ACK) -> offers sent
	trace := func(_ net.Addr, outbound bool, p []byte) {
		if !outbound {
			return
		}
		for off := 12; off+4 <= len(p); {
			typ := p[off]
			l := int(binary.BigEndian.Uint16(p[off+2:]))
			if l < 4 || off+l > len(p) {
				return
			}
			if (typ == 1 || typ == 2) && l >= 20 {
				mu.Lock()
				seen[typ] = append(seen[typ], offer{binary.BigEndian.Uint16(p[off+12:]), binary.BigEndian.Uint16(p[off+14:])})
				mu.Unlock()
			}
			off += (l + 3) &^ 3
		}
	}
	srv, cli := pinnedConfigs(t)
	srv.Trace, cli.Trace = trace, trace
	connect(t, srv, cli)
	mu.Lock()
	defer mu.Unlock()
	for typ, name := range map[byte]string{1: "INIT", 2: "INIT ACK"} {
		if len(seen[typ]) == 0 {
			t.Errorf("no %s was sent", name)
		}
		for _, o := range seen[typ] {
			if o.os != o.mis || o.os == 0 {
				t.Errorf("%s offers %d outbound and %d inbound streams", name, o.os, o.mis)
			}
		}
	}
	t.Logf("INIT %v, INIT ACK %v", seen[1], seen[2])
}
