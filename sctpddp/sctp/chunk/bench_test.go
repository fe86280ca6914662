package chunk

import (
	"fmt"
	"testing"
)

// The benchmarks fill a 1200-byte packet (a path MTU that fits DTLS over
// UDP over IPv6 on a 1280-byte link) with DATA chunks of each user data
// size.

const benchPacketLen = 1200

func benchChunks(size int) int {
	return max(1, (benchPacketLen-HeaderLen-32)/PaddedLen(DataHeaderLen+size))
}

func BenchmarkParseDataPacket(b *testing.B) {
	for _, size := range []int{16, 128, 512, 1024} {
		b.Run(fmt.Sprintf("userdata=%d", size), func(b *testing.B) {
			pkt := dataPacket(nil, benchChunks(size), size)
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			for b.Loop() {
				if _, err := receive(pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBuildDataPacket(b *testing.B) {
	for _, size := range []int{16, 128, 512, 1024} {
		b.Run(fmt.Sprintf("userdata=%d", size), func(b *testing.B) {
			n := benchChunks(size)
			buf := make([]byte, 0, 1500)
			payload := make([]byte, size)
			var w Builder
			b.ReportAllocs()
			b.SetBytes(int64(len(dataPacket(nil, n, size))))
			for b.Loop() {
				w.Start(buf, 5000, 5000, 1)
				w.Buf = SACK{CumulativeTSNAck: 99, ARwnd: 1 << 20,
					GapAckBlocks:  GapAckBlocks{0, 2, 0, 3, 0, 5, 0, 9},
					DuplicateTSNs: TSNList{0, 0, 0, 0x60}}.Append(w.Buf)
				for i := range n {
					copy(w.ReserveData(Data{Flags: FlagBeginning | FlagEnding, TSN: uint32(i), StreamID: 1, PPID: 16}, size), payload)
				}
				w.Finish()
			}
		})
	}
}

// BenchmarkChecksum is the CRC32c alone, the largest part of both.
func BenchmarkChecksum(b *testing.B) {
	pkt := dataPacket(nil, benchChunks(1024), 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		SetPacketChecksum(pkt)
	}
}
