package perftest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	icapture "github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/ddp"
	tsharkopt "github.com/iwarpgo/iwarp/internal/tshark"
	"github.com/iwarpgo/iwarp/mpa"
)

// capture records the MPA byte streams of a session's connections, as
// traced by mpa.Config.Trace (a dialing client) or copied by a relay (in
// front of a listener, whose Trace cannot tell its connections apart),
// and writes them as a pcap of synthesized Ethernet/IPv4/TCP packets in
// which each startup frame and each FPDU has a TCP segment of its own.
type capture struct {
	mu    sync.Mutex
	conns []*capConn
}

type capConn struct {
	c              *capture
	client, server netip.AddrPort
	chunks         []capChunk
	bound          bool
}

type capChunk struct {
	t          time.Time
	fromClient bool
	b          []byte
}

func (c *capture) conn() *capConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := &capConn{c: c}
	c.conns = append(c.conns, cc)
	return cc
}

func (cc *capConn) record(fromClient bool, b []byte) {
	cc.c.mu.Lock()
	defer cc.c.mu.Unlock()
	cc.chunks = append(cc.chunks, capChunk{time.Now(), fromClient, append([]byte(nil), b...)})
}

func (cc *capConn) bind(client, server net.Addr) {
	cc.c.mu.Lock()
	defer cc.c.mu.Unlock()
	ap := func(a net.Addr) netip.AddrPort {
		t := a.(*net.TCPAddr).AddrPort()
		return netip.AddrPortFrom(t.Addr().Unmap(), t.Port())
	}
	cc.client, cc.server, cc.bound = ap(client), ap(server), true
}

// stream returns what one direction carried.
func (cc *capConn) stream(fromClient bool) []byte {
	cc.c.mu.Lock()
	defer cc.c.mu.Unlock()
	var b []byte
	for _, ch := range cc.chunks {
		if ch.fromClient == fromClient {
			b = append(b, ch.b...)
		}
	}
	return b
}

