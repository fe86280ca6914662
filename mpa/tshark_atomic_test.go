//go:build !js

package mpa

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// traceRecorder turns Config.Trace's octets (a dialer's: fromLocal is
// the client's) into a pcap of one TCP connection whose every MPA unit
// (the startup frames, then each FPDU) is a TCP segment of its own.
type traceRecorder struct {
	mu    sync.Mutex
	buf   [2][]byte // client's, server's octets not yet framed
	start [2]bool   // the startup frame is past
	units []traceUnit
}

type traceUnit struct {
	t          time.Time
	fromClient bool
	b          []byte
}

// tracer is Config.Trace of the one connection recorded.
func (r *traceRecorder) tracer(_, _ net.Addr) Tracer { return TraceFunc(r.trace) }

func (r *traceRecorder) trace(fromClient bool, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := 1
	if fromClient {
		d = 0
	}
	r.buf[d] = append(r.buf[d], b...)
	for {
		n := 0
		if !r.start[d] {
			_, m, err := ParseFrame(r.buf[d])
			if err != nil {
				return
			}
			n, r.start[d] = m, true
		} else {
			m, ok := FPDULen(r.buf[d], 0, Options{CRC: true})
			if !ok || len(r.buf[d]) < m {
				return
			}
			n = m
		}
		r.units = append(r.units, traceUnit{time.Now(), fromClient, bytes.Clone(r.buf[d][:n])})
		r.buf[d] = r.buf[d][n:]
	}
}

// write writes the recorded connection as a pcap file.
func (r *traceRecorder) write(t *testing.T, file string, client, server netip.AddrPort) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pcapfile.NewWriter(f, pcapfile.LinkEthernet)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := pcapfile.NewConnWriter(w, client, server)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(r.units) == 0 {
		t.Fatal("nothing recorded")
	}
	must(cw.Open(r.units[0].t))
	for _, u := range r.units {
		must(cw.Write(u.t, u.fromClient, u.b))
	}
	must(cw.Close(r.units[len(r.units)-1].t))
	if len(r.buf[0])+len(r.buf[1]) != 0 {
		t.Fatalf("%d and %d octets left unframed", len(r.buf[0]), len(r.buf[1]))
	}
}

// atomicFields are the fields of tshark's DDP/RDMAP dissector (Wireshark
// 4.0, `tshark -G fields | grep iwarp_rdma`) that RFC 7306's messages
// show, after the MPA and DDP ones.
var atomicFields = []string{
	"tcp.srcport", "iwarp_mpa.ulpdulength", "iwarp_mpa.crc_check",
	"iwarp_ddp.tagged_flag", "iwarp_ddp.last_flag", "iwarp_ddp.stag", "iwarp_ddp.tagged_offset",
	"iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo",
	"iwarp_rdma.version", "iwarp_rdma.opcode",
	"iwarp_rdma.atomic.opcode", "iwarp_rdma.atomic.request_identifier",
	"iwarp_rdma.atomic.remote_stag", "iwarp_rdma.atomic.remote_tagged_offset",
	"iwarp_rdma.atomic.add_data", "iwarp_rdma.atomic.add_mask",
	"iwarp_rdma.atomic.swap_data", "iwarp_rdma.atomic.swap_mask",
	"iwarp_rdma.atomic.compare_data", "iwarp_rdma.atomic.compare_mask",
	"iwarp_rdma.atomic.original_request_identifier", "iwarp_rdma.atomic.original_remote_data_value",
	"iwarp_rdma.term_layer", "iwarp_rdma.term_etype_rdma", "iwarp_rdma.term_errcode_rdma",
}

// tsharkFields runs `tshark -r file -T fields -e ...` over the FPDUs of a
// capture and returns one map of field values per FPDU.
func tsharkFields(t *testing.T, tshark, file string, fields []string) []map[string]string {
	t.Helper()
	args := append([]string{"-r", file, "-Y", "iwarp_mpa.fpdu", "-T", "fields", "-E", "separator=|", "-E", "occurrence=a"}, tsharkArgs...)
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark -T fields: %v", err)
	}
	var rows []map[string]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		vals := strings.Split(line, "|")
		if len(vals) != len(fields) {
			t.Fatalf("tshark line %q has %d fields, want %d", line, len(vals), len(fields))
		}
		m := map[string]string{}
		for i, f := range fields {
			if vals[i] != "" {
				m[f] = vals[i]
			}
		}
		rows = append(rows, m)
	}
	return rows
}

