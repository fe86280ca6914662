//go:build !js

package sctpddp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// GenerateCertificate makes a self-signed ECDSA P-256 certificate for
// fingerprint pinning, as WebRTC endpoints do. Give its Fingerprint to the
// peer out of band (CertificateFingerprint).
func GenerateCertificate() (tls.Certificate, error) {
	return issueCertificate(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "iwarp"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, nil)
}

// issueCertificate makes an ECDSA P-256 key and a certificate of it from
// tmpl, with a random serial number and, unless tmpl has them, a validity
// from an hour ago to a year from now; it is signed by issuer, or by
// itself if issuer is nil.
func issueCertificate(tmpl *x509.Certificate, issuer *tls.Certificate) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return tls.Certificate{}, err
	}
	if tmpl.NotBefore.IsZero() {
		now := time.Now()
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.AddDate(1, 0, 0)
	}
	tmpl.BasicConstraintsValid = true
	parent, signer := tmpl, any(key)
	if issuer != nil {
		parent, signer = issuer.Leaf, issuer.PrivateKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// CertificateFingerprint returns the fingerprint of cert's leaf, the value
// a peer pins.
func CertificateFingerprint(cert tls.Certificate) (Fingerprint, error) {
	if len(cert.Certificate) == 0 {
		return Fingerprint{}, fmt.Errorf("sctpddp: certificate has no DER data")
	}
	return FingerprintOf(cert.Certificate[0]), nil
}

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
