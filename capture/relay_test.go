package capture

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Relay passes both directions through, hands each to the trace in
// order, half-closes as the ends do, and calls done once both have ended.
func TestRelay(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		c, err := echo.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c) // until the client's half-close
		c.Close()
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fromClient, toClient bytes.Buffer
	ended := make(chan struct{})
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Relay(context.Background(), ln, echo.Addr().String(), func(c, d net.Conn) (func(bool, []byte), func()) {
			if d.RemoteAddr().String() != echo.Addr().String() {
				t.Errorf("inner connection to %v", d.RemoteAddr())
			}
			return func(client bool, b []byte) {
				mu.Lock()
				defer mu.Unlock()
				if client {
					fromClient.Write(b)
				} else {
					toClient.Write(b)
				}
			}, func() { close(ended) }
		})
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("relayed "), 20000)
	go func() {
		c.Write(msg)
		c.(*net.TCPConn).CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echoed %d octets (%v), want %d", len(got), err, len(msg))
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("done was not called after both directions ended")
	}
	mu.Lock()
	if !bytes.Equal(fromClient.Bytes(), msg) || !bytes.Equal(toClient.Bytes(), msg) {
		t.Errorf("traced %d octets from the client and %d to it, want %d each", fromClient.Len(), toClient.Len(), len(msg))
	}
	mu.Unlock()
	c.Close()
	ln.Close()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Relay did not return when its listener closed")
	}
}
