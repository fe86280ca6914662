package chunk

import (
	"bytes"
	"testing"
)

func TestHeader(t *testing.T) {
	golden := hexBytes(t, `
		13 88 26 ab # Source Port 5000, Destination Port 9899
		01 02 03 04 # Verification Tag
		00 00 00 00 # Checksum, to be filled in
	`)
	b := AppendHeader(nil, 5000, 9899, 0x01020304)
	if !bytes.Equal(b, golden) {
		t.Fatalf("AppendHeader: %x", b)
	}
	h := Header(b)
	if !h.IsValid() || h.SourcePort() != 5000 || h.DestinationPort() != 9899 || h.VerificationTag() != 0x01020304 || h.Checksum() != 0 {
		t.Errorf("getters: %d %d %#x %#x", h.SourcePort(), h.DestinationPort(), h.VerificationTag(), h.Checksum())
	}
	h.SetSourcePort(1)
	h.SetDestinationPort(2)
	h.SetVerificationTag(3)
	h.SetChecksum(0x11223344)
	if want := hexBytes(t, "00010002 00000003 44332211"); !bytes.Equal(b, want) {
		t.Errorf("setters: %x, want %x (the CRC32c is stored as Appendix A maps it)", b, want)
	}
	if Header(b[:11]).IsValid() {
		t.Error("11 bytes hold a common header")
	}
}
