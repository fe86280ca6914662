package term

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestIsMatchesTriple(t *testing.T) {
	local := DDPInvalidSTag.With("STag %#x", 0x1234)
	remote := New(LayerDDP, 1, 0).AsRemote()
	for _, e := range []error{local, remote, fmt.Errorf("wrapped: %w", local)} {
		if !errors.Is(e, DDPInvalidSTag) {
			t.Errorf("%v is not DDPInvalidSTag", e)
		}
		if errors.Is(e, DDPBaseBounds) || errors.Is(e, RDMAPInvalidSTag) {
			t.Errorf("%v matched another triple", e)
		}
	}
	if !local.Local() || remote.Local() {
		t.Error("origin")
	}
	// RDMAP Local Catastrophic has no code: any value matches.
	if !errors.Is(New(LayerRDMAP, 0, 0x55), RDMAPLocalCatastrophic) {
		t.Error("local catastrophic with a code")
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		want string
	}{
		{DDPNoBuffer, "Untagged Buffer Error / Invalid Message Sequence Number - no buffer available"},
		{RDMAPProtCannotInvalidate, "Remote Protection Error / Steering Tag cannot be Invalidated"},
		{RDMAPUnexpectedOpcode, "Remote Operation Error / Unexpected OpCode"},
		{MPACRCError, "MPA Error / MPA CRC Error"},
		{MPANoMatchingRTR, "MPA Error / No matching RTR option"},
		{RDMAPLocalCatastrophic, "Local Catastrophic Error"},
	} {
		if got := tc.e.Name(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.e, got, tc.want)
		}
	}
	s := DDPTOWrap.With("detail").AsRemote().Error()
	if !strings.Contains(s, "Tagged Offset wrap") || !strings.Contains(s, "reported by peer") || !strings.Contains(s, "detail") {
		t.Error(s)
	}
	if Known(LayerDDP, 2, 0x07) || !Known(LayerDDP, 2, 0x06) || Known(LayerLLP, 0, 0x08) || !Known(LayerRDMAP, 0, 0x42) || !Known(LayerDDP, 0, 0) || Known(LayerDDP, 0, 1) {
		t.Error("Known")
	}
}