// units cuts an MPA stream without Markers into its startup frame and its
// FPDUs; what is left at the end (a truncated unit) comes last.
func units(b []byte) [][]byte {
	var out [][]byte
	if len(b) < mpa.FrameHeaderLen {
		return [][]byte{b}
	}
	n := mpa.FrameHeaderLen + int(binary.BigEndian.Uint16(b[mpa.FrameHeaderLen-2:]))
	if n > len(b) {
		return [][]byte{b}
	}
	out = append(out, b[:n])
	b = b[n:]
	for len(b) >= 2 {
		n := mpa.WireLen(int(binary.BigEndian.Uint16(b)), 0, false)
		if n > len(b) {
			break
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	if len(b) > 0 {
		out = append(out, b)
	}
	return out
}

// writePcap writes every bound connection, its units timed by the chunk
// that completed them, in time order across connections.
func (c *capture) writePcap(path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	type ev struct {
		t          time.Time
		conn       int
		kind       int // 0 open, 1 data, 2 close
		fromClient bool
		b          []byte
	}
	var evs []ev
	for i, cc := range c.conns {
		if !cc.bound || len(cc.chunks) == 0 {
			continue
		}
		evs = append(evs, ev{t: cc.chunks[0].t.Add(-time.Microsecond), conn: i})
		first := map[bool]int{} // the index in evs of each direction's startup frame
		for _, dir := range []bool{true, false} {
			first[dir] = len(evs)
			var buf []byte
			var times []time.Time // the time each octet of buf arrived, per chunk end
			var ends []int
			for _, ch := range cc.chunks {
				if ch.fromClient != dir {
					continue
				}
				buf = append(buf, ch.b...)
				times = append(times, ch.t)
				ends = append(ends, len(buf))
			}
			if len(buf) == 0 {
				continue // a connection the peer closed before a word
			}
			pos := 0
			for _, u := range units(buf) {
				pos += len(u)
				k := sort.SearchInts(ends, pos)
				evs = append(evs, ev{t: times[min(k, len(times)-1)], conn: i, kind: 1, fromClient: dir, b: u})
			}
		}
		// A relay traces each direction on a goroutine of its own, so
		// the Reply may be recorded before the Request that caused it;
		// a dissector needs the Request first.
		if req, rep := first[true], first[false]; req < len(evs) && rep < len(evs) && evs[req].fromClient && !evs[rep].fromClient &&
			!evs[req].t.Before(evs[rep].t) {
			evs[req].t = evs[rep].t.Add(-time.Microsecond / 2)
		}
		last := cc.chunks[len(cc.chunks)-1].t
		evs = append(evs, ev{t: last.Add(time.Microsecond), conn: i, kind: 2})
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].t.Before(evs[b].t) })
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	w, err := pcapfile.NewWriter(bw, pcapfile.LinkEthernet)
	if err != nil {
		return err
	}
	cws := map[int]*pcapfile.ConnWriter{}
	for _, e := range evs {
		cc := c.conns[e.conn]
		switch e.kind {
		case 0:
			cw, err := pcapfile.NewConnWriter(w, cc.client, cc.server)
			if err != nil {
				return err
			}
			cw.MSS = 65000
			cws[e.conn] = cw
			err = cw.Open(e.t)
			if err != nil {
				return err
			}
		case 1:
			if err := cws[e.conn].Write(e.t, e.fromClient, e.b); err != nil {
				return err
			}
		case 2:
			if err := cws[e.conn].Close(e.t); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// wireMsg is one DDP message as the capture shows it, from our own
// decoding of the recorded streams (CRCs checked when crc is set).
type wireMsg struct {
	op      uint8 // RDMAP opcode
	tagged  bool
	stag    uint32
	to      uint64
	qn, msn uint32
	len     int    // the message's payload octets (all its segments)
	payload []byte // untagged: the whole payload
}

// decodeStream decodes one direction of a recorded connection into its
// startup frame and its DDP messages.
func decodeStream(b []byte, crc bool) (mpa.Frame, []wireMsg, error) {
	fr, n, err := mpa.ParseFrame(b)
	if err != nil {
		return fr, nil, err
	}
	b = b[n:]
	var msgs []wireMsg
	var cur *wireMsg
	pos := uint64(0)
	for len(b) > 0 {
		ulpdu, m, err := mpa.ParseFPDU(nil, b, pos, mpa.Options{CRC: crc})
		if err != nil {
			return fr, msgs, fmt.Errorf("FPDU at stream octet %d: %w", pos, err)
		}
		b, pos = b[m:], pos+uint64(m)
		h, hl, err := ddp.ParseHeader(ulpdu)
		if err != nil {
			return fr, msgs, err
		}
		pl := ulpdu[hl:]
		if cur == nil {
			msgs = append(msgs, wireMsg{op: h.RsvdULP[0] & 0xf, tagged: h.Tagged, stag: h.STag, to: h.TO, qn: h.QN, msn: h.MSN})
			cur = &msgs[len(msgs)-1]
		}
		cur.len += len(pl)
		if !h.Tagged {
			cur.payload = append(cur.payload, pl...)
		}
		if h.Last {
			cur = nil
		}
	}
	return fr, msgs, nil
}

// relay accepts connections on a loopback listener and joins each to a
// new connection to target, recording both directions in cap.
func relay(t *testing.T, cap *capture, target string) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		icapture.Relay(context.Background(), l, target, func(c, _ net.Conn) (func(bool, []byte), func()) {
			cc := cap.conn()
			cc.bind(c.RemoteAddr(), c.LocalAddr())
			return cc.record, nil
		})
	}()
	return l.Addr().String()
}

// tsharkCheck dissects a capture with tshark and checks that it finds
// fpdus FPDUs and, when crc is set, each with a good CRC (none bad
// either way). It returns false (having logged why) when tshark is not
// there.
func tsharkCheck(t *testing.T, file string, fpdus int, crc bool) bool {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Logf("tshark not on PATH: the capture %s is not dissected", file)
		return false
	}
	out, err := exec.Command(tshark, append([]string{"-r", file, "-V"}, tsharkopt.Args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	s := string(out)
	found := strings.Count(s, "ULPDU length:")
	good, bad := strings.Count(s, "(Good CRC32)"), strings.Count(s, "(Bad CRC32)")
	switch {
	case found != fpdus || bad != 0 || crc && good != fpdus || !crc && good != 0:
		t.Errorf("tshark: %d FPDUs, %d with a good CRC and %d with a bad one in %s; want %d FPDUs, CRCs %v", found, good, bad, file, fpdus, crc)
	case crc:
		t.Logf("tshark: %d FPDUs in %s, every one with a good CRC", good, filepath.Base(file))
	default:
		t.Logf("tshark: %d FPDUs in %s (no CRCs)", found, filepath.Base(file))
	}
	if dir := os.Getenv("IWARP_PERFTEST_CAPTURES"); dir != "" {
		name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + "-" + filepath.Base(file)
		if err := copyFile(filepath.Join(dir, name), file); err != nil {
			t.Error(err)
		}
	}
	return true
}

// copyFile is for keeping a capture around (IWARP_PERFTEST_CAPTURES).
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
