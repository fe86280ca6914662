package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// rfc7306Capture writes a capture of one MPA connection (revision 1,
// CRCs) carrying RFC 7306's messages, each FPDU a TCP segment of its own,
// and returns its file.
func rfc7306Capture(t *testing.T) string {
	t.Helper()
	untagged := func(op rdmap.Opcode, qn, msn uint32, body []byte) []byte {
		h := ddp.Header{Last: true, DV: ddp.Version, RsvdULP: [5]byte{byte(rdmap.MakeControl(op))}, QN: qn, MSN: msn}
		return append(h.Append(nil), body...)
	}
	req := func(r rdmap.AtomicRequest) []byte { return r.Append(nil) }
	type unit struct {
		fromClient bool
		ulpdu      []byte
	}
	units := []unit{
		{true, untagged(rdmap.OpAtomicRequest, 1, 1, req(rdmap.AtomicRequest{Op: rdmap.FetchAdd, ReqID: 7, STag: 0x12345678, TO: 0x1000,
			AddSwapData: 0x00000001_00000003, AddSwapMask: 0x80000000_80000000, CompareMask: ^uint64(0)}))},
		{false, untagged(rdmap.OpAtomicResponse, 3, 1, (&rdmap.AtomicResponse{OrigReqID: 7, OrigValue: 0x1_fffffffe}).Append(nil))},
		{true, untagged(rdmap.OpAtomicRequest, 1, 2, req(rdmap.AtomicRequest{Op: rdmap.CmpSwap, ReqID: 8, STag: 0x12345678, TO: 0x1008,
			AddSwapData: 0xaaaabbbbccccdddd, AddSwapMask: 0xffffffff, CompareData: 0x1111222200000000, CompareMask: 0xffffffff00000000}))},
		{false, untagged(rdmap.OpAtomicResponse, 3, 2, (&rdmap.AtomicResponse{OrigReqID: 8, OrigValue: 0x1111222233334444}).Append(nil))},
		{true, untagged(rdmap.OpImmediate, 0, 1, (&rdmap.ImmediateData{Data: 0x0102030405060708}).Append(nil))},
		{true, untagged(rdmap.OpImmediateSE, 0, 2, (&rdmap.ImmediateData{Data: 42}).Append(nil))},
		{true, untagged(rdmap.OpAtomicRequest, 1, 3, req(rdmap.AtomicRequest{Op: rdmap.FetchAdd, ReqID: 9, STag: 0x12345678, TO: 0x1004, AddSwapData: 1, CompareMask: ^uint64(0)}))},
		{true, untagged(rdmap.OpAtomicRequest, 1, 4, req(rdmap.AtomicRequest{Op: 1, ReqID: 10, STag: 0x12345678, TO: 0x1000}))},
		{true, untagged(rdmap.OpImmediate, 0, 3, []byte{1, 2, 3, 4})},
	}
	var buf bytes.Buffer
	w, _ := pcapfile.NewWriter(&buf, pcapfile.LinkEthernet)
	cw, _ := pcapfile.NewConnWriter(w, netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:4791"))
	now := time.Now()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cw.Open(now))
	must(cw.Write(now, true, (&mpa.Frame{Rev: 1, CRC: true}).Append(nil)))
	must(cw.Write(now, false, (&mpa.Frame{Reply: true, Rev: 1, CRC: true}).Append(nil)))
	var pos [2]uint64
	for i, u := range units {
		now := now.Add(time.Duration(i+1) * time.Millisecond)
		d := 1
		if u.fromClient {
			d = 0
		}
		f, err := mpa.AppendFPDU(nil, pos[d], mpa.Options{CRC: true}, u.ulpdu)
		must(err)
		pos[d] += uint64(len(f))
		must(cw.Write(now, u.fromClient, f))
	}
	must(cw.Close(now.Add(time.Second)))
	file := filepath.Join(t.TempDir(), "rfc7306.pcap")
	must(os.WriteFile(file, buf.Bytes(), 0o644))
	return file
}

