package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/internal/tshark"
	"github.com/iwarpgo/iwarp/rdmap"
)

// siwCapture is a real capture of the project's rping client against
// Linux siw's rping server (cmd/iwarp/internal/rping's interop test records it): MPA
// Rev 2 with CRCs on and Markers off, IRD 1 ORD 1; Sends, an RDMA Read
// Request and Response, an RDMA Write, and siw's Terminate.
func siwCapture(t *testing.T) string {
	t.Helper()
	const file = "testdata/siw-terminate.pcap"
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	return file
}

func dumpJSON(t *testing.T, file string) []map[string]any {
	t.Helper()
	recs, err := dumpJSONTry(t, file)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// dumpJSONTry runs iwarp dump --json and returns its records.
func dumpJSONTry(t *testing.T, file string) ([]map[string]any, error) {
	stdout, stderr, code := runIwarp(t, "dump", "--json", file)
	if code != 0 {
		return nil, fmt.Errorf("dump %s: exit %d: %s", file, code, stderr)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out, nil
}

func TestDumpSiw(t *testing.T) {
	file := siwCapture(t)
	recs := dumpRecords(t, file)
	const client, server = "10.0.2.2:40000", "10.0.2.15:7174"
	// What the capture holds, in its order; every FPDU is one TCP segment
	// and every message one DDP segment (L set).
	type want struct {
		kind, src string
		len       int
		ddp       string // tagged: "stag/to"; untagged: "qn/msn/mo"
		opcode    int
		op        string
		payload   int
	}
	wants := []want{
		{"mpa_request", client, 24, "", 0, "", 0},
		{"mpa_reply", server, 24, "", 0, "", 0},
		{"fpdu", client, 40, "0/1/0", 3, "Send", 16},
		{"fpdu", server, 52, "1/1/0", 1, "RDMA Read Request", 28},
		{"fpdu", client, 84, "3521144064/94155401899824", 2, "RDMA Read Response", 64},
		{"fpdu", server, 40, "0/1/0", 3, "Send", 16},
		{"fpdu", client, 40, "0/2/0", 3, "Send", 16},
		{"fpdu", server, 84, "934776578/1048576", 0, "RDMA Write", 64},
		{"fpdu", server, 40, "0/2/0", 3, "Send", 16},
		{"fpdu", client, 40, "0/3/0", 3, "Send", 16},
		{"fpdu", client, 40, "0/4/0", 3, "Send", 16},
		{"fpdu", server, 48, "2/1/0", 7, "Terminate", 24},
	}
	if len(recs) != len(wants) {
		t.Fatalf("%d records, want %d: %v", len(recs), len(wants), recs)
	}
	var fpdus []map[string]any
	for i, w := range wants {
		r := recs[i]
		dst := server
		if w.src == server {
			dst = client
		}
		if field(r, "kind") != w.kind || field(r, "src") != w.src || field(r, "dst") != dst || field(r, "len") != fmt.Sprint(w.len) ||
			field(r, "n") != fmt.Sprint(i+1) || field(r, "conn") != "1" || field(r, "transport") != "tcp" {
			t.Errorf("record %d: %v, want %+v", i, r, w)
		}
		if w.kind != "fpdu" {
			if note := field(r, "note"); !strings.Contains(note, "revision 2, CRC on, Markers off, IRD 1 ORD 1, 0 bytes of private data") {
				t.Errorf("record %d: note %q", i, note)
			}
			continue
		}
		fpdus = append(fpdus, r)
		// CRCs are on: each FPDU's CRC field is checked.
		if field(r, "crc") != "good" || field(r, "ddp.last") != "true" {
			t.Errorf("record %d: crc %s, last %s", i, field(r, "crc"), field(r, "ddp.last"))
		}
		tagged := strings.Count(w.ddp, "/") == 1
		ddp := field(r, "ddp.qn") + "/" + field(r, "ddp.msn") + "/" + field(r, "ddp.mo")
		if tagged {
			ddp = field(r, "ddp.stag") + "/" + field(r, "ddp.to")
		}
		if field(r, "ddp.tagged") != fmt.Sprint(tagged) || ddp != w.ddp || field(r, "opcode") != fmt.Sprint(w.opcode) ||
			field(r, "op") != w.op || field(r, "payload_len") != fmt.Sprint(w.payload) {
			t.Errorf("record %d: %v, want %+v", i, r, w)
		}
	}
	// The Read Request reads the client's ping (STag 0xff238f14, TO
	// 0x200000) into the client's sink, where the Read Response places it.
	for k, v := range map[string]string{"sink_stag": "3521144064", "sink_to": "94155401899824", "size": "64", "src_stag": "4280520468", "src_to": "2097152"} {
		if got := field(recs[3], "read_request."+k); got != v {
			t.Errorf("read request %s = %q, want %s", k, got, v)
		}
	}
	// The Terminate as the RFC reads it: layer 2 (LLP), type 1, code 2.
	if tm := field(recs[11], "terminate.layer") + "/" + field(recs[11], "terminate.etype") + "/" + field(recs[11], "terminate.ecode"); tm != "2/1/2" {
		t.Errorf("terminate %s", tm)
	}
	stdout, _, code := runIwarp(t, "dump", file)
	if code != 0 || !strings.Contains(stdout, "asks the peer for 64 bytes") || !strings.Contains(stdout, "MSN 4") ||
		strings.Count(stdout, "CRC good") != 10 || !strings.Contains(stdout, "RDMAP Terminate payload 24") {
		t.Errorf("text dump:\n%s", stdout)
	}

	// The same capture as pcapng decodes the same.
	t.Run("pcapng", func(t *testing.T) {
		editcap, err := exec.LookPath("editcap")
		if err != nil {
			t.Skip("editcap not installed")
		}
		ng := filepath.Join(t.TempDir(), "siw.pcapng")
		if out, err := exec.Command(editcap, "-F", "pcapng", file, ng).CombinedOutput(); err != nil {
			t.Fatalf("editcap: %v %s", err, out)
		}
		a, _ := json.Marshal(recs)
		b, _ := json.Marshal(dumpRecords(t, ng))
		if !bytes.Equal(a, b) {
			t.Errorf("pcapng decodes differently:\n%s\n%s", a, b)
		}
	})

	// tshark finds the same FPDUs with the same fields, and a good CRC in
	// each.
	t.Run("tshark", func(t *testing.T) {
		tshark := tsharkPath(t)
		fields := []string{"ip.src", "tcp.srcport", "tcp.len", "iwarp_mpa.ulpdulength",
			"iwarp_ddp.tagged_flag", "iwarp_ddp.last_flag", "iwarp_ddp.stag", "iwarp_ddp.tagged_offset",
			"iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo", "iwarp_rdma.opcode",
			"iwarp_rdma.sinkstag", "iwarp_rdma.sinkto", "iwarp_rdma.rdmardsz", "iwarp_rdma.srcstag", "iwarp_rdma.srcto",
			"iwarp_rdma.term_layer", "iwarp_rdma.term_etype_llp", "iwarp_rdma.term_errcode", "data.len"}
		args := append([]string{"-r", file, "-Y", "iwarp_mpa.fpdu", "-T", "fields", "-E", "separator=|"}, tsharkArgs...)
		for _, f := range fields {
			args = append(args, "-e", f)
		}
		out, err := exec.Command(tshark, args...).Output()
		if err != nil {
			t.Fatalf("tshark: %v", err)
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) != len(fpdus) {
			t.Fatalf("tshark finds %d FPDUs, dump %d:\n%s", len(lines), len(fpdus), out)
		}
		bit := map[string]string{"true": "1", "false": "0"}
		for i, line := range lines {
			r := fpdus[i]
			vals := strings.Split(line, "|")
			if len(vals) != len(fields) {
				t.Fatalf("tshark line %q", line)
			}
			tv := map[string]string{}
			for j, f := range fields {
				tv[f] = vals[j]
			}
			// The fields that apply to this FPDU, with dump's value.
			d := map[string]string{
				"tcp.len": field(r, "len"), "iwarp_ddp.tagged_flag": bit[field(r, "ddp.tagged")],
				"iwarp_ddp.last_flag": bit[field(r, "ddp.last")], "iwarp_rdma.opcode": field(r, "opcode"),
			}
			// ULPDU_Length: the DDP header (14 octets tagged, 18
			// untagged) and the payload.
			hdr := 18
			if field(r, "ddp.tagged") == "true" {
				hdr = 14
				d["iwarp_ddp.stag"], d["iwarp_ddp.tagged_offset"] = field(r, "ddp.stag"), field(r, "ddp.to")
			} else {
				d["iwarp_ddp.qn"], d["iwarp_ddp.msn"], d["iwarp_ddp.mo"] = field(r, "ddp.qn"), field(r, "ddp.msn"), field(r, "ddp.mo")
			}
			var payload int
			fmt.Sscan(field(r, "payload_len"), &payload)
			d["iwarp_mpa.ulpdulength"] = fmt.Sprint(hdr + payload)
			switch field(r, "op") {
			case "RDMA Read Request":
				d["iwarp_rdma.sinkstag"], d["iwarp_rdma.sinkto"], d["iwarp_rdma.rdmardsz"] = field(r, "read_request.sink_stag"), field(r, "read_request.sink_to"), field(r, "read_request.size")
				d["iwarp_rdma.srcstag"], d["iwarp_rdma.srcto"] = field(r, "read_request.src_stag"), field(r, "read_request.src_to")
			case "Terminate":
				d["iwarp_rdma.term_layer"], d["iwarp_rdma.term_etype_llp"], d["iwarp_rdma.term_errcode"] = field(r, "terminate.layer"), field(r, "terminate.etype"), field(r, "terminate.ecode")
			default:
				d["data.len"] = field(r, "payload_len")
			}
			if src := tv["ip.src"] + ":" + tv["tcp.srcport"]; src != field(r, "src") {
				t.Errorf("FPDU %d: tshark's source %s, dump's %s", i, src, field(r, "src"))
			}
			for _, f := range fields[2:] {
				want, applies := d[f]
				if applies != (tv[f] != "") || (applies && !sameNum(tv[f], want)) {
					t.Errorf("FPDU %d: tshark %s = %q, dump %q", i, f, tv[f], want)
				}
			}
		}
		out, err = exec.Command(tshark, append([]string{"-r", file, "-V"}, tsharkArgs...)...).Output()
		if err != nil {
			t.Fatalf("tshark: %v", err)
		}
		if n := strings.Count(string(out), "(Good CRC32)"); n != len(fpdus) || strings.Contains(string(out), "Bad CRC32") || strings.Contains(string(out), "Malformed") {
			t.Errorf("tshark finds %d good CRCs in %d FPDUs:\n%s", n, len(fpdus), out)
		}
	})
}

func TestDumpErrors(t *testing.T) {
	dir := t.TempDir()
	// Truncated.
	data, err := os.ReadFile(siwCapture(t))
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(dir, "trunc.pcap")
	os.WriteFile(trunc, data[:len(data)-7], 0o644)
	_, stderr, code := runIwarp(t, "dump", trunc)
	if code != 1 || !strings.Contains(stderr, "truncated") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("truncated: exit %d %q", code, stderr)
	}
	// Not a capture.
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("hello, this is not a capture at all"), 0o644)
	_, stderr, code = runIwarp(t, "dump", junk)
	if code != 1 || !strings.Contains(stderr, "not a valid pcap") {
		t.Errorf("junk: exit %d %q", code, stderr)
	}
	// A capture of plain TCP.
	var buf bytes.Buffer
	w, _ := pcapfile.NewWriter(&buf, pcapfile.LinkEthernet)
	cw, _ := pcapfile.NewConnWriter(w, netip.MustParseAddrPort("10.0.0.1:1000"), netip.MustParseAddrPort("10.0.0.2:80"))
	now := time.Now()
	cw.Open(now)
	cw.Write(now, true, []byte("GET / HTTP/1.0\r\n\r\n"))
	cw.Close(now)
	plain := filepath.Join(dir, "http.pcap")
	os.WriteFile(plain, buf.Bytes(), 0o644)
	_, stderr, code = runIwarp(t, "dump", plain)
	if code != 1 || !strings.Contains(stderr, "no iWARP traffic") {
		t.Errorf("plain TCP: exit %d %q", code, stderr)
	}
	// A segment missing: the FPDUs before it, then a note.
	r, err := pcapfile.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var gapped bytes.Buffer
	var gw *pcapfile.Writer
	for i := 0; ; i++ {
		p, err := r.Next()
		if err != nil {
			break
		}
		if gw == nil {
			gw, _ = pcapfile.NewWriter(&gapped, p.LinkType)
		}
		if i != 15 { // packet 16, the client's second Send
			gw.WritePacket(p.Time, p.Data)
		}
	}
	gap := filepath.Join(dir, "gap.pcap")
	os.WriteFile(gap, gapped.Bytes(), 0o644)
	recs := dumpJSON(t, gap)
	var kinds, ops []string
	for _, r := range recs {
		kinds = append(kinds, r["kind"].(string))
		if op, ok := r["op"].(string); ok {
			ops = append(ops, op)
		}
		if r["kind"] == "error" && (!strings.Contains(r["note"].(string), "misses 40 bytes at stream offset 148") || r["conn"] != float64(1) || r["src"] != "10.0.2.2:40000") {
			t.Errorf("gap reported as %v", r)
		}
	}
	// The client's direction stops at the gap; the server's goes on.
	if got := strings.Join(kinds, ","); got != "mpa_request,mpa_reply,fpdu,fpdu,fpdu,error,fpdu,fpdu,fpdu,fpdu" {
		t.Errorf("capture with a gap: %s", got)
	}
	if got := strings.Join(ops, ","); got != "Send,RDMA Read Request,RDMA Read Response,Send,RDMA Write,Send,Terminate" {
		t.Errorf("capture with a gap: ops %s", got)
	}

	// Usage.
	if _, _, code = runIwarp(t, "dump"); code != 2 {
		t.Errorf("no file: exit %d", code)
	}
	if _, stderr, code = runIwarp(t, "dump", "-h"); code != 0 || !strings.Contains(stderr, "Examples:") {
		t.Errorf("-h: exit %d", code)
	}
	if _, _, code = runIwarp(t, "dump", filepath.Join(dir, "missing.pcap")); code != 1 {
		t.Errorf("missing file: exit %d", code)
	}
}

