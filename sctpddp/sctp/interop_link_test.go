//go:build !js

package sctp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The links of the interop tests: a seeded lossy wrapper, a recorder that
// writes what crossed a UDP socket to a pcap file for tshark, and a UDP
// socket that answers whoever sent to it.

// lossyConn drops, duplicates and reorders the packets that cross a
// packet net.Conn, both ways, with a seeded random source: each packet
// written is dropped with probability loss, else held back and sent after
// the next one with probability reorder, and sent twice with probability
// dup; each packet read is dropped with probability loss.
type lossyConn struct {
	net.Conn

	mu                 sync.Mutex // guards what follows
	loss, dup, reorder float64
	rng                *rand.Rand
	held               []byte // a packet sent after the next one
	dropped            int
	duped              int
	swapped            int
}

func newLossyConn(c net.Conn, seed uint64, loss, dup, reorder float64) *lossyConn {
	return &lossyConn{Conn: c, loss: loss, dup: dup, reorder: reorder, rng: rand.New(rand.NewPCG(seed, 0x6951))}
}

func (c *lossyConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng.Float64() < c.loss {
		c.dropped++
		return len(b), nil
	}
	if c.held == nil && c.rng.Float64() < c.reorder {
		c.held = bytes.Clone(b)
		c.swapped++
		return len(b), nil
	}
	_, err := c.Conn.Write(b)
	if err == nil && c.rng.Float64() < c.dup {
		c.duped++
		_, err = c.Conn.Write(b)
	}
	if c.held != nil {
		c.Conn.Write(c.held)
		c.held = nil
	}
	return len(b), err
}

func (c *lossyConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err != nil {
			return n, err
		}
		c.mu.Lock()
		drop := c.rng.Float64() < c.loss
		if drop {
			c.dropped++
		}
		c.mu.Unlock()
		if !drop {
			return n, nil
		}
	}
}

// stop makes the link clean from now on: the packet held back is sent
// and nothing more is dropped, duplicated or reordered.
func (c *lossyConn) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loss, c.dup, c.reorder = 0, 0, 0
	if c.held != nil {
		c.Conn.Write(c.held)
		c.held = nil
	}
}

// impaired returns how many packets were dropped, duplicated and
// reordered.
func (c *lossyConn) impaired() (dropped, duped, swapped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped, c.duped, c.swapped
}

// captureConn records every packet read from and written to a UDP
// net.Conn as an IPv4/UDP packet between the socket's addresses: RFC
// 6951's datagrams, as a capture on the path would show them.
type captureConn struct {
	net.Conn
	local, remote func() netip.AddrPort

	mu   sync.Mutex // guards what follows
	pkts []capturedPacket
}

type capturedPacket struct {
	t        time.Time
	outbound bool
	data     []byte
}

func newCaptureConn(c net.Conn) *captureConn {
	cc := &captureConn{Conn: c}
	cc.local = func() netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }
	cc.remote = func() netip.AddrPort { return c.RemoteAddr().(*net.UDPAddr).AddrPort() }
	return cc
}

func (c *captureConn) record(outbound bool, b []byte) {
	c.mu.Lock()
	c.pkts = append(c.pkts, capturedPacket{time.Now(), outbound, bytes.Clone(b)})
	c.mu.Unlock()
}

func (c *captureConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil {
		c.record(true, b)
	}
	return n, err
}

func (c *captureConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err == nil {
		c.record(false, b[:n])
	}
	return n, err
}

// waitHeartbeats waits until the socket has carried a HEARTBEAT each way
// and the HEARTBEAT ACK of each (RFC 9260 §8.3), and fails t after
// timeout.
func (c *captureConn) waitHeartbeats(t *testing.T, timeout time.Duration) {
	t.Helper()
	var seen [2][2]bool // [outbound][HEARTBEAT, HEARTBEAT ACK]
	all := [2][2]bool{{true, true}, {true, true}}
	if !waitfor.Until(timeout, func() bool {
		seen = [2][2]bool{}
		c.mu.Lock()
		for _, p := range c.pkts {
			o := 0
			if p.outbound {
				o = 1
			}
			for it := chunk.Chunks(p.data); it.Next(); {
				switch it.Chunk().Type() {
				case chunk.TypeHeartbeat:
					seen[o][0] = true
				case chunk.TypeHeartbeatAck:
					seen[o][1] = true
				}
			}
		}
		c.mu.Unlock()
		return seen == all
	}) {
		t.Fatalf("in %v: HEARTBEAT, HEARTBEAT ACK received %v, sent %v", timeout, seen[0], seen[1])
	}
}

