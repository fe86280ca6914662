package pcapfile

import (
	"encoding/binary"
	"errors"
	"testing"
)

// udpDatagram is a UDP header from port sp to dp, then payload.
func udpDatagram(sp, dp uint16, payload []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, sp)
	b = binary.BigEndian.AppendUint16(b, dp)
	b = binary.BigEndian.AppendUint16(b, uint16(8+len(payload)))
	b = append(b, 0, 0)
	return append(b, payload...)
}

func TestDecodeSCTPOverUDP(t *testing.T) {
	good := sctpPacket()
	binary.LittleEndian.PutUint32(good[8:12], sctpChecksum(good))
	bad := append([]byte(nil), good...)
	bad[8] ^= 1
	zero := sctpPacket()
	for _, tc := range []struct {
		name   string
		udp    []byte
		chunks int
	}{
		{"right CRC32c, any port", udpDatagram(40000, 40001, good), 2},
		{"zero checksum on port 9899", udpDatagram(SCTPTunnelingPort, 40001, zero), 2},
		{"wrong CRC32c", udpDatagram(40000, 40001, bad), 0},
		{"zero checksum elsewhere", udpDatagram(40000, 40001, zero), 0},
		{"not SCTP", udpDatagram(SCTPTunnelingPort, 53, []byte("a DNS query, say, of some length")), 0},
		{"too short", udpDatagram(SCTPTunnelingPort, 53, []byte("short")), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodeSCTP(LinkRaw, ipPacket("192.0.2.1", "192.0.2.2", ProtoUDP, tc.udp))
			if tc.chunks == 0 {
				if !errors.Is(err, ErrNotSCTP) {
					t.Fatalf("got %v, %+v; want ErrNotSCTP", err, p)
				}
				return
			}
			if err != nil || len(p.Chunks) != tc.chunks || p.Src.String() != "192.0.2.1:5000" || p.Dst.String() != "192.0.2.2:5001" {
				t.Fatalf("got %v, %+v", err, p)
			}
			if d, ok := p.Chunks[0].Data(); !ok || string(d.Data) != "hello" || d.PPID != 16 {
				t.Errorf("DATA chunk %+v", d)
			}
		})
	}
}
