package iwarp_test

import (
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// TestDialListenPlainUDP checks that Config.SCTP reaches sctpddp as it
// is: sctp:// with sctpddp.Config.InsecurePlainUDP connects over plain
// UDP (an RDMA Write and Read through it), and the option set with a
// pre-shared key is refused as a configuration error.
func TestDialListenPlainUDP(t *testing.T) {
	plain := func() *sctpddp.Config { return &sctpddp.Config{InsecurePlainUDP: true, MTU: sctpddp.LoopbackMTU} }
	l, err := iwarp.Listen(ctxT(t), "sctp://127.0.0.1:0", &iwarp.Config{SCTP: plain()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv, cli := newSide(t), newSide(t)
	region, _ := srv.pd.RegisterMemory(make([]byte, 4096), 0, rdmap.RemoteWrite|rdmap.RemoteRead)
	accepted := make(chan *iwarp.Conn, 1)
	go func() {
		r, err := l.Accept(ctxT(t))
		if err != nil {
			close(accepted)
			return
		}
		c, _ := r.Accept(ctxT(t), srv.qp, region.Remote().Append(nil))
		accepted <- c
	}()
	c, err := iwarp.Dial(ctxT(t), l.URL(), cli.qp, &iwarp.Config{SCTP: plain()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := <-accepted
	if sc == nil {
		t.Fatal("Accept failed")
	}
	defer sc.Close()
	rb, _, err := rdmap.ParseRemoteBuffer(c.PeerPrivateData())
	if err != nil {
		t.Fatal(err)
	}
	writeReadBack(t, cli, rb, 0, "placed over plain UDP")

	both := plain()
	both.PSK, both.PSKIdentity = []byte("k"), []byte("i")
	_, err = iwarp.Listen(ctxT(t), "sctp://127.0.0.1:0", &iwarp.Config{SCTP: both})
	if !errors.Is(err, iwarp.ErrConfig) || !errors.Is(err, sctpddp.ErrPlainUDPWithAuth) {
		t.Errorf("Listen with InsecurePlainUDP and a PSK: %v", err)
	}
}