// writePcap writes the recorded packets to a raw-IPv4 pcap file in dir
// and returns its path. The UDP checksum is 0, "no checksum" in IPv4.
func (c *captureConn) writePcap(t *testing.T, dir string) string {
	t.Helper()
	c.mu.Lock()
	pkts := c.pkts
	c.mu.Unlock()
	local, remote := unmap(c.local()), unmap(c.remote())
	path := filepath.Join(dir, "sctp-over-udp.pcap")
	var file bytes.Buffer
	w, err := pcapfile.NewWriter(&file, pcapfile.LinkRaw)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pkts {
		src, dst := local, remote
		if !p.outbound {
			src, dst = remote, local
		}
		b := pcapfile.AppendIPHeader(nil, src.Addr(), dst.Addr(), 17, uint16(i), 8+len(p.data))
		b = binary.BigEndian.AppendUint16(b, src.Port())
		b = binary.BigEndian.AppendUint16(b, dst.Port())
		b = binary.BigEndian.AppendUint16(b, uint16(8+len(p.data)))
		b = append(b, 0, 0)
		b = append(b, p.data...)
		if err := w.WritePacket(p.t, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// tsharkSCTP is what tshark made of a capture of SCTP over UDP.
type tsharkSCTP struct {
	frames int
	// adaptation lists, for each INIT and INIT ACK, its chunk type and
	// the Adaptation Layer Indication's code point ("" if it had none).
	adaptation [][2]string
	chunks     map[string]int // chunk type (decimal) -> count
	// chunksFrom counts chunk types (decimal) by UDP source port.
	chunksFrom map[uint16]map[string]int
	// emptyHeartbeats counts the peer's HEARTBEATs without the mandatory
	// Heartbeat Info parameter (pion/sctp's), which tshark calls
	// malformed; a malformed frame of this package's fails the test.
	emptyHeartbeats int
	// fragments counts, by UDP source port, the DATA chunks that carry
	// part of a message (B and E not both set, RFC 9260 §3.3.1).
	fragments map[uint16]int
}

// dissect has tshark decode the capture at path with udp.port==port as
// SCTP and CRC32c checksums. It fails t if any frame is malformed (but
// for the peer's HEARTBEATs without Heartbeat Info, which it counts), is
// not SCTP or has a bad checksum.
func dissect(t *testing.T, path string, port uint16) tsharkSCTP {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (scripts/test.sh installs it)")
	}
	out, err := exec.Command(tshark, "-r", path, "-n",
		"-o", "sctp.checksum:CRC-32C",
		"-d", "udp.port=="+strconv.Itoa(int(port))+",sctp",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.number", "-e", "frame.protocols", "-e", "_ws.malformed",
		"-e", "sctp.checksum.status", "-e", "sctp.chunk_type",
		"-e", "sctp.parameter_type", "-e", "sctp.adaptation_layer_indication",
		"-e", "udp.srcport", "-e", "sctp.data_b_bit", "-e", "sctp.data_e_bit").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("tshark: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("tshark: %v", err)
	}
	r := tsharkSCTP{chunks: map[string]int{}, chunksFrom: map[uint16]map[string]int{}, fragments: map[uint16]int{}}
	for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 10 {
			t.Fatalf("tshark line %q", line)
		}
		r.frames++
		src, _ := strconv.ParseUint(f[7], 10, 16)
		switch {
		case f[2] != "" && uint16(src) == port && f[4] == "4":
			r.emptyHeartbeats++
		case !strings.Contains(f[1], ":udp:sctp") || f[2] != "":
			t.Errorf("frame %s: protocols %s, malformed %q", f[0], f[1], f[2])
		}
		for _, s := range strings.Split(f[3], ",") {
			if s != "1" { // 1: Good
				t.Errorf("frame %s: checksum status %q", f[0], f[3])
			}
		}
		if f[8] != "" {
			b, e := strings.Split(f[8], ","), strings.Split(f[9], ",")
			for i := range b {
				if i >= len(e) || b[i] != "1" || e[i] != "1" {
					r.fragments[uint16(src)]++
				}
			}
		}
		types := strings.Split(f[4], ",")
		from := r.chunksFrom[uint16(src)]
		if from == nil {
			from = map[string]int{}
			r.chunksFrom[uint16(src)] = from
		}
		for _, ct := range types {
			r.chunks[ct]++
			from[ct]++
		}
		if types[0] == "1" || types[0] == "2" { // INIT, INIT ACK
			code := ""
			if strings.Contains(","+strings.ToLower(f[5])+",", ",0xc006,") {
				code = "?"
				if v, err := strconv.ParseUint(f[6], 0, 32); err == nil {
					code = strconv.FormatUint(v, 10)
				}
			}
			r.adaptation = append(r.adaptation, [2]string{types[0], code})
		}
	}
	return r
}

// checkDissection checks that tshark found an INIT and an INIT ACK, and
// the Adaptation Layer Indication with DDP's code point (RFC 5043 §11.1)
// in every INIT or INIT ACK that want says (by chunk type) carries one.
func checkDissection(t *testing.T, r tsharkSCTP, want map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range r.adaptation {
		seen[a[0]] = true
		switch {
		case want[a[0]] && a[1] != "1":
			t.Errorf("chunk type %s: Adaptation Layer Indication %q, want code point 1", a[0], a[1])
		case !want[a[0]] && a[1] != "":
			t.Errorf("chunk type %s: Adaptation Layer Indication %q, want none", a[0], a[1])
		}
	}
	if !seen["1"] || !seen["2"] {
		t.Errorf("tshark shows INIT %v, INIT ACK %v in %d frames", seen["1"], seen["2"], r.frames)
	}
	if r.chunks["0"] == 0 || r.chunks["3"] == 0 {
		t.Errorf("tshark shows %d DATA and %d SACK chunks", r.chunks["0"], r.chunks["3"])
	}
}

// checkFragmented checks that tshark saw both ends of the captured
// socket fragment messages: this side's reassembly met the peer's
// fragments, and the peer's ours.
func checkFragmented(t *testing.T, r tsharkSCTP, c *captureConn) {
	t.Helper()
	ours, peer := c.local().Port(), c.remote().Port()
	if r.fragments[ours] == 0 || r.fragments[peer] == 0 {
		t.Errorf("DATA chunks carrying fragments: %d from this side (port %d), %d from the peer (port %d); want some from each",
			r.fragments[ours], ours, r.fragments[peer], peer)
	}
}

// checkHeartbeats checks that tshark saw HEARTBEATs each way, each
// answered: a HEARTBEAT and a HEARTBEAT ACK from each end of the captured
// socket (RFC 9260 §8.3).
func checkHeartbeats(t *testing.T, r tsharkSCTP, c *captureConn) {
	t.Helper()
	for _, port := range []uint16{c.local().Port(), c.remote().Port()} {
		if from := r.chunksFrom[port]; from["4"] == 0 || from["5"] == 0 {
			t.Errorf("from port %d: %d HEARTBEAT and %d HEARTBEAT ACK chunks; want some of each", port, from["4"], from["5"])
		}
	}
}

// answeringConn is an unconnected UDP socket as a packet net.Conn: Read
// returns the next datagram and remembers its source, Write sends to the
// last source seen. A server behind a NAT (the guest's) is reached so.
type answeringConn struct {
	*net.UDPConn
	mu   sync.Mutex
	peer netip.AddrPort
}

func (c *answeringConn) Read(b []byte) (int, error) {
	n, from, err := c.UDPConn.ReadFromUDPAddrPort(b)
	if err == nil {
		c.mu.Lock()
		c.peer = from
		c.mu.Unlock()
	}
	return n, err
}

func (c *answeringConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	peer := c.peer
	c.mu.Unlock()
	if !peer.IsValid() {
		return 0, errors.New("answeringConn: nothing received yet")
	}
	return c.UDPConn.WriteToUDPAddrPort(b, peer)
}

func (c *answeringConn) RemoteAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return net.UDPAddrFromAddrPort(c.peer)
}
