package mpa

import (
	"testing"
)

// BenchmarkTCP moves 64 KiB messages over a loopback TCP connection: the
// Writer cuts each into FPDUs of at most MULPDU(emss) octets (an 18-octet
// untagged header plus payload, as DDP would) and the Reader on the other
// end verifies each FPDU and copies its payload to its place in a 64 KiB
// buffer, as DDP does.
func BenchmarkTCP(b *testing.B) {
	const msg = 64 << 10
	for _, emss := range []int{1448, 8948, 65483} {
		for _, o := range []Options{{CRC: true}, {}, markersCRC} {
			b.Run("emss="+itoa(emss)+"/"+benchName(0, o)[len("ulpdu=0/"):], func(b *testing.B) {
				a, c := tcpPair(b)
				src := make([]byte, msg)
				dst := make([]byte, msg)
				hdr := make([]byte, 18)
				hdr[0], hdr[1] = 0x41, 0x43
				seg := MULPDU(emss, o.Markers) - len(hdr)
				if o.Markers {
					seg = min(seg, 65000-len(hdr))
				}
				w := NewWriter(a, o)
				r := NewReader(c, o)
				done := make(chan error, 1)
				go func() {
					for range b.N {
						for off := 0; off < msg; {
							u, err := r.Next()
							if err != nil {
								done <- err
								return
							}
							off += copy(dst[off:], u[18:])
						}
					}
					done <- nil
				}()
				b.ReportAllocs()
				b.SetBytes(msg)
				b.ResetTimer()
				var payload [1][]byte
				for range b.N {
					for off := 0; off < msg; off += seg {
						payload[0] = src[off:min(msg, off+seg)]
						if err := w.WriteFPDU(hdr, payload[:]); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
