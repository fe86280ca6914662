package netpeer

import (
	"net"
	"testing"
)

// An IPv4 address is a peer; an IPv6 /64 is one peer, whatever the
// address kind.
func TestOfAddr(t *testing.T) {
	for _, mk := range []func(string) net.Addr{
		func(s string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(s), Port: 4791} },
		func(s string) net.Addr { return &net.UDPAddr{IP: net.ParseIP(s), Port: 4791} },
	} {
		key := func(s string) string { return OfAddr(mk(s)).String() }
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
		if key("192.0.2.1") == key("192.0.2.2") {
			t.Error("two IPv4 addresses count as one peer")
		}
	}
}

// A "host:port" string counts as OfAddr counts its address; a name stands
// for itself.
func TestOfHostPort(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.1:4791", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:4791", "192.0.2.1"},
		{"[2001:db8:1:2::1]:4791", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::9]:1", "2001:db8:1:2::"},
		{"2001:db8:1:2::5", "2001:db8:1:2::"},
		{"192.0.2.7", "192.0.2.7"},
		{"example.net:80", "example.net"},
		{"pipe", "pipe"},
	} {
		if got := OfHostPort(tc.in); got != tc.want {
			t.Errorf("%s counts as %s, want %s", tc.in, got, tc.want)
		}
	}
}
