package sctp

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// countingReader is a random source that allocates nothing: bytes
// counting up.
type countingReader struct{ next byte }

func (r *countingReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = r.next
		r.next++
	}
	return len(b), nil
}

// TestHandshakeAllocs checks that answering an INIT and a COOKIE ECHO
// allocates nothing once dst holds the reply: a flood of either costs the
// passive side time, not memory.
func TestHandshakeAllocs(t *testing.T) {
	keys := testKeys(t)
	cfg := testConfig()
	cfg.ZeroChecksum = true
	pkt := initPacket(peerInit(aliDDP, zca, param(0xC042, 1), chunk.CookiePreservative{LifeSpanIncrement: 10}.Append(nil)))
	dst := make([]byte, 0, 2048)
	r := &countingReader{next: 1}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := HandleInit(dst, pkt, &cfg, &keys, r, testNow); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("HandleInit: %v allocations", n)
	}
	res, _ := HandleInit(nil, pkt, &cfg, &keys, r, testNow)
	echo := cookieEchoFor(t, res.Packet)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := HandleCookieEcho(dst, echo, &keys, testNow); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("HandleCookieEcho: %v allocations", n)
	}
	forged := withTag(echo, 1)
	forged[len(forged)-1] ^= 1
	if n := testing.AllocsPerRun(100, func() {
		OpenCookie(forged[chunk.HeaderLen+4:], &keys, testNow)
	}); n != 0 {
		t.Errorf("OpenCookie of a forged cookie: %v allocations", n)
	}
}

// TestCookieMAC checks the State Cookie's MAC against crypto/hmac.
func TestCookieMAC(t *testing.T) {
	r := &countingReader{next: 3}
	for i := range 50 {
		var key [CookieKeyLen]byte
		body := make([]byte, cookieBodyLen)
		r.Read(key[:])
		r.Read(body)
		body[i%cookieBodyLen] ^= byte(i)
		m := hmac.New(sha256.New, key[:])
		m.Write(body)
		if got := cookieMAC(&key, body); !hmac.Equal(got[:], m.Sum(nil)) {
			t.Fatalf("cookieMAC %x, crypto/hmac %x", got, m.Sum(nil))
		}
	}
}

// BenchmarkHandshake measures what a flood costs the passive side: an
// INIT answered, a COOKIE ECHO accepted, a forged COOKIE ECHO refused.
func BenchmarkHandshake(b *testing.B) {
	keys := testKeys(b)
	cfg := testConfig()
	pkt := initPacket(peerInit(aliDDP, zca))
	dst := make([]byte, 0, 2048)
	r := &countingReader{next: 1}
	res, _ := HandleInit(nil, pkt, &cfg, &keys, r, testNow)
	echo := cookieEchoFor(b, res.Packet)
	forged := bytes.Clone(echo)
	forged[len(forged)-1] ^= 1
	b.Run("INIT", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(pkt)))
		for b.Loop() {
			HandleInit(dst, pkt, &cfg, &keys, r, testNow)
		}
	})
	b.Run("COOKIE_ECHO", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(echo)))
		for b.Loop() {
			HandleCookieEcho(dst, echo, &keys, testNow)
		}
	})
	b.Run("forged_COOKIE_ECHO", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(forged)))
		for b.Loop() {
			HandleCookieEcho(dst, forged, &keys, testNow)
		}
	})
}