// exercise runs Writes, a Read, Sends and a Send with Invalidate against
// a served region, then closes.
func exercise(t *testing.T, s *server, link endpoint.Flags) {
	cl := exerciseOpen(t, s, link)
	cl.close()
	s.next("closed")
	s.stop()
}

// exerciseOpen runs exercise's operations and leaves the connection
// open.
func exerciseOpen(t *testing.T, s *server, link endpoint.Flags) *client {
	cl := dialServer(t, s.url, link)
	s.next("connected")
	data := bytes.Repeat([]byte{0x5a}, 5000)
	src := cl.reg(data)
	cl.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 5000}}, RemoteSTag: cl.stag, RemoteTO: cl.to + 2048})
	sink := cl.reg(make([]byte, 3000))
	cl.qp.PostRead(rdmap.ReadWR{ID: 2, Local: rdmap.SGE{MR: sink, Length: 3000}, RemoteSTag: cl.stag, RemoteTO: cl.to})
	cl.qp.PostSend(rdmap.SendWR{ID: 3, SGL: []rdmap.SGE{{MR: src, Length: 100}}})
	for range 3 {
		cl.wait(cl.scq)
	}
	s.next("recv")
	return cl
}

// exercised says whether the operations counted in a capture are
// exercise's: serve's advertisement and the client's Send, the Write (in
// segments), the Read Request and its Response.
func exercised(ops map[string]int) bool {
	return ops["Send"] == 2 && ops["RDMA Write"] >= 1 && ops["RDMA Read Request"] == 1 && ops["RDMA Read Response"] >= 1
}

