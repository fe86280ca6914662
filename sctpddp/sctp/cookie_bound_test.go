package sctp

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"testing"
)

// TestCookieKeysBound checks that keys bound to one peer accept only the
// cookies made with keys bound to that peer, across a rotation, and that
// the derived key is HMAC-SHA256 of the peer under the key.
func TestCookieKeysBound(t *testing.T) {
	k0 := testKeys(t)
	k1, err := k0.Rotate(testRand(0x90, CookieKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	a, b := []byte("192.0.2.1:9899"), []byte("192.0.2.2:9899")
	c := testCookie()
	ka := k1.Bound(a)
	made := c.Append(nil, &ka)
	if _, err := OpenCookie(made, &ka, testNow); err != nil {
		t.Fatalf("same peer: %v", err)
	}
	kb := k1.Bound(b)
	if _, err := OpenCookie(made, &kb, testNow); !errors.Is(err, ErrCookieMAC) {
		t.Errorf("other peer: %v, want ErrCookieMAC", err)
	}
	if _, err := OpenCookie(made, &k1, testNow); !errors.Is(err, ErrCookieMAC) {
		t.Errorf("unbound keys: %v, want ErrCookieMAC", err)
	}
	// A cookie of the previous key, bound, still opens after a rotation.
	k0a := k0.Bound(a)
	old := c.Append(nil, &k0a)
	if _, err := OpenCookie(old, &ka, testNow); err != nil {
		t.Errorf("previous key, same peer: %v", err)
	}
	m := hmac.New(sha256.New, k1.current[:])
	m.Write(a)
	if !hmac.Equal(ka.current[:], m.Sum(nil)) {
		t.Error("bound key is not HMAC-SHA256(key, peer)")
	}
	if n := testing.AllocsPerRun(100, func() { _ = k1.Bound(a) }); n != 0 {
		t.Errorf("Bound allocates %v times", n)
	}
	var none CookieKeys
	if nb := none.Bound(a); nb.ok {
		t.Error("zero keys bound hold a key")
	}
}
