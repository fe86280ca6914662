//go:build !js

package sctpddp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Fingerprint is the SHA-256 hash of a DER-encoded certificate, the
// "sha-256" certificate fingerprint that WebRTC pins in SDP (RFC 8122 §5).
type Fingerprint [sha256.Size]byte

// FingerprintOf returns the SHA-256 fingerprint of a DER certificate.
func FingerprintOf(der []byte) Fingerprint { return sha256.Sum256(der) }

// String returns the fingerprint as upper-case hex bytes separated by
// colons, "AB:CD:...", the form of SDP's a=fingerprint and of
// `openssl x509 -fingerprint -sha256`.
func (f Fingerprint) String() string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 0, len(f)*3-1)
	for i, c := range f {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, digits[c>>4], digits[c&0xF])
	}
	return string(b)
}

// Equal compares in constant time.
func (f Fingerprint) Equal(g Fingerprint) bool { return subtle.ConstantTimeCompare(f[:], g[:]) == 1 }

// ErrFingerprintSyntax reports a fingerprint string that is not 32
// colon-separated hex bytes.
var ErrFingerprintSyntax = errors.New("sctpddp: fingerprint must be 32 colon-separated hex bytes")

// ParseFingerprint parses the colon-separated hex form ("ab:CD:..."), in
// either case. An optional "sha-256 " prefix, as in SDP, is accepted.
func ParseFingerprint(s string) (Fingerprint, error) {
	var f Fingerprint
	s = strings.TrimSpace(s)
	if len(s) > 8 && strings.EqualFold(s[:8], "sha-256 ") {
		s = strings.TrimSpace(s[8:])
	}
	parts := strings.Split(s, ":")
	if len(parts) != len(f) {
		return f, fmt.Errorf("%w: %d bytes in %q", ErrFingerprintSyntax, len(parts), s)
	}
	for i, p := range parts {
		if len(p) != 2 {
			return f, fmt.Errorf("%w: %q", ErrFingerprintSyntax, p)
		}
		if _, err := hex.Decode(f[i:i+1], []byte(p)); err != nil {
			return f, fmt.Errorf("%w: %q", ErrFingerprintSyntax, p)
		}
	}
	return f, nil
}
