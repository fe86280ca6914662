package rdmap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

// An RDMA Read Response may write only the Data Sink buffer its Read
// Request named, not the rest of the region that buffer lies in: "An
// RNIC MUST ensure that a Remote Peer is not able to access memory
// outside of the buffer specified" (RFC 5040 §8.1.1 item 3); the region
// has local rights only. A Response past the 10 octets asked for, or
// before them, gets DDP's "Base or bounds violation" and places nothing;
// one inside them completes the Read.
func TestReadResponseStaysInSink(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   uint64
		n    int
		want *term.Error
	}{
		{"past the sink", 60, 40, term.DDPBaseBounds},
		{"overlapping its end", 25, 10, term.DDPBaseBounds},
		{"before the sink", 10, 10, term.DDPBaseBounds},
		{"the sink itself", 20, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrafted(t)
			sink := c.reg(t, 100, LocalWrite)
			mustPost(t, c.qp.PostRead(ReadWR{ID: 7, Local: SGE{MR: sink, Offset: 20, Length: 10}, RemoteSTag: 0x1234}))
			c.peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), sink.STag(), sink.Base()+tc.to, bytes.Repeat([]byte{0xab}, tc.n)))
			if tc.want == nil {
				if got := wait(t, c.scq); got.WRID != 7 || got.Status != StatusSuccess || !bytes.Equal(sink.Bytes()[20:30], bytes.Repeat([]byte{0xab}, 10)) {
					t.Fatalf("%+v", got)
				}
				return
			}
			if _, th := c.peer.terminate(t); !errors.Is(th.Err(), tc.want) {
				t.Fatalf("Terminate %v, want %v", th.Err(), tc.want)
			}
			if !bytes.Equal(sink.Bytes(), make([]byte, 100)) {
				t.Fatal("the Response was placed")
			}
		})
	}
}