func tsharkPath(t *testing.T) string {
	p, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	return p
}

// tsharkArgs are the options of every dissection (internal/tshark).
var tsharkArgs = tshark.Args

func TestPcapTCP(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		link endpoint.Flags
	}{
		{"crc", nil, endpoint.Flags{}},
		{"markers", []string{"--markers"}, endpoint.Flags{Markers: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "serve.pcap")
			s := startServe(t, append([]string{"--listen", "tcp://127.0.0.1:0", "--mr-size", "16384", "--pcap", file}, tc.args...)...)
			exercise(t, s, tc.link)
			recs := dumpJSON(t, file)
			ops := map[string]int{}
			for _, r := range recs {
				if r["kind"] == "error" {
					t.Errorf("dump: %v", r["note"])
				}
				if r["kind"] == "fpdu" && r["crc"] != "good" {
					t.Errorf("FPDU %v: crc %v", r["n"], r["crc"])
				}
				if op, ok := r["op"].(string); ok {
					ops[op]++
				}
			}
			// The advertisement and the client's Send; the Write in
			// segments; the Read Request and its Response.
			if !exercised(ops) {
				t.Errorf("operations in the capture: %v", ops)
			}

			tshark := tsharkPath(t)
			out, err := exec.Command(tshark, append([]string{"-r", file, "-V"}, tsharkArgs...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("tshark: %v\n%s", err, out)
			}
			text := string(out)
			if strings.Contains(text, "Bad CRC32") || strings.Contains(text, "Malformed") {
				t.Errorf("tshark finds errors:\n%s", text)
			}
			if n := strings.Count(text, "CRC32: 0x"); n == 0 && !strings.Contains(text, "Good CRC32") {
				t.Errorf("tshark shows no checked CRC")
			}
			if !strings.Contains(text, "Read Request") || !strings.Contains(text, "Send") {
				t.Errorf("tshark does not dissect RDMAP:\n%.3000s", text)
			}
		})
	}
}