// TestTsharkAtomics records a live MPA connection (Config.Trace) on which
// one queue pair sends RFC 7306's messages — masked FetchAdd and CmpSwap,
// Immediate Data alone, with Solicited Event and after an RDMA Write —
// and the other answers the atomics, then refuses a misaligned one with a
// Terminate; tshark must find every FPDU with a good CRC and show every
// field as sent.
func TestTsharkAtomics(t *testing.T) {
	tshark := needTshark(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	l, err := Listen(context.Background(), "tcp4", "127.0.0.1:0", &Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan error, 1)
	go func() {
		r, err := l.Accept(tctx(t))
		if err == nil {
			_, err = r.Accept(b.QP, nil)
		}
		acc <- err
	}()
	rec := &traceRecorder{}
	ac, err := Dial(tctx(t), "tcp4", l.Addr().String(), a.QP, &Config{Trace: rec.tracer})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if err := <-acc; err != nil {
		t.Fatal(err)
	}

	target, _ := b.PD.RegisterMemory(make([]byte, 64), 0x7000, rdmap.RemoteAtomic|rdmap.RemoteWrite)
	word := func(off int) []byte { return target.Bytes()[off : off+8] }
	binary.NativeEndian.PutUint64(word(0), 0x00000001_fffffffe)
	binary.NativeEndian.PutUint64(word(8), 0x1111_2222_3333_4444)
	rbuf := b.Reg(t, 32, rdmap.LocalWrite)
	for i := range 3 {
		b.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(8 * i), Length: 8}}})
	}
	res := a.Reg(t, 8, rdmap.LocalWrite)
	src := a.Reg(t, 16, 0)
	copy(src.Bytes(), "written then imm")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	stag := target.STag()
	must(a.QP.PostAtomic(rdmap.AtomicWR{ID: 1, Op: rdmap.FetchAdd, Add: 0x00000001_00000003, AddMask: 0x80000000_80000000, Masked: true,
		Local: rdmap.SGE{MR: res, Length: 8}, RemoteSTag: stag, RemoteTO: 0x7000}))
	waitC(t, a.SCQ)
	must(a.QP.PostAtomic(rdmap.AtomicWR{ID: 2, Op: rdmap.CmpSwap, Compare: 0x1111_2222_0000_0000, CompareMask: 0xffff_ffff_0000_0000,
		Swap: 0xaaaa_bbbb_cccc_dddd, SwapMask: 0x0000_0000_ffff_ffff, Masked: true, Local: rdmap.SGE{MR: res, Length: 8}, RemoteSTag: stag, RemoteTO: 0x7008}))
	waitC(t, a.SCQ)
	must(a.QP.PostSend(rdmap.SendWR{ID: 3, WithImm: true, Imm: 0x0102030405060708}))
	waitC(t, a.SCQ)
	waitC(t, b.RCQ)
	must(a.QP.PostWrite(rdmap.WriteWR{ID: 4, SGL: []rdmap.SGE{{MR: src, Length: 16}}, RemoteSTag: stag, RemoteTO: 0x7020, WithImm: true, Imm: 16, Solicited: true}))
	waitC(t, a.SCQ)
	waitC(t, b.RCQ)
	// A misaligned FetchAdd: RFC 7306 §8.2's Terminate.
	must(a.QP.PostAtomic(rdmap.AtomicWR{ID: 5, Op: rdmap.FetchAdd, Add: 1, Local: rdmap.SGE{MR: res, Length: 8}, RemoteSTag: stag, RemoteTO: 0x7004}))
	if c := waitC(t, a.SCQ); c.Status != rdmap.StatusRemOpErr || !errors.Is(c.Err, term.RDMAPCatastrophicStream) {
		t.Fatalf("misaligned FetchAdd: %+v", c)
	}
	<-b.QP.Terminated()
	ac.Close()

	file := filepath.Join(t.TempDir(), "atomics.pcap")
	rec.write(t, file, netip.MustParseAddrPort(ac.LocalAddr().String()), netip.MustParseAddrPort(ac.RemoteAddr().String()))
	rows := tsharkFields(t, tshark, file, atomicFields)
	clientPort := fmt.Sprint(ac.LocalAddr().(*net.TCPAddr).Port)

	x := func(v uint64) string { return fmt.Sprint(v) }
	type want struct {
		client bool
		f      map[string]string
	}
	untagged := func(op, qn, msn, ulpdu int) map[string]string {
		return map[string]string{"iwarp_ddp.tagged_flag": "0", "iwarp_ddp.last_flag": "1", "iwarp_ddp.qn": x(uint64(qn)), "iwarp_ddp.msn": x(uint64(msn)),
			"iwarp_ddp.mo": "0", "iwarp_rdma.version": "1", "iwarp_rdma.opcode": x(uint64(op)), "iwarp_mpa.ulpdulength": x(uint64(ulpdu))}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	wants := []want{
		// The RTR (RFC 6581, a zero-length RDMA Write).
		{true, map[string]string{"iwarp_ddp.tagged_flag": "1", "iwarp_rdma.opcode": "0", "iwarp_mpa.ulpdulength": "14"}},
		// Figure 4 / A.1: FetchAdd, masked.
		{true, with(untagged(10, 1, 1, 18+52), "iwarp_rdma.atomic.opcode", "0", "iwarp_rdma.atomic.request_identifier", "1",
			"iwarp_rdma.atomic.remote_stag", x(uint64(stag)), "iwarp_rdma.atomic.remote_tagged_offset", x(0x7000),
			"iwarp_rdma.atomic.add_data", x(0x00000001_00000003), "iwarp_rdma.atomic.add_mask", x(0x80000000_80000000),
			"iwarp_rdma.atomic.compare_data", "0", "iwarp_rdma.atomic.compare_mask", x(^uint64(0)))},
		// Figure 6 / A.2: its Response, on queue 3.
		{false, with(untagged(11, 3, 1, 18+12), "iwarp_rdma.atomic.original_request_identifier", "1",
			"iwarp_rdma.atomic.original_remote_data_value", x(0x00000001_fffffffe))},
		// CmpSwap, masked.
		{true, with(untagged(10, 1, 2, 18+52), "iwarp_rdma.atomic.opcode", "2", "iwarp_rdma.atomic.request_identifier", "2",
			"iwarp_rdma.atomic.remote_stag", x(uint64(stag)), "iwarp_rdma.atomic.remote_tagged_offset", x(0x7008),
			"iwarp_rdma.atomic.swap_data", x(0xaaaa_bbbb_cccc_dddd), "iwarp_rdma.atomic.swap_mask", x(0x0000_0000_ffff_ffff),
			"iwarp_rdma.atomic.compare_data", x(0x1111_2222_0000_0000), "iwarp_rdma.atomic.compare_mask", x(0xffff_ffff_0000_0000))},
		{false, with(untagged(11, 3, 2, 18+12), "iwarp_rdma.atomic.original_request_identifier", "2",
			"iwarp_rdma.atomic.original_remote_data_value", x(0x1111_2222_3333_4444))},
		// Figure 7 / A.3: Immediate Data (Wireshark 4.0 names no field for
		// its 8 octets: dump decodes them).
		{true, untagged(8, 0, 1, 18+8)},
		// An RDMA Write, then Immediate Data with SE.
		{true, map[string]string{"iwarp_ddp.tagged_flag": "1", "iwarp_rdma.opcode": "0", "iwarp_ddp.stag": x(uint64(stag)),
			"iwarp_ddp.tagged_offset": x(0x7020), "iwarp_mpa.ulpdulength": x(14 + 16)}},
		{true, untagged(9, 0, 2, 18+8)},
		// The misaligned FetchAdd, and the responder's Terminate: RDMAP,
		// Remote Operation Error, Catastrophic error localized to RDMAP
		// Stream (0x0/0x2/0x07).
		{true, with(untagged(10, 1, 3, 18+52), "iwarp_rdma.atomic.remote_tagged_offset", x(0x7004))},
		{false, with(untagged(7, 2, 1, 18+4+2+18), "iwarp_rdma.term_layer", "0", "iwarp_rdma.term_etype_rdma", "2", "iwarp_rdma.term_errcode_rdma", "7")},
	}
	defer func() {
		if t.Failed() {
			t.Logf("tshark -V:\n%s", tsharkVerbose(tshark, file))
		}
	}()
	if len(rows) != len(wants) {
		t.Fatalf("tshark found %d FPDUs, want %d: %v", len(rows), len(wants), rows)
	}
	// In order in each direction (the trace sees a reply read before the
	// write that caused it returns, so the two directions interleave
	// loosely).
	for _, client := range []bool{true, false} {
		var got []map[string]string
		for _, r := range rows {
			if (r["tcp.srcport"] == clientPort) == client {
				got = append(got, r)
			}
		}
		i := 0
		for _, w := range wants {
			if w.client != client {
				continue
			}
			if i >= len(got) {
				t.Fatalf("from client %v: tshark found %d FPDUs", client, len(got))
			}
			for k, v := range w.f {
				if !sameNumber(got[i][k], v) {
					t.Errorf("FPDU %d from client %v: %s = %q, sent %s", i, client, k, got[i][k], v)
				}
			}
			i++
		}
	}
	// tshark's verdict on each CRC: "CRC check: 0x... (Good CRC32)".
	text := tsharkVerbose(tshark, file)
	if n := strings.Count(text, "(Good CRC32)"); n != len(wants) || strings.Contains(text, "Bad CRC32") {
		t.Errorf("%d good CRCs of %d FPDUs", n, len(wants))
	}
	// IWARP_KEEP_PCAP=dir keeps the capture, to look at it.
	if dir := os.Getenv("IWARP_KEEP_PCAP"); dir != "" {
		if b, err := os.ReadFile(file); err == nil {
			os.WriteFile(filepath.Join(dir, "atomics.pcap"), b, 0o644)
		}
	}
	t.Logf("tshark decodes %d FPDUs of atomics and immediate data, every CRC good", len(rows))
}
