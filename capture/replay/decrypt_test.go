package replay

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecryptDTLS replays two DDP/SCTP/DTLS sessions of iwarp perf with
// their key logs: a PSK session (AES-128-CBC with HMAC-SHA256) of three
// Sends, and a certificate one (AES-128-GCM) of two 3,000-octet Writes.
func TestDecryptDTLS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       string
		ops      int
		delivery int
	}{
		{"dtls-psk", "Send", 9, 9},
		{"dtls-cert", "RDMA Write", 2, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, k := readTestdata(t, tc.name+".pcapng"), readTestdata(t, tc.name+".keylog")
			if _, _, err := Decode(c); err == nil || !strings.Contains(err.Error(), "key log") {
				t.Fatalf("without the key log: %v", err)
			}
			m, warn, err := DecodeKeyLog(c, k)
			if err != nil || !strings.Contains(warn, "DTLS records decrypted") {
				t.Fatal(err, warn)
			}
			checkModel(t, m)
			ops := 0
			for _, e := range m.Events {
				if e.Kind == EventSegment && e.Rec.Op == tc.op {
					ops++
				}
			}
			c0 := m.Conns[0]
			if ops != tc.ops || m.Delivered != tc.delivery || m.Errors != 0 || c0.Transport != "sctp" || c0.Initiator == c0.Responder {
				t.Errorf("%d %s, %d delivered, %d errors, conn %+v", ops, tc.op, m.Delivered, m.Errors, c0)
			}
		})
	}
	c, k := readTestdata(t, "dtls-cert.pcapng"), readTestdata(t, "dtls-cert.keylog")
	// A secret off by one bit: the records fail their authentication.
	bad := bytes.Clone(k)
	bad[len(bad)-2] ^= 1
	if _, _, err := DecodeKeyLog(c, bad); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("a wrong secret: %v", err)
	}
	// The other session's key log holds no secret for this one.
	if _, _, err := DecodeKeyLog(c, readTestdata(t, "dtls-psk.keylog")); err == nil || !strings.Contains(err.Error(), "no secret") {
		t.Errorf("another session's key log: %v", err)
	}
	if _, _, err := DecodeKeyLog(c, []byte("not a key log\n")); err == nil || !strings.Contains(err.Error(), "CLIENT_RANDOM") {
		t.Errorf("not a key log: %v", err)
	}
	// A capture in the clear ignores the key log.
	clear, err := os.ReadFile(filepath.Join(captures, "rping-sctp.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if m, warn, err := DecodeKeyLog(clear, k); err != nil || warn != "" || m.Segments != 14 {
		t.Errorf("in the clear: %v %q", err, warn)
	}
}

func FuzzDecryptDTLS(f *testing.F) {
	c, err := os.ReadFile(filepath.Join("testdata", "dtls-psk.pcapng"))
	if err != nil {
		f.Fatal(err)
	}
	k, err := os.ReadFile(filepath.Join("testdata", "dtls-psk.keylog"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(c)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, n, err := DecryptDTLS(b, k)
		if err != nil {
			return
		}
		if n == 0 {
			t.Fatal("no records and no error")
		}
		if m, _, err := Decode(out); err == nil {
			checkModel(t, m)
		}
	})
}
