package chunk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// codec is what every chunk, parameter and error cause type implements.
type codec interface {
	Append(b []byte) []byte
	Len() int
}

// hexBytes decodes hex written with spaces, newlines and # comments.
func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

// checkCodec checks a codec against its golden encoding:
//
//   - parsing golden yields want and consumes all of it, and parsing golden
//     followed by more bytes consumes the same;
//   - want encodes to golden, appended to an empty buffer and to a prefix,
//     and Len matches;
//   - every prefix of golden shorter than unpadded bytes is rejected with
//     ErrTruncated or ErrLength, never a panic, and the prefixes that cut
//     only into the padding are rejected too when strictPad is set (chunks)
//     and accepted otherwise (parameters and causes, whose last padding the
//     chunk may leave out).
func checkCodec[T codec](t *testing.T, golden []byte, want T, parse func([]byte) (T, int, error), unpadded int, strictPad bool) {
	t.Helper()
	got, n, err := parse(golden)
	if err != nil {
		t.Fatalf("parse golden: %v", err)
	}
	if n != len(golden) {
		t.Errorf("parse consumed %d bytes, want %d", n, len(golden))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parse golden:\n got %#v\nwant %#v", got, want)
	}
	longer := append(append([]byte{}, golden...), 0xde, 0xad, 0xbe, 0xef)
	if _, n, err := parse(longer); err != nil || n != len(golden) {
		t.Errorf("parse with trailing bytes: n=%d err=%v, want n=%d", n, err, len(golden))
	}
	if enc := want.Append(nil); !bytes.Equal(enc, golden) {
		t.Errorf("append:\n got %x\nwant %x", enc, golden)
	}
	prefix := []byte{1, 2, 3}
	if enc := want.Append(prefix[:3:3]); !bytes.Equal(enc[:3], prefix) || !bytes.Equal(enc[3:], golden) {
		t.Errorf("append after a prefix: got %x", enc)
	}
	if want.Len() != len(golden) {
		t.Errorf("Len() = %d, want %d", want.Len(), len(golden))
	}
	for i := range len(golden) {
		_, n, err := parse(golden[:i])
		if i >= unpadded && !strictPad {
			if err != nil || n != i {
				t.Errorf("prefix of %d bytes (in the padding): n=%d err=%v", i, n, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("prefix of %d bytes accepted", i)
			continue
		}
		if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrLength) {
			t.Errorf("prefix of %d bytes: %v, want ErrTruncated or ErrLength", i, err)
		}
	}
}

// checkChunk is checkCodec for a chunk: golden includes the padding, which
// no prefix may omit.
func checkChunk[T codec](t *testing.T, golden []byte, want T, parse func([]byte) (T, int, error)) {
	t.Helper()
	checkCodec(t, golden, want, parse, len(golden), true)
	// The length field of any prefix must fail the same way when the
	// prefix is presented as a whole chunk.
	if len(golden) > 4 {
		short := append([]byte{}, golden...)
		short[2], short[3] = 0, 3
		if _, _, err := parse(short); !errors.Is(err, ErrLength) {
			t.Errorf("Chunk Length 3: %v, want ErrLength", err)
		}
	}
	wrong := append([]byte{}, golden...)
	wrong[0] ^= 0x20
	if _, _, err := parse(wrong); !errors.Is(err, ErrWrongType) {
		t.Errorf("other chunk type: %v, want ErrWrongType", err)
	}
}

// checkParamCodec is checkCodec for a parameter or error cause whose
// Length is unpadded bytes.
func checkParamCodec[T codec](t *testing.T, golden []byte, want T, parse func([]byte) (T, int, error), unpadded int) {
	t.Helper()
	checkCodec(t, golden, want, parse, unpadded, false)
}

// wantErr checks that err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
	}
}
