package perf

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/fdlimit"
)

// The raw TCP listener's accept failing for want of a file descriptor
// (EMFILE) does not stop it: once descriptors are free again it serves
// the next connection (here: reads its header and, the token being no
// perf connection's, closes it). Not parallel: the limit is the
// process's.
func TestPerfRawListenerSurvivesFDExhaustion(t *testing.T) {
	ts := startServer(t, "tcp", Limits{HelloTimeout: time.Second})
	fdlimit.FailAccept(t, ts.raw.(*net.TCPAddr), 200*time.Millisecond)
	c, err := net.Dial("tcp", ts.raw.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := RawHeader{Mode: RawToClient, Size: 1 << 20, Count: 1}
	c.Write(h.Append(nil))
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the raw listener did not serve after accept failed: %v", err)
	}
}
