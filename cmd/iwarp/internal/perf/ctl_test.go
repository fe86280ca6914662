package perf

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestPerfCtlGolden(t *testing.T) {
	m := Ctl{Type: CtlAdvert, Op: OpRead, Flags: FlagLat | FlagRaw, Code: RefusedConnBudget, Size: 0x10000, N: 8,
		BufLen: 72, STag: 0xa1b2c3d4, TO: 0x0102030405060708, RawPort: 4791, AtomicIRD: 128,
		Asked: 1 << 33, Limit: 64 << 20}
	for i := range m.Token {
		m.Token[i] = byte(0xf0 + i)
	}
	want := "49575046" + "02020303" + "00010000" + "00000008" + "00000048" + "a1b2c3d4" + "0102030405060708" +
		"12b7" + "0080" + "00000000" + "0000000200000000" + "0000000004000000" + "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"
	got := m.Append(nil)
	if hex.EncodeToString(got) != want || len(got) != m.Len() {
		t.Fatalf("Append:\n got %x\nwant %s", got, want)
	}
	back, n, err := ParseCtl(got)
	if err != nil || n != CtlLen || back != m {
		t.Fatalf("ParseCtl: %+v, %d, %v", back, n, err)
	}
	// Appends after what b holds.
	if b := m.Append([]byte{9}); !bytes.Equal(b[1:], got) {
		t.Error("Append does not append")
	}
	for i := range got {
		if _, _, err := ParseCtl(got[:i]); !errors.Is(err, ErrNotCtl) {
			t.Errorf("%d octets: %v", i, err)
		}
	}
	bad := append([]byte(nil), got...)
	bad[0] = 0 // a data Send's first octet
	if _, _, err := ParseCtl(bad); !errors.Is(err, ErrNotCtl) {
		t.Error("no magic accepted")
	}
	if _, _, err := ParseCtl(pattern(CtlLen)); !errors.Is(err, ErrNotCtl) {
		t.Error("the data pattern reads as a control message")
	}
}

func TestPerfRawHeaderGolden(t *testing.T) {
	h := RawHeader{Mode: RawRPC, CRC: true, Size: 12, Count: 1000, Req: 52, Window: 64}
	h.Token[0], h.Token[15] = 1, 2
	want := "49575052" + "03010000" + "0000000c" + "000003e8" + "00000034" + "00000040" + "01000000000000000000000000000002"
	got := h.Append(nil)
	if hex.EncodeToString(got) != want || len(got) != h.Len() {
		t.Fatalf("Append:\n got %x\nwant %s", got, want)
	}
	back, n, err := ParseRawHeader(got)
	if err != nil || n != RawHeaderLen || back != h {
		t.Fatalf("ParseRawHeader: %+v, %d, %v", back, n, err)
	}
	for i := range got {
		if _, _, err := ParseRawHeader(got[:i]); !errors.Is(err, ErrRawHeader) {
			t.Errorf("%d octets: %v", i, err)
		}
	}
	for _, bad := range []RawHeader{
		{Mode: 9, Size: 1, Count: 1},
		{Mode: RawToServer, Size: 0, Count: 1},
		{Mode: RawToClient, Size: 1, Count: 0},
		{Mode: RawRPC, Size: 1, Count: 1, Req: 0, Window: 1},
		{Mode: RawRPC, Size: 1, Count: 1, Req: 1, Window: 0},
	} {
		if _, _, err := ParseRawHeader(bad.Append(nil)); !errors.Is(err, ErrRawHeader) {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func FuzzPerfParseCtl(f *testing.F) {
	f.Add((&Ctl{Type: CtlHello, Op: OpWrite, Size: 65536, N: 8, BufLen: CtlLen}).Append(nil))
	f.Add([]byte("IWPF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := ParseCtl(b)
		if err != nil {
			return
		}
		if n != CtlLen || !bytes.Equal(m.Append(nil)[:36], b[:36]) || !bytes.Equal(m.Append(nil)[40:], b[40:]) {
			t.Fatalf("round trip of %x: %+v", b, m)
		}
	})
}

func FuzzPerfParseRawHeader(f *testing.F) {
	f.Add((&RawHeader{Mode: RawToServer, Size: 65536, Count: 10}).Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := ParseRawHeader(b)
		if err != nil {
			return
		}
		again, _, err := ParseRawHeader(h.Append(nil))
		if n != RawHeaderLen || err != nil || again != h {
			t.Fatalf("round trip of %x: %+v, %v", b, h, err)
		}
	})
}

func TestPerfRefusedErrorText(t *testing.T) {
	for _, c := range []struct {
		e    RefusedError
		want string
	}{
		{RefusedError{Code: RefusedConns, Limit: 16}, "16 connections already"},
		{RefusedError{Code: RefusedPeerConns, Limit: 4}, "from this address"},
		{RefusedError{Code: RefusedConnBudget, Asked: 8 << 30, Limit: 64 << 20}, "needs 8 GiB of memory there, more than its per-connection budget of 64.0 MiB"},
		{RefusedError{Code: RefusedServerBudget, Asked: 3 << 20, Limit: 1 << 20}, "only 1.0 MiB of its budget is free"},
		{RefusedError{Code: RefusedBadHello}, "does not take this test"},
		{RefusedError{Code: 99}, "code 99"},
	} {
		if got := c.e.Error(); !bytes.Contains([]byte(got), []byte(c.want)) {
			t.Errorf("%+v: %q, want %q in it", c.e, got, c.want)
		}
	}
}
