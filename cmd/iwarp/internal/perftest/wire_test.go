package perftest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/iwarpgo/iwarp/rdmap"
)

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// controlMessages decodes a captured control connection's direction
// (perftest over siw: no CRCs) into its Sends.
func controlMessages(t *testing.T, name string) [][]byte {
	t.Helper()
	fr, msgs, err := decodeStream(golden(t, name), false)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	e, _, ok := fr.Enhancement()
	if !ok || fr.Rev != 2 || e.IRD != 0 || e.ORD != 0 || e.PeerToPeer || fr.CRC || fr.Markers {
		t.Fatalf("%s: %v %+v: want revision 2, S, client-server, IRD/ORD 0/0, no CRC, no Markers", name, fr, e)
	}
	var out [][]byte
	for i, m := range msgs {
		if m.op != uint8(rdmap.OpSend) || m.tagged || m.qn != 0 || m.msn != uint32(i+1) {
			t.Fatalf("%s: message %d: opcode %d, QN %d, MSN %d: want Sends, QN 0, MSN %d", name, i+1, m.op, m.qn, m.msn, i+1)
		}
		out = append(out, m.payload)
	}
	return out
}

// TestPerftestGoldenControl decodes each captured control connection: the
// messages have the lengths of each test's script, both ways, and the
// first four are the version, check_sys_data and check_mtu, octet for
// octet what this package sends.
func TestPerftestGoldenControl(t *testing.T) {
	for _, test := range Tests {
		for _, dir := range []string{"c2s", "s2c"} {
			name := fmt.Sprintf("%s-control-%s.bin", test, dir)
			t.Run(name, func(t *testing.T) {
				msgs := controlMessages(t, name)
				var lens []int
				for _, m := range msgs {
					lens = append(lens, len(m))
				}
				if want := controlScript(test); fmt.Sprint(lens) != fmt.Sprint(want) {
					t.Fatalf("lengths %v, want %v", lens, want)
				}
				mine := [][]byte{AppendVersion(nil, Version), AppendInt(nil, DefaultCycleBuffer), AppendInt(nil, DefaultCacheLine), AppendMTU(nil, DefaultMTU)}
				for i, m := range mine {
					if !bytes.Equal(msgs[i], m) {
						t.Errorf("message %d is %x, this package sends %x", i+1, msgs[i], m)
					}
				}
				if v, f, err := ParseVersion(msgs[0]); err != nil || v != "6.06" || f != 6.06 {
					t.Errorf("version %q %v %v", v, f, err)
				}
				// The two handshakes around the data connection carry
				// zeroed records; this package sends the same.
				zero := (&Dest{}).Append(nil)
				for _, i := range []int{4, 5} {
					if !bytes.Equal(msgs[i], zero) {
						t.Errorf("message %d is %x, want a zeroed pingpong_dest", i+1, msgs[i])
					}
				}
				// Every later record is the same queue pair's, and
				// re-encodes to the same octets but for the padding.
				var first Dest
				for i, m := range msgs[6:] {
					if len(m) != DestLen {
						continue
					}
					d, err := ParseDest(m)
					if err != nil {
						t.Fatal(err)
					}
					again := d.Append(nil)
					want := append([]byte(nil), m...)
					copy(want[20:24], []byte{0, 0, 0, 0})
					if !bytes.Equal(again, want) {
						t.Errorf("record %d: %x re-encodes to %x", i+7, m, again)
					}
					d.Pad = 0
					if i == 0 {
						first = d
					} else if d != first {
						t.Errorf("record %d %+v differs from the first %+v", i+7, d, first)
					}
				}
				if first.LID != 0 || first.SRQN != 0 || first.GIDIndex != 0 || first.RKey == 0 || first.VAddr == 0 ||
					first.GID != [16]byte{0x52, 0x54, 0, 0x12, 0x34, 0x56} {
					t.Errorf("record %+v: want LID 0, an rkey and a vaddr, the GID of the guest's MAC 52:54:00:12:34:56, srqn and gid_index 0", first)
				}
				wantReads := uint32(1)
				if test.reads() {
					wantReads = 128 // siw's max_qp_rd_atom
				}
				if first.OutReads != wantReads {
					t.Errorf("out_reads %d, want %d", first.OutReads, wantReads)
				}
			})
		}
	}
}

