//go:build !js

package sctpddp

import (
	"net"
	"testing"
)

// The per-peer limits count an IPv4 address, or an IPv6 /64: one IPv6
// host may hold every address of its /64 and would otherwise count as
// 2^64 peers.
func TestPeerIP(t *testing.T) {
	key := func(s string) string { return peerIP(&net.UDPAddr{IP: net.ParseIP(s), Port: 4791}).String() }
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2::1", "2001:db8:1:2::"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::"},
	} {
		if got := key(tc.a); got != tc.b {
			t.Errorf("%s counts as %s, want %s", tc.a, got, tc.b)
		}
	}
	if key("2001:db8:1:2::1") == key("2001:db8:1:3::1") {
		t.Error("two /64s count as one peer")
	}
}