func TestPcapSCTP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "serve.pcap")
	s := startServe(t, "--listen", "sctp://127.0.0.1:0", "--mr-size", "16384", "--pcap", file)
	exercise(t, s, endpoint.Flags{})
	recs := dumpJSON(t, file)
	kinds, ops := map[string]int{}, map[string]int{}
	for _, r := range recs {
		kinds[r["kind"].(string)]++
		if op, ok := r["op"].(string); ok {
			ops[op]++
		}
	}
	if kinds["error"] != 0 || kinds["session_control"] < 2 || !exercised(ops) {
		t.Errorf("kinds %v, operations %v", kinds, ops)
	}
	tshark := tsharkPath(t)
	out, err := exec.Command(tshark, append([]string{"-r", file, "-T", "fields", "-e", "sctp.data_payload_proto_id"}, tsharkArgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "16") || !strings.Contains(string(out), "17") {
		t.Errorf("tshark finds no PPID 16 and 17:\n%s", out)
	}
}

// A client's recording (the dialing side of tcp://) is a capture too.
func TestPcapClientTCP(t *testing.T) {
	s := startServe(t, "--listen", "tcp://127.0.0.1:0", "--mr-size", "4096")
	file := filepath.Join(t.TempDir(), "client.pcap")
	rec, err := endpoint.NewRecorder(file, "tcp")
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := endpoint.Parse(s.url)
	cl := &client{t: t, dev: rdmap.NewDevice(rdmap.DeviceConfig{})}
	cl.pd = cl.dev.NewProtectionDomain()
	cl.scq, cl.rcq = cl.dev.NewCompletionQueue(16), cl.dev.NewCompletionQueue(16)
	cl.qp, _ = cl.pd.NewQueuePair(rdmap.QPConfig{SendCQ: cl.scq, RecvCQ: cl.rcq})
	adv := cl.reg(make([]byte, 16))
	cl.qp.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: adv, Length: 16}}})
	cl.c, err = endpoint.Dial(t.Context(), ep, &endpoint.Flags{}, rec, cl.qp, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cl.wait(cl.rcq)
	s.next("connected")
	cl.close()
	s.next("closed")
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	recs := dumpJSON(t, file)
	if len(recs) < 3 || recs[0]["kind"] != "mpa_request" || recs[1]["kind"] != "mpa_reply" {
		t.Fatalf("client capture: %v", recs)
	}
	s.stop()
}

