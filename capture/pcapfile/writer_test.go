package pcapfile

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

func TestConnWriterRoundTrip(t *testing.T) {
	for _, pair := range [][2]string{
		{"10.0.0.1:5000", "10.0.0.2:6000"},
		{"[fd00::1]:5000", "[fd00::2]:6000"},
	} {
		c, s := netip.MustParseAddrPort(pair[0]), netip.MustParseAddrPort(pair[1])
		var buf bytes.Buffer
		w, err := NewWriter(&buf, LinkEthernet)
		if err != nil {
			t.Fatal(err)
		}
		cw, err := NewConnWriter(w, c, s)
		if err != nil {
			t.Fatal(err)
		}
		cw.MSS = 100
		t0 := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		up := bytes.Repeat([]byte("client data "), 40)
		down := bytes.Repeat([]byte("server "), 30)
		if err := cw.Write(t0, true, up); err == nil {
			t.Fatal("Write before Open accepted")
		}
		if err := cw.Open(t0); err != nil {
			t.Fatal(err)
		}
		if err := cw.Write(t0.Add(time.Millisecond), true, up[:200]); err != nil {
			t.Fatal(err)
		}
		if err := cw.Write(t0.Add(2*time.Millisecond), false, down); err != nil {
			t.Fatal(err)
		}
		if err := cw.Write(t0.Add(3*time.Millisecond), true, up[200:]); err != nil {
			t.Fatal(err)
		}
		if err := cw.Close(t0.Add(4 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		// Checksums: every IPv4 header and TCP segment sums to 0xffff.
		r, _ := NewReader(bytes.NewReader(buf.Bytes()))
		for {
			p, err := r.Next()
			if err != nil {
				break
			}
			if !p.Time.Equal(t0) && p.Time.Sub(t0) > 4*time.Millisecond {
				t.Fatalf("time %v", p.Time)
			}
			checkChecksums(t, p.Data)
		}
		streams, err := ReadStreams(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		a := Lookup(streams, Flow{Src: c, Dst: s})
		b := Lookup(streams, Flow{Src: s, Dst: c})
		if a == nil || b == nil || !bytes.Equal(a.Data, up) || !bytes.Equal(b.Data, down) || !a.SYN || !a.FIN || !b.FIN {
			t.Fatalf("%s: streams differ", pair[0])
		}
		if a.TimeAt(250) != t0.Add(3*time.Millisecond) {
			t.Fatalf("TimeAt %v", a.TimeAt(250))
		}
	}
}

func checkChecksums(t *testing.T, frame []byte) {
	t.Helper()
	ip := frame[14:]
	var sum uint32
	var tcp []byte
	if ip[0]>>4 == 4 {
		if checksum(0, ip[:20]) != 0xffff {
			t.Fatal("IPv4 header checksum")
		}
		tcp = ip[20:]
		sum = checksum(0, ip[12:20])
	} else {
		tcp = ip[40:]
		sum = checksum(0, ip[8:40])
	}
	sum += 6 + uint32(len(tcp))
	if checksum(sum, tcp) != 0xffff {
		t.Fatal("TCP checksum")
	}
}
