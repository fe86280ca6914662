package wire

import "testing"

func TestSSNLess(t *testing.T) {
	tests := []struct {
		a, b SSN
		want bool
	}{
		{0, 1, true},
		{1, 0, false},
		{5, 5, false},
		{0, 32767, true},
		{32767, 0, false},
		{0, 32768, false}, // undefined distance: neither is less
		{32768, 0, false},
		{65535, 0, true}, // wrap-around
		{0, 65535, false},
		{65530, 10, true},
		{10, 65530, false},
		{40000, 7231, true},  // 7231-40000 mod 2^16 = 32767
		{40000, 7233, false}, // 7233-40000 mod 2^16 = 32769
	}
	for _, tt := range tests {
		if got := tt.a.Less(tt.b); got != tt.want {
			t.Errorf("SSN(%d).Less(%d) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSSNLessIsStrictOrderWithinHalfRange(t *testing.T) {
	// For every base and every distance 1..32767, base < base+d and not the
	// reverse, including across the wrap.
	for _, base := range []SSN{0, 1, 32767, 32768, 65000, 65535} {
		for d := 1; d <= 32767; d += 97 {
			b := base + SSN(d)
			if !base.Less(b) || b.Less(base) {
				t.Fatalf("base %d, distance %d: order wrong", base, d)
			}
		}
	}
}

func TestSSNNextWraps(t *testing.T) {
	if got := SSN(65535).Next(); got != 0 {
		t.Fatalf("65535.Next() = %d, want 0", got)
	}
	if got := SSN(41).Next(); got != 42 {
		t.Fatalf("41.Next() = %d", got)
	}
}

func TestSSNDistance(t *testing.T) {
	if d := SSN(65534).Distance(3); d != 5 {
		t.Fatalf("Distance across wrap = %d, want 5", d)
	}
	if d := SSN(3).Distance(3); d != 0 {
		t.Fatalf("Distance to self = %d", d)
	}
}

func TestSSNInWindow(t *testing.T) {
	tests := []struct {
		s, next SSN
		want    bool
	}{
		{0, 0, true},
		{32766, 0, true},  // the last chunk a sender can have in flight
		{32767, 0, false}, // one more than MaxInFlight can explain
		{65535, 0, false}, // before next: a duplicate
		{10, 65530, true}, // wrap: 16 after next
		{65529, 65530, false},
		{(65530 + 32766) % 65536, 65530, true},
		{(65530 + 32767) % 65536, 65530, false},
	}
	for _, tt := range tests {
		if got := tt.s.InWindow(tt.next); got != tt.want {
			t.Errorf("SSN(%d).InWindow(%d) = %v, want %v", tt.s, tt.next, got, tt.want)
		}
	}
}

func TestCanSend(t *testing.T) {
	if !CanSend(7, 7) {
		t.Error("nothing in flight: must be able to send")
	}
	if !CanSend(32766, 0) {
		t.Error("32766 in flight: the 32767th must be allowed")
	}
	if CanSend(32767, 0) {
		t.Error("32767 in flight: the 32768th must wait")
	}
	if !CanSend(100, 65000) || CanSend((65000+32767)%65536, 65000) {
		t.Error("wrong across the wrap")
	}
	// CanSend and InWindow agree: whatever a sender may send, a receiver
	// whose next expected DDP-SSN is the sender's oldest unacknowledged one
	// accepts.
	for _, oldest := range []SSN{0, 12345, 65535} {
		for d := 0; d < 65536; d += 251 {
			next := oldest + SSN(d)
			if CanSend(next, oldest) != next.InWindow(oldest) {
				t.Fatalf("oldest %d next %d: CanSend and InWindow disagree", oldest, next)
			}
		}
	}
}
