package admission

import (
	"errors"
	"testing"
)

// The per-peer limit counts an IPv4 address, or an IPv6 /64, as one
// peer: one IPv6 host, which may hold every address of its /64, cannot
// take a connection per address.
func TestPeerIsIPv6Prefix(t *testing.T) {
	a := New(Limits{MaxConns: 10, MaxConnsPerPeer: 1, MemBudget: 1 << 30})
	for _, tc := range []struct {
		peer string
		ok   bool
	}{
		{"[2001:db8:1:2::1]:4000", true},
		{"[2001:db8:1:2:ffff::9]:4001", false}, // the same /64
		{"[2001:db8:1:3::1]:4002", true},       // another /64
		{"192.0.2.1:4003", true},
		{"[::ffff:192.0.2.1]:4004", false}, // the same IPv4 address
		{"192.0.2.2:4005", true},
	} {
		err := a.Take(tc.peer, 0)
		if ok := err == nil; ok != tc.ok {
			t.Errorf("%s admitted %v, want %v (%v)", tc.peer, ok, tc.ok, err)
		}
		var r *Refusal
		if err != nil && (!errors.As(err, &r) || r.Limit != PeerConns || r.Held != 1) {
			t.Errorf("%s refused with %v", tc.peer, err)
		}
	}
	a.Release("[2001:db8:1:2::1]:4000", 0)
	if err := a.Take("[2001:db8:1:2::7]:4006", 0); err != nil {
		t.Errorf("after its connection was released, the /64 was refused: %v", err)
	}
}

// Each limit refuses with its own Refusal, and what is released is
// admitted again.
func TestLimits(t *testing.T) {
	a := New(Limits{MaxConns: 2, MaxConnsPerPeer: 2, MemBudget: 100})
	if err := a.Take("192.0.2.1:1", 60); err != nil {
		t.Fatal(err)
	}
	var r *Refusal
	if err := a.Take("192.0.2.2:1", 50); !errors.As(err, &r) || r.Limit != Memory || r.Free() != 40 || r.Asked != 50 {
		t.Fatalf("50 octets past a budget with 40 left: %v", err)
	}
	if err := a.Take("192.0.2.2:1", 40); err != nil {
		t.Fatal(err)
	}
	if err := a.Take("192.0.2.3:1", 0); !errors.As(err, &r) || r.Limit != Conns || r.Held != 2 {
		t.Fatalf("a third connection: %v", err)
	}
	if err := a.Grow(1); !errors.As(err, &r) || r.Limit != Memory {
		t.Fatalf("growing past the budget: %v", err)
	}
	a.Release("192.0.2.1:1", 60)
	if err := a.Grow(60); err != nil {
		t.Fatal(err)
	}
	if n, b := a.Usage(); n != 1 || b != 100 {
		t.Fatalf("usage %d connections, %d octets; want 1, 100", n, b)
	}
	a.Shrink(60)
	a.Release("192.0.2.2:1", 40)
	if n, b := a.Usage(); n != 0 || b != 0 {
		t.Fatalf("usage %d connections, %d octets after every release", n, b)
	}
}
