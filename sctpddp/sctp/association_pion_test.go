package sctp

import (
	"bytes"
	"context"
	"testing"
	"time"

	pion "github.com/pion/sctp"
)

// TestInteropPionClient has a pion/sctp client associate over UDP with
// this package's Server and exchange messages both ways.
func TestInteropPionClient(t *testing.T) {
	c, s := udpPair(t)
	type res struct {
		a   *pion.Association
		err error
	}
	ch := make(chan res, 1)
	go func() {
		a, err := pion.ClientWithOptions(pion.WithNetConn(c), pion.WithLoggerFactory(pionLogger()))
		ch <- res{a, err}
	}()
	ours, err := Server(s, Config{HandshakeTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("Server: %v", err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("pion Client: %v", r.err)
	}
	st, err := r.a.OpenStream(1, pion.PayloadTypeWebRTCBinary)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	buf := make([]byte, 1<<17)
	var in *Stream
	for i := range 20 {
		m := testMsg(3, i, 16<<10)
		if _, err := st.Write(m); err != nil {
			t.Fatal(err)
		}
		if in == nil {
			if in, err = ours.AcceptStream(ctx); err != nil {
				t.Fatal(err)
			}
			if in.ID() != 1 {
				t.Fatalf("AcceptStream: stream %d, want 1", in.ID())
			}
		}
		n, ppid, _, err := in.ReadMessage(ctx, buf)
		if err != nil || ppid != uint32(pion.PayloadTypeWebRTCBinary) || !bytes.Equal(buf[:n], m) {
			t.Fatalf("message %d from pion: %v, PPID %d, equal %v", i, err, ppid, bytes.Equal(buf[:n], m))
		}
	}
	ours.Abort()
	r.a.Close()
}

// TestInteropPionServer has this package's Client associate over UDP
// with a pion/sctp server and send it messages on several streams.
func TestInteropPionServer(t *testing.T) {
	c, s := udpPair(t)
	type res struct {
		a   *pion.Association
		err error
	}
	ch := make(chan res, 1)
	go func() {
		a, err := pion.ServerWithOptions(pion.WithNetConn(s), pion.WithLoggerFactory(pionLogger()))
		ch <- res{a, err}
	}()
	ours, err := Client(c, Config{HandshakeTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("pion Server: %v", r.err)
	}
	buf := make([]byte, 1<<17)
	for i := range 20 {
		m := testMsg(4, i, 16<<10)
		if err := ours.SendMessage(2, uint32(pion.PayloadTypeWebRTCBinary), false, [][]byte{m}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			st, err := r.a.AcceptStream()
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			st.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := st.Read(buf)
			if err != nil || !bytes.Equal(buf[:n], m) {
				t.Fatalf("message %d at pion: %v", i, err)
			}
			for j := 1; j < 20; j++ {
				m := testMsg(4, j, 16<<10)
				if err := ours.SendMessage(2, uint32(pion.PayloadTypeWebRTCBinary), false, [][]byte{m}); err != nil {
					t.Fatal(err)
				}
				n, err := st.Read(buf)
				if err != nil || !bytes.Equal(buf[:n], m) {
					t.Fatalf("message %d at pion: %v", j, err)
				}
			}
			break
		}
	}
	ours.Abort()
	r.a.Close()
}
