//go:build !js

package docs_test

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// peer is a client of "iwarp serve" over sctp://.
type peer struct {
	t        *testing.T
	pd       *rdmap.ProtectionDomain
	scq, rcq *rdmap.CompletionQueue
	qp       *rdmap.QueuePair
	a        *sctpddp.Association
	stag     uint32
	to       uint64
}

// dialServe connects to an sctp:// "iwarp serve --psk psk" and reads the
// region it advertises.
func dialServe(t *testing.T, addr, psk string) *peer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	p := &peer{t: t, pd: dev.NewProtectionDomain(), scq: dev.NewCompletionQueue(64), rcq: dev.NewCompletionQueue(64)}
	var err error
	if p.qp, err = p.pd.NewQueuePair(rdmap.QPConfig{SendCQ: p.scq, RecvCQ: p.rcq}); err != nil {
		t.Fatal(err)
	}
	adv := p.reg(make([]byte, 64))
	p.qp.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: adv, Length: 64}}})
	p.a, err = sctpddp.Dial(ctx, "udp", addr, &sctpddp.Config{PSK: []byte(psk), PSKIdentity: []byte("iwarp"), MTU: sctpddp.LoopbackMTU})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sctpddp.Connect(ctx, p.a, 1, p.qp, sctpddp.SessionConfig{PrivateData: []byte("lab")}); err != nil {
		p.a.Close()
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	if c := p.wait(p.rcq); c.ByteLen != 16 {
		t.Fatalf("advertisement of %d bytes", c.ByteLen)
	}
	b := adv.Bytes()
	p.stag, p.to = binary.BigEndian.Uint32(b), binary.BigEndian.Uint64(b[4:])
	return p
}

func (p *peer) reg(b []byte) *rdmap.MemoryRegion {
	mr, err := p.pd.RegisterMemory(b, 0, rdmap.LocalWrite)
	if err != nil {
		p.t.Fatal(err)
	}
	return mr
}

func (p *peer) wait(cq *rdmap.CompletionQueue) rdmap.Completion {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cq.Wait(ctx)
	if err != nil {
		p.t.Fatalf("no completion: %v", err)
	}
	return c
}

func (p *peer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.qp.Close(ctx)
	// Shutdown, not Close: the session's Terminate, queued by the queue
	// pair's Close, must reach the wire before the association ends
	// (Close drops what the peer has not acknowledged).
	p.a.Shutdown(ctx)
}

// recordSCTP records, with "iwarp serve --pcap", an sctp:// session with
// an RDMA Write, an RDMA Read and a Send, then a second one that ends in
// a Terminate (an RDMA Write to an STag that does not exist).
func recordSCTP(t *testing.T, pcap, keylog string) {
	s := startServe(t, "--listen", "sctp://127.0.0.1:0", "--advertise-send", "--psk", "lab key", "--mr-size", "8192",
		"--pcap", pcap, "--keylog", keylog)
	url := s.next("listening")["url"].(string)
	addr := strings.TrimPrefix(url, "sctp://")

	p := dialServe(t, addr, "lab key")
	s.next("connected")
	data := []byte("placed straight into the region")
	if err := p.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: p.reg(data), Length: uint32(len(data))}}, RemoteSTag: p.stag, RemoteTO: p.to + 64}); err != nil {
		t.Fatal(err)
	}
	sink := p.reg(make([]byte, len(data)))
	if err := p.qp.PostRead(rdmap.ReadWR{ID: 2, Local: rdmap.SGE{MR: sink, Length: uint32(len(data))}, RemoteSTag: p.stag, RemoteTO: p.to + 64}); err != nil {
		t.Fatal(err)
	}
	msg := []byte("hello")
	if err := p.qp.PostSend(rdmap.SendWR{ID: 3, SGL: []rdmap.SGE{{MR: p.reg(msg), Length: uint32(len(msg))}}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if c := p.wait(p.scq); c.Status != rdmap.StatusSuccess {
			t.Fatalf("%v completed with %v", c.Op, c.Status)
		}
	}
	if string(sink.Bytes()) != string(data) {
		t.Fatalf("RDMA Read returned %q", sink.Bytes())
	}
	s.next("recv")
	p.close()
	s.next("closed")

	bad := dialServe(t, addr, "lab key")
	s.next("connected")
	bad.qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: bad.reg([]byte("x")), Length: 1}}, RemoteSTag: bad.stag ^ 0xff00, RemoteTO: bad.to})
	s.next("terminate")
	s.next("closed")
	bad.close()
	s.stop()
}

