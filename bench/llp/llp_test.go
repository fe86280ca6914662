package llp

import (
	"context"
	"testing"
	"time"
)

// TestTransports moves 4 batches over every transport in one process and
// checks that the receiver verified every byte.
func TestTransports(t *testing.T) {
	sec, err := NewSecurity()
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range append(All(), Extra()...) {
		t.Run(tr.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			got, err := Transfer(ctx, tr, sec, 4*Batch)
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Lossy {
				if got.Verified != got.Sent {
					t.Fatalf("verified %d of %d bytes", got.Verified, got.Sent)
				}
			} else if got.Verified == 0 {
				t.Fatal("nothing verified")
			}
		})
	}
}

func TestCheckUnit(t *testing.T) {
	var c Counter
	b := make([]byte, 64)
	Fill(b, 128)
	if err := c.CheckUnit(b, 64); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckUnit(b, 64); err != nil || c.Dups() != 1 || c.Bytes() != 64 {
		t.Fatalf("dup: %v, %d dups, %d bytes", err, c.Dups(), c.Bytes())
	}
	b[9] ^= 1
	if err := c.CheckUnit(b, 64); err == nil {
		t.Fatal("a flipped bit passed")
	}
	Fill(b, 96)
	if err := c.CheckUnit(b, 64); err == nil {
		t.Fatal("a misaligned unit passed")
	}
	if err := Check(make([]byte, 64), 0); err == nil {
		t.Fatal("zeros passed")
	}
}
