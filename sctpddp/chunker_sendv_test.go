package sctpddp

import (
	"bytes"
	"context"
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// TestChunkerSendv checks that a Chunker with Sendv hands the transport
// a DDP Segment Chunk's slices that gather into what Send would have
// received, with the DDP-SSNs in order, allocating nothing per segment
// and keeping no reference to the payload afterwards.
func TestChunkerSendv(t *testing.T) {
	var got []byte
	var ppids []wire.PPID
	c := NewChunker(ChunkerConfig{
		MULPDU:         wire.MaxDataChannelMULPDU,
		SendQueueLimit: MaxSendQueueLimit,
		Send:           func(context.Context, []byte, wire.PPID) error { t.Fatal("Send called beside Sendv"); return nil },
		Sendv: func(_ context.Context, parts [][]byte, ppid wire.PPID) error {
			got = got[:0]
			for _, p := range parts {
				got = append(got, p...)
			}
			ppids = append(ppids[:0], ppid)
			return nil
		},
		Buffered: func() uint64 { return 0 },
		Err:      func() error { return ErrChannelClosed },
	})
	hdr := []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}
	payload := [][]byte{bytes.Repeat([]byte{7}, 4096), bytes.Repeat([]byte{9}, 100)}
	ctx := context.Background()
	for i := range 3 {
		ssn, err := c.WriteSegmentv(ctx, hdr, payload)
		if err != nil {
			t.Fatal(err)
		}
		want := wire.AppendSegmentv(nil, wire.SSN(i), hdr, payload)
		if ssn != wire.SSN(i) || !bytes.Equal(got, want) || ppids[0] != wire.PPIDSegment {
			t.Fatalf("segment %d: DDP-SSN %d, %d octets, PPID %v", i, ssn, len(got), ppids[0])
		}
	}
	for _, p := range c.parts[:cap(c.parts)] {
		if p != nil {
			t.Fatal("the Chunker keeps a slice of a sent segment")
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.WriteSegmentv(ctx, hdr, payload); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per segment", n)
	}
}
