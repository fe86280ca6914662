package sctpddp

import (
	"bytes"
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// TestBurstsBatchedBeneathDTLS checks that the records of an
// association's bursts leave the Listener's socket several to a system
// call: the run loop corks the socket beneath pion/dtls around them.
func TestBurstsBatchedBeneathDTLS(t *testing.T) {
	srv, cli := pinnedConfigs(t)
	l := listenT(t, srv)
	ctx := testCtx(t)
	accepted := make(chan *Association, 1)
	go func() {
		a, _ := l.Accept(ctx)
		accepted <- a
	}()
	client, err := Dial(ctx, "udp", l.Addr().String(), cli)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	if server == nil {
		t.Fatal("no association accepted")
	}
	defer server.Close()
	if !l.mux.bc.Features().Batch {
		t.Skip("no batching here")
	}
	out, err := server.sctp.OpenStream(1)
	if err != nil {
		t.Fatal(err)
	}
	before := l.mux.bc.Stats()
	const n = 64
	msg := bytes.Repeat([]byte{0x5a}, 64<<10)
	go func() {
		for range n {
			if out.Write(ctx, msg, wire.PPIDSegment) != nil {
				return
			}
		}
	}()
	in := <-client.accepted // the stream, as the association's accept loop took it
	if in == nil {
		t.Fatal("no stream accepted")
	}
	buf := make([]byte, 70<<10)
	for i := range n {
		k, _, err := in.Read(buf)
		if err != nil || !bytes.Equal(buf[:k], msg) {
			t.Fatalf("message %d: %d octets, %v", i, k, err)
		}
	}
	st := l.mux.bc.Stats()
	calls, datagrams := st.SendCalls-before.SendCalls, st.SendDatagrams-before.SendDatagrams
	t.Logf("%d datagrams in %d send calls, %d messages (GSO %v)", datagrams, calls, st.SendMessages-before.SendMessages, l.mux.bc.Features().GSO)
	if datagrams < 2*calls {
		t.Errorf("%d datagrams in %d send calls: the bursts were not batched", datagrams, calls)
	}
}