// TestLuaDissector records DDP over SCTP with "iwarp serve --pcap" and
// has tshark decode it with docs/wireshark/ddp-sctp.lua: the DDP-SSN, the
// session control messages with their IRD/ORD, and Wireshark's own DDP
// and RDMAP fields, with no malformed packet, no expert error and no Lua
// error.
func TestLuaDissector(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (scripts/test.sh installs it)")
	}
	dir := t.TempDir()
	pcap, keylog := filepath.Join(dir, "serve.pcap"), filepath.Join(dir, "keys.log")
	recordSCTP(t, pcap, keylog)

	script, _ := filepath.Abs("wireshark/ddp-sctp.lua")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tshark, append([]string{"-n", "--disable-heuristic", "rpcrdma_iwarp", "--disable-heuristic", "smb_direct_iwarp", "-X", "lua_script:" + script, "-r", pcap}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tshark %v: %v\n%s", args, err, stderr.String())
		}
		if e := stderr.String(); strings.Contains(e, "Lua") || strings.Contains(e, "lua") {
			t.Fatalf("tshark reports a Lua problem:\n%s", e)
		}
		return string(out)
	}

	verbose := run("-V")
	for _, bad := range []string{"Malformed", "Lua Error", "Dissector bug", "[Expert Info (Error"} {
		if strings.Contains(verbose, bad) {
			i := strings.Index(verbose, bad)
			t.Errorf("tshark -V shows %q: ...%s...", bad, verbose[max(0, i-300):min(len(verbose), i+200)])
		}
	}
	for _, want := range []string{
		"DDP over SCTP, DDP Segment Chunk",
		"Enhanced DDP Stream Session Initiate",
		"Enhanced DDP Stream Session Accept",
		"DDP Stream Session Terminate",
		"IRD/ORD (RFC 6581 §9)",
		"DDP header",
		"RDMAP header",
	} {
		if !strings.Contains(verbose, want) {
			t.Errorf("tshark -V does not show %q", want)
		}
	}

	// Field by field: each of these display filters matches a packet.
	for _, filter := range []string{
		"ddp_sctp.function == 5 && ddp_sctp.ird == 8 && ddp_sctp.ord == 8", // Enhanced Initiate, IRD/ORD
		"ddp_sctp.function == 6 && ddp_sctp.ird == 8 && ddp_sctp.ord == 8", // Enhanced Accept
		"ddp_sctp.function == 4", // Terminate
		"ddp_sctp.ssn > 0 && iwarp_ddp.tagged_flag == 1 && iwarp_rdma.opcode == 0 && iwarp_ddp.stag", // RDMA Write
		"iwarp_rdma.opcode == 1 && iwarp_rdma.srcstag && iwarp_rdma.rdmardsz == 31",                  // RDMA Read Request
		"iwarp_rdma.opcode == 2",                       // RDMA Read Response
		"iwarp_rdma.opcode == 3 && iwarp_ddp.msn >= 1", // Send
		"iwarp_rdma.opcode == 7 && iwarp_rdma.term_layer == 1 && iwarp_rdma.term_errcode_ddp_tagged == 0", // Terminate: DDP, Invalid STag
	} {
		out := run("-Y", filter, "-T", "fields", "-e", "frame.number")
		if strings.TrimSpace(out) == "" {
			t.Errorf("no packet matches %q", filter)
		}
	}
}