// The SCTP packets of a recording, rewritten as Wireshark's "Export PDUs
// to File" writes them (link type 252, tags, then the SCTP packet),
// decode the same.
func TestDumpUpperPDU(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sctp.pcap")
	s := startServe(t, "--listen", "sctp://127.0.0.1:0", "--mr-size", "16384", "--pcap", file)
	exercise(t, s, endpoint.Flags{})
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, _ := pcapfile.NewWriter(&out, pcapfile.LinkUpperPDU)
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		ip := p.Data
		rec := pcapfile.AppendExportedPDU(nil, pcapfile.ExportedPDU{Proto: "sctp",
			Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20])), Payload: ip[20:]})
		w.WritePacket(p.Time, rec)
	}
	upper := filepath.Join(dir, "upper.pcap")
	os.WriteFile(upper, out.Bytes(), 0o644)
	a, _ := json.Marshal(dumpJSON(t, file))
	b, _ := json.Marshal(dumpJSON(t, upper))
	if !bytes.Equal(a, b) {
		t.Errorf("upper PDU capture decodes differently:\n%s\n%s", a, b)
	}
}

// SIGINT stops a recording serve while a client is still connected
// through the relay, and the capture holds the session so far.
func TestPcapTCPStopWhileConnected(t *testing.T) {
	file := filepath.Join(t.TempDir(), "serve.pcap")
	s := startServe(t, "--listen", "tcp://127.0.0.1:0", "--mr-size", "4096", "--pcap", file)
	dialServer(t, s.url, endpoint.Flags{})
	s.next("connected")
	s.stop()
	recs := dumpJSON(t, file)
	if len(recs) < 3 || recs[0]["kind"] != "mpa_request" {
		t.Errorf("capture: %v", recs)
	}
}
