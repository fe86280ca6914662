//go:build !js

package sctpddp

import (
	"context"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

// Atomic Operations over DDP over SCTP from several DDP Stream Sessions,
// on two associations, to one counter and one lock word of one responder
// device (RFC 7306 §5.3: atomicity across the RDMAP Streams of an RNIC):
// every FetchAdd sees a different original value, the counter ends at
// the total, and no update made under the lock is lost.
func TestAtomicConcurrentSCTP(t *testing.T) {
	checkGoroutines(t)
	const assocs, sessions, adds, window, locks = 2, 3, 300, 8, 30
	dev, pd, shared := rdmaptest.AtomicTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var responders []*rdmap.QueuePair
	var requesters []*peer
	for range assocs {
		srv, cli := pinnedConfigs(t)
		server, client := connect(t, srv, cli)
		sa := server.Sessions(0)
		for range sessions {
			cq := dev.NewCompletionQueue(64)
			resp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
			if err != nil {
				t.Fatal(err)
			}
			responders = append(responders, resp)
			accepted := make(chan error, 1)
			go func() {
				r, err := sa.Accept(ctx)
				if err == nil {
					_, err = r.Accept(resp, SessionConfig{})
				}
				accepted <- err
			}()
			a := rdmaptest.NewPeer(t, rdmap.QPConfig{})
			if _, err := client.Connect(ctx, a.QP, SessionConfig{}); err != nil {
				t.Fatal(err)
			}
			if err := <-accepted; err != nil {
				t.Fatal(err)
			}
			requesters = append(requesters, a)
		}
	}
	rdmaptest.RunAtomics(t, ctx, requesters, shared, func() { rdmaptest.CloseAll(responders) }, adds, window, locks)
	t.Logf("%d DDP Stream Sessions on %d associations: %d FetchAdds, %d locked updates", len(requesters), assocs, len(requesters)*adds, len(requesters)*locks)
}