// dumpRecords runs iwarp dump --json and decodes its records with their
// numbers exact.
func dumpRecords(t *testing.T, file string) []map[string]any {
	t.Helper()
	stdout, stderr, code := runIwarp(t, "dump", "--json", file)
	if code != 0 {
		t.Fatalf("dump %s: exit %d: %s", file, code, stderr)
	}
	var out []map[string]any
	d := json.NewDecoder(strings.NewReader(stdout))
	d.UseNumber()
	for d.More() {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// field returns a record's value at a dotted path, as text.
func field(r map[string]any, path string) string {
	var v any = r
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// iwarp dump decodes RFC 7306's messages: the Atomic Request's fields
// (Add or Swap Data and Mask named as its AOpCode uses them), the Atomic
// Response's, Immediate Data's 8 octets; a note for a misaligned TO, a
// reserved AOpCode and Immediate Data of the wrong length.
func TestDumpRFC7306(t *testing.T) {
	file := rfc7306Capture(t)
	var fpdus []map[string]any
	for _, r := range dumpRecords(t, file) {
		if r["kind"] == "fpdu" {
			if r["crc"] != "good" {
				t.Errorf("FPDU %v: crc %v", r["n"], r["crc"])
			}
			fpdus = append(fpdus, r)
		}
	}
	n := func(v uint64) string { return fmt.Sprint(v) }
	want := []map[string]string{
		{"op": "Atomic Request", "opcode": "10", "ddp.qn": "1", "ddp.msn": "1", "atomic.aopcode": "0", "atomic.aop": "FetchAdd", "atomic.request_id": "7",
			"atomic.stag": n(0x12345678), "atomic.to": n(0x1000), "atomic.add_data": n(0x00000001_00000003), "atomic.add_mask": n(0x80000000_80000000),
			"atomic.compare_data": "0", "atomic.compare_mask": n(^uint64(0)), "atomic.swap_data": ""},
		{"op": "Atomic Response", "opcode": "11", "ddp.qn": "3", "ddp.msn": "1", "atomic_response.original_request_id": "7", "atomic_response.original_value": n(0x1_fffffffe)},
		{"op": "Atomic Request", "ddp.msn": "2", "atomic.aop": "CmpSwap", "atomic.request_id": "8", "atomic.to": n(0x1008),
			"atomic.swap_data": n(0xaaaabbbbccccdddd), "atomic.swap_mask": n(0xffffffff), "atomic.compare_data": n(0x1111222200000000),
			"atomic.compare_mask": n(0xffffffff00000000), "atomic.add_data": ""},
		{"op": "Atomic Response", "atomic_response.original_request_id": "8", "atomic_response.original_value": n(0x1111222233334444)},
		{"op": "Immediate Data", "opcode": "8", "ddp.qn": "0", "ddp.msn": "1", "immediate_data": n(0x0102030405060708)},
		{"op": "Immediate Data with Solicited Event", "opcode": "9", "ddp.msn": "2", "immediate_data": "42"},
		{"op": "Atomic Request", "atomic.to": "4100"},
		{"op": "Atomic Request", "atomic.aopcode": "1"},
		{"op": "Immediate Data", "immediate_data": ""},
	}
	notes := []string{"FetchAdd adds 0x100000003", "answers the Atomic Request with Request Identifier 7", "CmpSwap: if the peer's 64-bit word",
		"held 0x1111222233334444", "0x0102030405060708, go into the peer's next posted receive buffer", "asks for a Solicited Event",
		"not a multiple of 8", "does not define", "must be exactly 8 bytes"}
	if len(fpdus) != len(want) {
		t.Fatalf("%d FPDUs, want %d", len(fpdus), len(want))
	}
	for i, w := range want {
		for k, v := range w {
			if got := field(fpdus[i], k); got != v {
				t.Errorf("FPDU %d: %s = %q, want %q", i, k, got, v)
			}
		}
		if n := field(fpdus[i], "note"); !strings.Contains(n, notes[i]) {
			t.Errorf("FPDU %d: note %q, want %q in it", i, n, notes[i])
		}
	}
	stdout, _, code := runIwarp(t, "dump", file)
	if code != 0 || !strings.Contains(stdout, "RDMAP Atomic Request payload 52") || !strings.Contains(stdout, "RDMAP Atomic Response payload 12") {
		t.Errorf("text dump:\n%s", stdout)
	}

	// tshark shows the same values for the fields both decode.
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	pairs := [][2]string{{"iwarp_rdma.opcode", "opcode"}, {"iwarp_ddp.qn", "ddp.qn"}, {"iwarp_ddp.msn", "ddp.msn"},
		{"iwarp_rdma.atomic.opcode", "atomic.aopcode"}, {"iwarp_rdma.atomic.request_identifier", "atomic.request_id"},
		{"iwarp_rdma.atomic.remote_stag", "atomic.stag"}, {"iwarp_rdma.atomic.remote_tagged_offset", "atomic.to"},
		{"iwarp_rdma.atomic.add_data", "atomic.add_data"}, {"iwarp_rdma.atomic.add_mask", "atomic.add_mask"},
		{"iwarp_rdma.atomic.swap_data", "atomic.swap_data"}, {"iwarp_rdma.atomic.swap_mask", "atomic.swap_mask"},
		{"iwarp_rdma.atomic.compare_data", "atomic.compare_data"}, {"iwarp_rdma.atomic.compare_mask", "atomic.compare_mask"},
		{"iwarp_rdma.atomic.original_request_identifier", "atomic_response.original_request_id"},
		{"iwarp_rdma.atomic.original_remote_data_value", "atomic_response.original_value"}}
	args := append([]string{"-r", file, "-Y", "iwarp_mpa.fpdu", "-T", "fields", "-E", "separator=|"}, tsharkArgs...)
	for _, p := range pairs {
		args = append(args, "-e", p[0])
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(fpdus) {
		t.Fatalf("tshark finds %d FPDUs, dump %d", len(lines), len(fpdus))
	}
	// tshark has no field for Immediate Data, and decodes a reserved
	// AOpCode's data as neither add nor swap.
	for i, line := range lines {
		vals := strings.Split(line, "|")
		for j, p := range pairs {
			d := field(fpdus[i], p[1])
			if i == 7 && strings.Contains(p[1], "atomic.") && vals[j] == "" {
				continue
			}
			if (vals[j] == "") != (d == "") || (d != "" && !sameNum(vals[j], d)) {
				t.Errorf("FPDU %d: tshark %s = %q, dump %s = %q", i, p[0], vals[j], p[1], d)
			}
		}
	}
}

func sameNum(a, b string) bool {
	var x, y uint64
	_, e1 := fmt.Sscan(a, &x)
	_, e2 := fmt.Sscan(b, &y)
	if strings.HasPrefix(a, "0x") {
		_, e1 = fmt.Sscanf(a, "0x%x", &x)
	}
	return e1 == nil && e2 == nil && x == y
}