// TestLuaDissectorDTLS captures a live sctp:// session of "iwarp serve"
// on the loopback interface, encrypted by DTLS, and has tshark decrypt it
// with the key log serve writes (--keylog) and decode it with the Lua
// dissector: after the DTLS handshake the SCTP packets and the DDP over
// SCTP messages appear. It skips when tshark cannot capture here.
func TestLuaDissectorDTLS(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (scripts/test.sh installs it)")
	}
	if testing.Short() {
		t.Skip("live capture skipped in -short mode")
	}
	dir := t.TempDir()
	pcap, keylog := filepath.Join(dir, "live.pcapng"), filepath.Join(dir, "keys.log")
	s := startServe(t, "--listen", "sctp://127.0.0.1:0", "--advertise-send", "--psk", "lab key", "--mr-size", "8192", "--keylog", keylog)
	url := s.next("listening")["url"].(string)
	addr := strings.TrimPrefix(url, "sctp://")
	port := addr[strings.LastIndex(addr, ":")+1:]

	capture := exec.Command(tshark, "-i", "lo", "-f", "udp port "+port, "-w", pcap)
	stderr := &syncBuffer{}
	capture.Stderr = stderr
	if err := capture.Start(); err != nil {
		t.Skipf("tshark cannot start a capture: %v", err)
	}
	done := make(chan struct{})
	go func() { capture.Wait(); close(done) }()
	defer func() {
		capture.Process.Kill()
		<-done
	}()
	capturing := func() bool { return strings.Contains(stderr.String(), "Capturing on") }
	if !waitfor.Until(10*time.Second, func() bool { return capturing() || closed(done) }) {
		t.Skipf("tshark did not start capturing:\n%s", stderr.String())
	}
	if !capturing() {
		t.Skipf("tshark cannot capture on lo here:\n%s", stderr.String())
	}
	// dumpcap says "Capturing on" a little before it captures: datagrams
	// sent to the port until the capture grows show that it does.
	probe, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	captured := func() bool {
		fi, err := os.Stat(pcap)
		if err != nil {
			return false
		}
		before := fi.Size()
		probe.Write([]byte("capture probe, not DTLS"))
		return waitfor.Until(200*time.Millisecond, func() bool {
			fi, err := os.Stat(pcap)
			return err == nil && fi.Size() > before
		})
	}
	if !waitfor.Until(20*time.Second, captured) {
		t.Fatalf("the capture holds none of the probes sent to the port:\n%s", stderr.String())
	}

	p := dialServe(t, addr, "lab key")
	s.next("connected")
	msg := []byte("over DTLS")
	if err := p.qp.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: p.reg(msg), Length: uint32(len(msg))}}}); err != nil {
		t.Fatal(err)
	}
	p.wait(p.scq)
	s.next("recv")
	p.close()
	s.next("closed")
	s.stop()
	// A probe that reaches the capture was sent after the session's last
	// packet, which is in the capture then too.
	if !waitfor.Until(20*time.Second, captured) {
		t.Fatalf("the capture holds none of the probes sent after the session:\n%s", stderr.String())
	}
	capture.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("tshark did not stop")
	}

	hello, _ := exec.Command(tshark, "-n", "-r", pcap, "-Y", "dtls.handshake.type == 1", "-T", "fields", "-e", "frame.number").Output()
	if strings.TrimSpace(string(hello)) == "" {
		t.Fatal("the capture holds no DTLS ClientHello")
	}
	script, _ := filepath.Abs("wireshark/ddp-sctp.lua")
	out, err := exec.Command(tshark, "-n", "-r", pcap, "-o", "tls.keylog_file:"+keylog,
		"--disable-heuristic", "rpcrdma_iwarp", "--disable-heuristic", "smb_direct_iwarp",
		"-X", "lua_script:"+script, "-Y", "ddp_sctp").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	for _, want := range []string{"Enhanced DDP Stream Session Initiate", "Enhanced DDP Stream Session Accept", "Send", "DDP Stream Session Terminate"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the decrypted capture does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "Lua Error") || strings.Contains(string(out), "Malformed") {
		t.Errorf("tshark reports errors:\n%s", out)
	}
}
