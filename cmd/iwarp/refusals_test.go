package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The refusals reported pass in a burst, then at a rate; those held back
// are counted before the next one reported and when the listener stops.
func TestRefusalsBounded(t *testing.T) {
	var out []string
	r := newRefusals(func(peer, why string) { out = append(out, peer) },
		func(n int) { out = append(out, fmt.Sprintf("+%d", n)) })
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	for i := range refusalBurst + 2 {
		r.report(fmt.Sprint(i), "limit")
	}
	if len(out) != refusalBurst || out[refusalBurst-1] != fmt.Sprint(refusalBurst-1) {
		t.Fatalf("%d lines after %d refusals at once, want the first %d", len(out), refusalBurst+2, refusalBurst)
	}
	out = nil
	now = now.Add(time.Second / refusalRate)
	r.report("a", "limit")
	r.report("b", "limit")
	if got := strings.Join(out, " "); got != "+2 a" {
		t.Fatalf("a rate's interval later: %q, want the two held back counted, then a", got)
	}
	out = nil
	r.close()
	if got := strings.Join(out, " "); got != "+1" {
		t.Fatalf("close: %q, want +1 (b)", got)
	}
	// The burst comes back after a quiet spell, and no further.
	out = nil
	now = now.Add(time.Hour)
	for i := range 2 * refusalBurst {
		r.report(fmt.Sprint(i), "limit")
	}
	if len(out) != refusalBurst {
		t.Fatalf("%d lines after an hour's quiet, want %d", len(out), refusalBurst)
	}
	out = nil
	r.close()
	if got := strings.Join(out, " "); got != fmt.Sprintf("+%d", refusalBurst) {
		t.Fatalf("close: %q, want +%d", got, refusalBurst)
	}
}
