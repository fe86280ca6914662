package rdmap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// A Read Request delivered while the responder's send route is busy waits
// for it; if the ULP revokes the Data Source STag meanwhile, the memory is
// the ULP's again and its Response must not read it. The Response is not
// sent: an error "detected while creating" a message gets "the Terminate
// Message and Error code ... instead of the request", with no Terminated
// DDP or RDMA Header (RFC 5040 §7.1 item 1), Invalid STag.
func TestReadResponseAfterRevoke(t *testing.T) {
	c := newCrafted(t)
	release := holdSend(t, c.qp)
	c.peer.send(t, rrSeg(1, ReadRequest{SinkSTag: 0x5555, SinkTO: 0, RDMARDSZ: 16, SrcSTag: c.src.STag(), SrcTO: 0x1000}))
	waitQueued(t, c.qp, 1)
	if err := c.pd.Invalidate(c.src.STag()); err != nil {
		t.Fatal(err)
	}
	copy(c.src.Bytes(), "the ULP's secret")
	release()
	_, th := c.peer.terminate(t)
	if !errors.Is(th.Err(), term.RDMAPInvalidSTag) || th.M || th.D || th.R {
		t.Fatalf("Terminate %+v", th)
	}
	for _, s := range c.peer.segsFrom(t, 1) {
		if h, hl, err := ddp.ParseHeader(s); err == nil && Control(h.RsvdULP[0]).Opcode() == OpReadResponse {
			t.Fatalf("a Read Response went out: % x", s[hl:])
		}
		if bytes.Contains(s, []byte("secret")) {
			t.Fatal("the revoked memory went out")
		}
	}
}
