package mpa

import (
	"bytes"
	"io"
	"testing"
)

// Over a TCP connection the Reader reads the end of a large ULPDU and
// what follows it with one readv(2) (on Linux): the FPDUs still come out
// whole and verified, whatever sizes they have, and a FPDU costs no
// allocation.
func TestReaderTCPReadv(t *testing.T) {
	for _, o := range []Options{{CRC: true}, {}, markersCRC} {
		a, c := tcpPair(t)
		w := NewWriter(a, o)
		r := NewReader(c, o)
		if r.rv == nil && !o.Markers {
			t.Logf("no readv on this platform")
		}
		sizes := []int{32720, 96, 5000, 1, 2047, 60000, 2049, 18, 32720, 32720, 3}
		src := make([]byte, 65535)
		for i := range src {
			src[i] = byte(i * 7)
		}
		go func() {
			for round := 0; round < 3; round++ {
				for _, n := range sizes {
					if err := w.WriteFPDU(src[:14], [][]byte{src[14 : 14+n]}); err != nil {
						return
					}
				}
			}
		}()
		dst := make([]byte, 65535)
		var hdr [14]byte
		for round := 0; round < 3; round++ {
			for _, n := range sizes {
				l, err := r.Next()
				if err != nil || l != 14+n {
					t.Fatalf("%+v: Next = %d, %v; want %d", o, l, err, 14+n)
				}
				if err := r.ReadFull(hdr[:]); err != nil {
					t.Fatal(err)
				}
				clear(dst[:n])
				if err := r.ReadFull(dst[:n]); err != nil {
					t.Fatal(err)
				}
				if err := r.Finish(); err != nil {
					t.Fatalf("%+v: Finish: %v", o, err)
				}
				if !bytes.Equal(dst[:n], src[14:14+n]) {
					t.Fatalf("%+v: FPDU of %d octets garbled", o, n)
				}
			}
		}
		a.Close()
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%+v: after the last FPDU: %v", o, err)
		}
	}
}

func TestReaderTCPAllocs(t *testing.T) {
	for _, o := range []Options{{CRC: true}, markersCRC} {
		a, c := tcpPair(t)
		w := NewWriter(a, o)
		r := NewReader(c, o)
		payload := [][]byte{make([]byte, 30000)}
		hdr := make([]byte, 14)
		const n = 400
		go func() {
			for i := 0; i < n+1; i++ {
				if err := w.WriteFPDU(hdr, payload); err != nil {
					return
				}
			}
		}()
		dst := make([]byte, 30014)
		if a := testing.AllocsPerRun(n, func() {
			l, err := r.Next()
			if err == nil {
				err = r.ReadFull(dst[:14])
			}
			if err == nil {
				err = r.ReadFull(dst[14:l])
			}
			if err == nil {
				err = r.Finish()
			}
			if err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%+v: %v allocations per FPDU over TCP", o, a)
		}
	}
}
