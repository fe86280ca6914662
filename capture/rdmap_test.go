package capture

import (
	"strings"
	"testing"
)

// TestDumpSiwTerminateNote: the note on Terminates whose Layer and Error Type
// nibbles look swapped, as Linux siw sends them on x86.
func TestDumpSiwTerminateNote(t *testing.T) {
	for _, c := range []struct {
		name string
		ctl  []byte
		want string // in the note; "" for no note
	}{
		// siw's "no buffer available" (DDP 1/2/0x02) with its M and D bits:
		// LLP/1/0x02 by the RFC, which is no registered triple.
		{"siw no buffer", []byte{0x21, 0x02, 0x03}, "looks like Linux siw's Terminate header on a little-endian machine, whose Layer and Error Type nibbles are swapped: read swapped it is DDP / Untagged Buffer Error / Invalid Message Sequence Number - no buffer available (layer 1, type 2, code 0x02)."},
		// The same sent right (by us): no note.
		{"RFC no buffer", []byte{0x12, 0x02, 0xc0}, ""},
		// siw's RDMAP Remote Protection / Invalid STag (0/1/0x00) reads as
		// DDP Local Catastrophic, a registered triple: only siw's M, D, R
		// in the reserved bits give it away.
		{"siw invalid STag", []byte{0x10, 0x00, 0x07}, "may be Linux siw's Terminate header on a little-endian machine, whose Layer and Error Type nibbles are swapped: read swapped it is RDMA / Remote Protection Error / Invalid Steering Tag (layer 0, type 1, code 0x00)."},
		{"DDP local catastrophic", []byte{0x10, 0x00, 0x00}, ""},
		// Layer and Error Type equal: swapping changes nothing.
		{"DDP invalid STag", []byte{0x11, 0x00, 0x03}, ""},
		// Neither reading registered.
		{"nonsense", []byte{0x77, 0x42, 0x03}, ""},
		{"short", []byte{0x21, 0x02}, ""},
	} {
		got := siwTerminateNote(c.ctl)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: siwTerminateNote(% x) = %q, want %q", c.name, c.ctl, got, c.want)
		}
	}
}
