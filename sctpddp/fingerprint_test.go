//go:build !js

package sctpddp

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

func TestFingerprintString(t *testing.T) {
	f := FingerprintOf([]byte("abc"))
	// SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	want := "BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD"
	if got := f.String(); got != want {
		t.Fatalf("String = %s", got)
	}
	for _, in := range []string{want, strings.ToLower(want), "sha-256 " + want, " " + want + "\n"} {
		g, err := ParseFingerprint(in)
		if err != nil || !g.Equal(f) {
			t.Fatalf("ParseFingerprint(%q) = %v, %v", in, g, err)
		}
	}
}

func TestParseFingerprintRejects(t *testing.T) {
	good := FingerprintOf(nil).String()
	for _, in := range []string{"", "AB", good[:len(good)-3], good + ":00", strings.Replace(good, ":", "-", 1),
		"G" + good[1:], strings.Replace(good, ":", "", 1)} {
		if _, err := ParseFingerprint(in); !errors.Is(err, ErrFingerprintSyntax) {
			t.Errorf("ParseFingerprint(%q) err = %v", in, err)
		}
	}
}

func TestGenerateCertificate(t *testing.T) {
	c, err := GenerateCertificate()
	if err != nil {
		t.Fatal(err)
	}
	f, err := CertificateFingerprint(c)
	if err != nil {
		t.Fatal(err)
	}
	if f != sha256.Sum256(c.Leaf.Raw) {
		t.Fatal("fingerprint is not the SHA-256 of the leaf")
	}
	c2, _ := GenerateCertificate()
	if f2, _ := CertificateFingerprint(c2); f2.Equal(f) {
		t.Fatal("two certificates share a fingerprint")
	}
}

func FuzzParseFingerprint(f *testing.F) {
	f.Add(FingerprintOf(nil).String())
	f.Add("sha-256 00:11")
	f.Fuzz(func(t *testing.T, s string) {
		fp, err := ParseFingerprint(s)
		if err != nil {
			return
		}
		g, err := ParseFingerprint(fp.String())
		if err != nil || g != fp {
			t.Fatalf("round trip of %q: %v %v", s, g, err)
		}
	})
}
