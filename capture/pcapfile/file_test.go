package pcapfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// readAll reads every packet of the file as it is now; err is the
// reader's error other than io.EOF.
func readAll(t *testing.T, path string) (n int, err error) {
	t.Helper()
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	for {
		if _, err := r.Next(); err != nil {
			if err == io.EOF {
				err = nil
			}
			return n, err
		}
		n++
	}
}

// A File is readable from its creation on, holds each packet within
// FlushDelay, at once when FlushSize octets wait, and only whole records.
func TestPcapFileWrittenAsPacketsCome(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.pcap")
	f, err := CreateFile(path, LinkRaw)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := readAll(t, path); n != 0 || err != nil {
		t.Fatalf("a new file: %d packets, %v", n, err)
	}
	now := time.Now()
	if err := f.WritePacket(now, []byte{0x45, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 5*time.Second, func() bool {
		n, err := readAll(t, path)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}, "the packet did not reach the file")
	// Three records of a third of FlushSize: the third goes out at once,
	// with the two before it; the file ends with a whole record.
	big := make([]byte, FlushSize/3)
	for range 3 {
		if err := f.WritePacket(now, big); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(t, path); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := readAll(t, path); n != 4 || err != nil {
		t.Fatalf("after FlushSize octets: %d packets in the file, %v", n, err)
	}
	if err := f.WritePacket(now, big[:10]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := readAll(t, path); n != 5 || err != nil {
		t.Fatalf("closed: %d packets, %v", n, err)
	}
	if err := f.WritePacket(now, big); err == nil {
		t.Error("WritePacket after Close")
	}
	if err := f.Close(); err == nil {
		t.Error("Close twice")
	}
}