// TestPerftestGoldenRecords checks the fields of particular captured records.
func TestPerftestGoldenRecords(t *testing.T) {
	c2s := controlMessages(t, "ib_write_bw-control-c2s.bin")
	d, err := ParseDest(c2s[6])
	if err != nil {
		t.Fatal(err)
	}
	want := Dest{OutReads: 1, QPN: 3, PSN: 0xd1dc19, RKey: 0xf2ddd100, VAddr: 0x55fe008e2000, GID: [16]byte{0x52, 0x54, 0, 0x12, 0x34, 0x56}}
	if d != want {
		t.Errorf("ib_write_bw client's record %+v, want %+v", d, want)
	}
	// The closing record's padding is stack garbage.
	if d, _ := ParseDest(c2s[15]); d.Pad != 0xfe550000 {
		t.Errorf("the last record's padding is %#x, captured 0xfe550000", d.Pad)
	}
	// The client's report: what its perftest printed (4096 20 4.69 0.97
	// 0.000248).
	var f [ReportFields][]byte
	copy(f[:], c2s[10:15])
	r, err := ParseBWReport(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size != 4096 || r.Iters != 20 || math.Abs(r.BWPeak-4.69) > 0.005 || math.Abs(r.BWAvg-0.97) > 0.005 || math.Abs(r.MsgRate-0.000248) > 5e-7 {
		t.Errorf("report %+v", r)
	}
	if again := r.Fields(); !bytes.Equal(bytes.Join(again[:], nil), bytes.Join(f[:], nil)) {
		t.Errorf("the report re-encodes to %x", again)
	}
	// The server's report is its uninitialized memory: it decodes, into
	// nonsense.
	s2c := controlMessages(t, "ib_write_bw-control-s2c.bin")
	copy(f[:], s2c[10:15])
	if r, err := ParseBWReport(f); err != nil || r.Size == 4096 {
		t.Errorf("the server's report %+v %v", r, err)
	}

	// ib_read_bw: the data connection asks IRD/ORD 128/128, and the Read
	// Requests read the server's record's (rkey, vaddr) into the client's
	// buffer, which starts a cycle buffer before the vaddr it advertises.
	rc := controlMessages(t, "ib_read_bw-control-c2s.bin")
	rs := controlMessages(t, "ib_read_bw-control-s2c.bin")
	cd, _ := ParseDest(rc[6])
	sd, _ := ParseDest(rs[6])
	fr, msgs, err := decodeStream(golden(t, "ib_read_bw-data-c2s.bin"), false)
	if err != nil {
		t.Fatal(err)
	}
	if e, _, ok := fr.Enhancement(); !ok || e.IRD != 128 || e.ORD != 128 {
		t.Errorf("ib_read_bw's data connection: %v %+v, want IRD/ORD 128/128", fr, e)
	}
	if len(msgs) != 20 {
		t.Fatalf("%d Read Requests, want 20", len(msgs))
	}
	for _, m := range msgs {
		rr, _, err := rdmap.ParseReadRequest(m.payload)
		if err != nil || m.op != uint8(rdmap.OpReadRequest) || m.qn != rdmap.QNReadReq {
			t.Fatalf("%+v: %v", m, err)
		}
		if rr.SrcSTag != sd.RKey || rr.SrcTO != sd.VAddr || rr.RDMARDSZ != 4096 || rr.SinkSTag != cd.RKey || rr.SinkTO != cd.VAddr-4096 {
			t.Fatalf("Read Request %+v; the server advertised %#x/%#x, the client %#x/%#x", rr, sd.RKey, sd.VAddr, cd.RKey, cd.VAddr)
		}
	}
	// ib_write_bw's data connection: IRD/ORD 0/0.
	fr, _, err = decodeStream(golden(t, "ib_write_bw-data-c2s-request.bin"), false)
	if e, _, ok := fr.Enhancement(); err != nil || !ok || e.IRD != 0 || e.ORD != 0 {
		t.Errorf("ib_write_bw's data connection: %v %+v %v, want IRD/ORD 0/0", fr, e, err)
	}

	// ib_send_bw over iWARP: both records carry the credit buffer; the
	// server RDMA Writes its count of receives there, little-endian,
	// every rx_depth/3 (20/3 = 6) Sends and at the end: 6, 12, 18, 20.
	sc := controlMessages(t, "ib_send_bw-control-c2s.bin")
	cred, _ := ParseDest(sc[6])
	_, writes, err := decodeStream(golden(t, "ib_send_bw-data-s2c.bin"), false)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for _, w := range writes {
		if !w.tagged || w.op != uint8(rdmap.OpWrite) || w.stag != cred.RKey || w.to != cred.VAddr || w.len != CreditLen {
			t.Fatalf("credit %+v; the client advertised %#x/%#x", w, cred.RKey, cred.VAddr)
		}
	}
	raw := golden(t, "ib_send_bw-data-s2c.bin")
	// The credits' values: the last 4 octets of each Write's payload, read
	// from the stream (decodeStream keeps no tagged payloads).
	for i := 0; i < len(writes); i++ {
		off := 24 + i*24 + 2 + 14 // Reply, then 24-octet FPDUs: length, tagged header
		v, err := ParseCredit(raw[off:])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if fmt.Sprint(got) != "[6 12 18 20]" {
		t.Errorf("credits %v, want [6 12 18 20]", got)
	}
}

// TestPerftestCodecs: each encoder against hand-written octets, and each decoder
// against every truncation of them.
func TestPerftestCodecs(t *testing.T) {
	h := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := Dest{LID: 1, OutReads: 0x80, QPN: 0x102, PSN: 0xabcdef, RKey: 0x11223344, Pad: 0xdeadbeef, VAddr: 0x7e0000001000,
		GID: [16]byte{0xfe, 0x80, 15: 1}, SRQN: 5, GIDIndex: -1}
	cases := []struct {
		name  string
		enc   []byte
		want  []byte
		parse func([]byte) error
	}{
		{"version", AppendVersion(nil, "6.06"), h("362e3036000000000000000000000000"), func(b []byte) error { _, _, err := ParseVersion(b); return err }},
		{"int", AppendInt(nil, 4096), h("00001000"), func(b []byte) error { _, err := ParseInt(b); return err }},
		{"negative int", AppendInt(nil, -2), h("fffffffe"), func(b []byte) error { _, err := ParseInt(b); return err }},
		{"mtu", AppendMTU(nil, 5), h("3500"), func(b []byte) error { _, err := ParseMTU(b); return err }},
		{"dest", d.Append(nil), h("00000001" + "00000080" + "00000102" + "00abcdef" + "11223344" + "00000000" + "00007e0000001000" +
			"fe800000000000000000000000000001" + "00000005" + "ffffffff"), func(b []byte) error { _, err := ParseDest(b); return err }},
		{"credit", AppendCredit(nil, 20), h("14000000"), func(b []byte) error { _, err := ParseCredit(b); return err }},
	}
	for _, c := range cases {
		if !bytes.Equal(c.enc, c.want) {
			t.Errorf("%s: %x, want %x", c.name, c.enc, c.want)
		}
		if err := c.parse(c.want); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		for n := 0; n < len(c.want); n++ {
			if err := c.parse(c.want[:n]); !errors.Is(err, ErrShort) {
				t.Errorf("%s truncated to %d octets: %v, want ErrShort", c.name, n, err)
			}
		}
	}
	got, _ := ParseDest(d.Append(nil))
	d.Pad = 0
	if got != d {
		t.Errorf("dest round trip %+v, want %+v", got, d)
	}
	r := BWReport{Size: 65536, Iters: 5000, BWPeak: 1234.5, BWAvg: math.Copysign(0, -1), MsgRate: math.Inf(1)}
	f := r.Fields()
	if hex.EncodeToString(f[0]) != "0000000000010000" || hex.EncodeToString(f[2]) != "40934a0000000000" {
		t.Errorf("report fields %x", f)
	}
	if back, err := ParseBWReport(f); err != nil || back.Size != r.Size || back.BWPeak != r.BWPeak || !math.IsInf(back.MsgRate, 1) || !math.Signbit(back.BWAvg) {
		t.Errorf("report round trip %+v %v", back, err)
	}
	for i := range f {
		g := f
		g[i] = g[i][:7]
		if _, err := ParseBWReport(g); !errors.Is(err, ErrShort) {
			t.Errorf("report field %d truncated: %v", i, err)
		}
	}
	for _, bad := range []string{"362e", "6.0x", "nan", "inf", ""} {
		if _, _, err := ParseVersion(AppendVersion(nil, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("version %q: %v, want ErrMalformed", bad, err)
		}
	}
	for _, bad := range []string{"0\x00", "6\x00", "x\x00", "\x00\x00", "12"} {
		if _, err := ParseMTU([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("MTU %q: %v, want ErrMalformed", bad, err)
		}
	}
	if v, err := ParseMTU([]byte("3")[:1:1]); err == nil {
		t.Errorf("a 1-octet MTU parsed as %d", v)
	}
}

// TestPerftestGeometry checks the address stepping against perftest's
// increase_rem_addr for small and large messages.
func TestPerftestGeometry(t *testing.T) {
	for _, c := range []struct {
		size, cycle, line int
		want              []uint64
	}{
		{2, 4096, 64, []uint64{0, 64, 128}},
		{100, 4096, 64, []uint64{0, 128, 256}},
		{2048, 4096, 64, []uint64{0, 2048, 0, 2048}},
		{2049, 4096, 64, []uint64{0, 0, 0}},
		{65536, 4096, 64, []uint64{0, 0}},
		{64, 256, 64, []uint64{0, 64, 128, 192, 0}},
	} {
		var got []uint64
		for k := range c.want {
			got = append(got, offset(uint64(k), c.size, c.cycle, c.line))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("size %d cycle %d line %d: offsets %v, want %v", c.size, c.cycle, c.line, got, c.want)
		}
		// Every access stays inside BUFF_SIZE(size, cycle).
		for k := uint64(0); k < 200; k++ {
			if off := offset(k, c.size, c.cycle, c.line); off+uint64(c.size) > uint64(regionLen(c.size, c.cycle)) {
				t.Fatalf("size %d: operation %d at %d overruns the region of %d", c.size, k, off, regionLen(c.size, c.cycle))
			}
		}
	}
	for _, bad := range [][2]int{{0, 64}, {4095, 64}, {4096, 0}, {4096, 48}, {4096, 8192}, {32, 32}} {
		if err := checkGeometry(bad[0], bad[1]); err == nil {
			t.Errorf("cycle %d line %d accepted", bad[0], bad[1])
		}
	}
}

func FuzzPerftestParseVersion(f *testing.F) {
	f.Add(AppendVersion(nil, Version))
	f.Add([]byte("5.70\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, v, err := ParseVersion(b)
		if err != nil {
			return
		}
		if len(s) >= VersionLen || bytes.IndexByte([]byte(s), 0) >= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("%x: %q %v", b, s, v)
		}
	})
}

func FuzzPerftestParseInt(f *testing.F) {
	f.Add([]byte{0, 0, 0x10, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseInt(b)
		if err == nil && !bytes.Equal(AppendInt(nil, v), b[:IntLen]) {
			t.Fatalf("%x: %d", b, v)
		}
	})
}

func FuzzPerftestParseMTU(f *testing.F) {
	f.Add([]byte("3\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseMTU(b)
		if err == nil && (v < 1 || v > 5) {
			t.Fatalf("%x: %d", b, v)
		}
	})
}

func FuzzPerftestParseDest(f *testing.F) {
	for _, name := range []string{"ib_write_bw-control-c2s.bin", "ib_send_bw-control-s2c.bin"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil && len(b) > 200 {
			f.Add(b[len(b)-DestLen-4 : len(b)-4])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDest(b)
		if err != nil {
			return
		}
		want := append([]byte(nil), b[:DestLen]...)
		copy(want[20:24], []byte{0, 0, 0, 0})
		if got := d.Append(nil); !bytes.Equal(got, want) {
			t.Fatalf("%x re-encodes to %x", b, got)
		}
	})
}

func FuzzPerftestParseBWReport(f *testing.F) {
	r := BWReport{Size: 4096, Iters: 20, BWPeak: 4.69, BWAvg: 0.97, MsgRate: 0.000248}
	fl := r.Fields()
	f.Add(bytes.Join(fl[:], nil), uint8(8))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		var g [ReportFields][]byte
		for i := range g {
			k := min(int(n)%9, len(b))
			g[i], b = b[:k], b[k:]
		}
		rep, err := ParseBWReport(g)
		if err != nil {
			return
		}
		back := rep.Fields()
		for i := range g {
			if !bytes.Equal(back[i], g[i][:ReportFieldLen]) {
				t.Fatalf("field %d %x re-encodes to %x", i, g[i], back[i])
			}
		}
	})
}

func FuzzPerftestParseCredit(f *testing.F) {
	f.Add([]byte{6, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseCredit(b)
		if err == nil && !bytes.Equal(AppendCredit(nil, v), b[:CreditLen]) {
			t.Fatalf("%x: %d", b, v)
		}
	})
}
