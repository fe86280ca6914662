package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/web"
)

// TestReplayInBrowser runs web/e2e/replay.test.mjs in each browser
// installed (eachBrowser: Debian's chromium and firefox-esr, a subtest
// each) against the demo page with the browser peer built now. For each
// bundled capture it gives the script what "iwarp dump --json" prints
// and the octets each RDMA Write and Read Response carries (from
// capture.Decode, not from the model the page plays); the script plays
// the capture, chosen in the menu and again dropped on the page as a
// file, record by record and checks the page's rows and the bytes in the
// grids against them. It also gives the script bad files
// (truncated, a pcapng with a block type nobody defined, no iWARP,
// random bytes, 1 GiB) and a capture of 100,000 FPDUs to time, and
// serves a capture the way "iwarp replay" does. Screenshots go to
// .artifacts/replay-e2e/BROWSER. A browser's subtest is skipped only
// when the browser or node is not installed.
func TestReplayInBrowser(t *testing.T) {
	var (
		assets web.Assets // built for the first browser, served to each
		names  []string
	)
	dir := t.TempDir() // the captures and expectations, written once
	eachBrowser(t, func(t *testing.T, b browserTest) {
		if assets == nil {
			assets, names = replayFiles(t, b.root, dir)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		url := serveDemo(t, assets)

		artifacts := filepath.Join(b.root, ".artifacts", "replay-e2e", b.name)
		nj, _ := json.Marshal(names)
		cmd := exec.CommandContext(ctx, b.node, "replay.test.mjs", url)
		cmd.Dir = b.e2e
		cmd.Env = append(b.env(artifacts), "IWARP_REPLAY_DATA="+dir, "IWARP_REPLAY_CAPTURES="+string(nj))
		if raceEnabled {
			cmd.Env = append(cmd.Env, "IWARP_E2E_MIN_RATE=400", "IWARP_E2E_MAX_DECODE_MS=15000")
			t.Log("built with -race: the page must draw 400 segments a second, not 1000")
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("replay.test.mjs in %s (%.1f s):\n%s", b.name, time.Since(start).Seconds(), out)
		if err != nil {
			t.Fatalf("the browser test failed in %s: %v (screenshots in %s)", b.name, err, artifacts)
		}
	})
}

// replayFiles builds the page's files with the browser peer built now
// from the repository at root, with a capture where "iwarp replay"
// serves it, and writes in dir what replay.test.mjs reads: each bundled
// capture (its name in names) with its expectations, the bad files and
// the capture of 100,000 FPDUs.
func replayFiles(t *testing.T, root, dir string) (assets web.Assets, names []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gz, execJS, err := web.BuildWasm(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	assets, err = web.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	assets[web.WasmGzName], assets[web.WasmExecName] = gz, execJS

	var index []struct{ File string }
	if err := json.Unmarshal(assets["captures/index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index) < 5 {
		t.Fatalf("%d bundled captures", len(index))
	}
	for _, c := range index {
		names = append(names, c.File)
		writeExpectations(t, dir, c.File, assets["captures/"+c.File])
	}
	siw := assets["captures/siw-terminate.pcap"]
	badFiles(t, dir, siw)
	for _, name := range []string{"dtls-cert.pcapng", "dtls-cert.keylog"} {
		b, err := os.ReadFile(filepath.Join(root, "capture", "replay", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bigCapture(t, filepath.Join(dir, "fpdus-100000.pcap"), 100000)
	assets["replay/siw-terminate.pcap"] = siw // as "iwarp replay" serves it
	return assets, names
}

// placed is what an RDMA Write or Read Response carries, for the
// browser test to find in the grid.
type placed struct {
	N     int    `json:"n"`
	Owner string `json:"owner"`
	STag  uint32 `json:"stag"`
	TO    uint64 `json:"to"`
	Hex   string `json:"hex"`
}

// writeExpectations writes NAME.dump.jsonl ("iwarp dump --json NAME")
// and NAME.placed.json for the browser test.
func writeExpectations(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"dump", "--json", path}, &out, &errb); code != 0 {
		t.Fatalf("dump %s: %s", name, errb.String())
	}
	if err := os.WriteFile(path+".dump.jsonl", out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := capture.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// A tagged segment that a Terminate names, by the DDP header it
	// carries (RFC 5040 §4.8), was refused by its receiver.
	type named struct {
		peer string // the refused segment's receiver: the Terminate's sender
		stag uint32
		to   uint64
	}
	refused := map[named]bool{}
	for _, r := range recs {
		if r.Terminate == nil || len(r.Raw) < ddp.UntaggedHeaderLen {
			continue
		}
		tm, _, err := rdmap.ParseTerminate(r.Raw[ddp.UntaggedHeaderLen:])
		if err != nil || !tm.D {
			continue
		}
		if h, _, err := ddp.ParseHeader(tm.DDPHeader); err == nil && h.Tagged {
			refused[named{r.Src, h.STag, h.TO}] = true
		}
	}
	ps := []placed{}
	for _, r := range recs {
		// Zero-length Writes (an RTR) place nothing.
		if r.DDP == nil || !r.DDP.Tagged || r.CRC == capture.CRCBad || len(r.Raw) <= ddp.TaggedHeaderLen || refused[named{r.Dst, r.DDP.STag, r.DDP.TO}] {
			continue
		}
		ps = append(ps, placed{N: r.N, Owner: r.Dst, STag: r.DDP.STag, TO: r.DDP.TO, Hex: hex.EncodeToString(r.Raw[ddp.TaggedHeaderLen:])})
	}
	if len(ps) == 0 && (name == "siw-terminate.pcap" || name == "rping-tcp.pcap") {
		t.Fatalf("%s: no Write or Read Response found", name)
	}
	j, _ := json.Marshal(ps)
	if err := os.WriteFile(path+".placed.json", j, 0o644); err != nil {
		t.Fatal(err)
	}
}

// badFiles writes the hostile inputs the page must refuse or report
// and stay usable after.
func badFiles(t *testing.T, dir string, siw []byte) {
	t.Helper()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("truncated.pcap", siw[:len(siw)-10])
	write("random.pcap", bytes.Repeat([]byte("random bytes \x00\x01\x02\xff"), 1000))
	write("unknown-blocks.pcapng", pcapngWithUnknownBlocks(t, siw))
	var buf bytes.Buffer
	w, err := pcapfile.NewWriter(&buf, pcapfile.LinkRaw)
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	for i := 0; i < 3; i++ {
		p := []byte("a UDP datagram, not iWARP")
		pkt := pcapfile.AppendIPHeader(nil, a, b, pcapfile.ProtoUDP, uint16(i), 8+len(p))
		pkt = binary.BigEndian.AppendUint16(pkt, 5000)
		pkt = binary.BigEndian.AppendUint16(pkt, 5001)
		pkt = binary.BigEndian.AppendUint16(pkt, uint16(8+len(p)))
		pkt = append(append(pkt, 0, 0), p...)
		if err := w.WritePacket(time.Unix(int64(i), 0), pkt); err != nil {
			t.Fatal(err)
		}
	}
	write("no-iwarp.pcap", buf.Bytes())
	f, err := os.Create(filepath.Join(dir, "huge.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 1 GiB on paper, no blocks on the disk.
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// pcapngWithUnknownBlocks rewrites a pcap as pcapng with a block of a
// type no specification defines before each packet, which a reader
// skips (the pcapng draft, §3.1: "a block that [it] does not
// understand" is skipped by its length).
func pcapngWithUnknownBlocks(t *testing.T, pcap []byte) []byte {
	t.Helper()
	r, err := pcapfile.NewReader(bytes.NewReader(pcap))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	block := func(b []byte, typ uint32, body []byte) []byte {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		n := uint32(12 + len(body))
		b = le.AppendUint32(b, typ)
		b = le.AppendUint32(b, n)
		b = append(b, body...)
		return le.AppendUint32(b, n)
	}
	var out []byte
	shb := le.AppendUint32(nil, 0x1a2b3c4d)
	shb = le.AppendUint16(shb, 1)
	shb = le.AppendUint16(shb, 0)
	shb = le.AppendUint64(shb, ^uint64(0))
	out = block(out, 0x0a0d0d0a, shb)
	linkSet := false
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		if !linkSet {
			idb := le.AppendUint16(nil, uint16(p.LinkType))
			idb = le.AppendUint16(idb, 0)
			idb = le.AppendUint32(idb, 65535)
			out = block(out, 1, idb)
			linkSet = true
		}
		out = block(out, 0x0badf00d, []byte("a block type nobody defined"))
		ts := uint64(p.Time.UnixMicro())
		epb := le.AppendUint32(nil, 0)
		epb = le.AppendUint32(epb, uint32(ts>>32))
		epb = le.AppendUint32(epb, uint32(ts))
		epb = le.AppendUint32(epb, uint32(len(p.Data)))
		epb = le.AppendUint32(epb, uint32(p.OrigLen))
		epb = append(epb, p.Data...)
		out = block(out, 6, epb)
	}
	return out
}

// bigCapture writes an MPA connection carrying n FPDUs, each an RDMA
// Write of 16 octets into one 4 KiB region.
func bigCapture(t testing.TB, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pcapfile.NewWriter(f, pcapfile.LinkEthernet)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := pcapfile.NewConnWriter(w, netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:4791"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	if err := cw.Open(t0); err != nil {
		t.Fatal(err)
	}
	req := mpa.Frame{Rev: 1, CRC: true}
	rep := mpa.Frame{Reply: true, Rev: 1, CRC: true}
	if err := cw.Write(t0, true, req.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if err := cw.Write(t0, false, rep.Append(nil)); err != nil {
		t.Fatal(err)
	}
	o := mpa.Options{CRC: true}
	var stream []byte
	pos := uint64(0)
	for i := 0; i < n; i++ {
		h := ddp.Header{Tagged: true, Last: true, DV: ddp.Version, RsvdULP: [5]byte{byte(rdmap.OpWrite)}, STag: 0x1000, TO: 0x10000 + uint64(i*16%4096)}
		seg := append(h.Append(nil), fmt.Sprintf("write #%09d", i)...)
		before := len(stream)
		stream, err = mpa.AppendFPDU(stream, pos, o, seg)
		if err != nil {
			t.Fatal(err)
		}
		pos += uint64(len(stream) - before)
		if len(stream) >= 1400 || i == n-1 {
			if err := cw.Write(t0.Add(time.Duration(i)*time.Microsecond), true, stream); err != nil {
				t.Fatal(err)
			}
			stream = stream[:0]
		}
	}
	if err := cw.Close(t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
}
