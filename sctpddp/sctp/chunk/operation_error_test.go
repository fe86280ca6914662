package chunk

import "testing"

func TestOperationError(t *testing.T) {
	golden := hexBytes(t, `
		09 00 00 10 # Type 9, Length 16
		00 06 00 0c # Unrecognized Chunk Type, Length 12
		fe 00 00 06 01 02 00 00 # the chunk: type 0xFE, Length 6, and its padding counted
	`)
	checkChunk(t, golden, OperationError{Causes: golden[4:]}, ParseOperationError)
	checkChunk(t, hexBytes(t, "09000004"), OperationError{}, ParseOperationError)

	it := Causes(golden[4:])
	if !it.Next() {
		t.Fatal(it.Err())
	}
	if r, _, err := ParseRaw(it.Cause().Info()); err != nil || r.Type() != 0xfe {
		t.Errorf("the unrecognized chunk: %v %v", r, err)
	}
}
