package rping

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/tshark"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// capture records one MPA connection as mpa.Config.Trace sees it (the
// octets of the TCP stream each way, from the startup frames on), cut into
// units, the startup frame and each FPDU, so that each goes into a TCP
// segment of its own in the pcap file, as cmd/iwarp's --pcap does.
// Markers are not handled (siw never uses them).
type capture struct {
	mu    sync.Mutex
	dirs  [2]capDir // client to server, server to client
	units []capUnit
}

type capDir struct {
	buf   []byte
	all   []byte // every octet, for decoding afterwards
	frame bool   // the startup frame is out
}

type capUnit struct {
	t          time.Time
	fromClient bool
	b          []byte
}

// trace returns an mpa.Config.Trace for the end that is the client (the
// initiator) or the server.
func (c *capture) trace(client bool) func(local, remote net.Addr) mpa.Tracer {
	return func(_, _ net.Addr) mpa.Tracer {
		return mpa.TraceFunc(func(fromLocal bool, b []byte) { c.add(fromLocal == client, b) })
	}
}

func (c *capture) add(fromClient bool, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 1
	if fromClient {
		i = 0
	}
	d := &c.dirs[i]
	d.buf = append(d.buf, b...)
	d.all = append(d.all, b...)
	now := time.Now()
	for {
		var n int
		if !d.frame {
			if len(d.buf) < mpa.FrameHeaderLen {
				return
			}
			n = mpa.FrameHeaderLen + int(binary.BigEndian.Uint16(d.buf[mpa.FrameHeaderLen-2:]))
		} else {
			if len(d.buf) < mpa.LengthFieldLen {
				return
			}
			n = mpa.WireLen(int(binary.BigEndian.Uint16(d.buf)), 0, false)
		}
		if len(d.buf) < n {
			return
		}
		c.units = append(c.units, capUnit{now, fromClient, append([]byte(nil), d.buf[:n]...)})
		d.buf = d.buf[n:]
		d.frame = true
	}
}

// writePcap writes the connection, between client and server, to file.
func (c *capture) writePcap(file string, client, server netip.AddrPort) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	w, err := pcapfile.NewWriter(bw, pcapfile.LinkEthernet)
	if err != nil {
		return err
	}
	cw, err := pcapfile.NewConnWriter(w, client, server)
	if err != nil {
		return err
	}
	cw.MSS = 65483
	t0 := time.Now()
	if len(c.units) > 0 {
		t0 = c.units[0].t
	}
	if err := cw.Open(t0); err != nil {
		return err
	}
	last := t0
	for _, u := range c.units {
		if err := cw.Write(u.t, u.fromClient, u.b); err != nil {
			return err
		}
		last = u.t
	}
	for i, d := range c.dirs {
		if len(d.buf) > 0 { // a partial unit at the end
			if err := cw.Write(last, i == 0, d.buf); err != nil {
				return err
			}
		}
	}
	if err := cw.Close(last); err != nil {
		return err
	}
	return bw.Flush()
}

// segment is one DDP segment found in a capture.
type segment struct {
	fromClient bool
	hdr        ddp.Header
	op         rdmap.Opcode
	payload    []byte
}

// decoded is a capture read back with package mpa: the startup frames,
// what they negotiated, and every FPDU's DDP segment, CRCs checked.
type decoded struct {
	req, rep mpa.Frame
	crc      bool
	segs     []segment
	fpdus    int
}

// decode parses both directions. Octets after the last whole FPDU are
// ignored (a connection cut in the middle).
func (c *capture) decode() (*decoded, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	up, down := c.dirs[0].all, c.dirs[1].all
	req, n, err := mpa.ParseFrame(up)
	if err != nil {
		return nil, fmt.Errorf("the MPA Request: %w", err)
	}
	rep, m, err := mpa.ParseFrame(down)
	if err != nil {
		return nil, fmt.Errorf("the MPA Reply: %w", err)
	}
	d := &decoded{req: req, rep: rep}
	fromInit, fromResp := mpa.Negotiate(&req, &rep)
	d.crc = fromInit.CRC
	type fp struct {
		fromClient bool
		ulpdu      []byte
	}
	for _, dir := range []struct {
		b          []byte
		o          mpa.Options
		fromClient bool
	}{{up[n:], fromInit, true}, {down[m:], fromResp, false}} {
		b := dir.b
		for len(b) > 0 {
			ulpdu, k, err := mpa.ParseFPDU(nil, b, 0, dir.o)
			if err == mpa.ErrShortFPDU {
				break
			}
			if err != nil {
				return d, fmt.Errorf("an FPDU from the %s: %w", side(dir.fromClient), err)
			}
			b = b[k:]
			d.fpdus++
			h, hl, err := ddp.ParseHeader(ulpdu)
			if err != nil {
				return d, err
			}
			d.segs = append(d.segs, segment{dir.fromClient, h, rdmap.Control(h.RsvdULP[0]).Opcode(), ulpdu[hl:]})
		}
	}
	return d, nil
}

func side(client bool) string {
	if client {
		return "client"
	}
	return "server"
}

// count returns how many segments from the client (or the server) have
// opcode op.
func (d *decoded) count(fromClient bool, op rdmap.Opcode) int {
	n := 0
	for _, s := range d.segs {
		if s.fromClient == fromClient && s.op == op {
			n++
		}
	}
	return n
}

// terminates returns the Terminate messages from the client (or server).
func (d *decoded) terminates(fromClient bool) []segment {
	var out []segment
	for _, s := range d.segs {
		if s.fromClient == fromClient && s.op == rdmap.OpTerminate {
			out = append(out, s)
		}
	}
	return out
}

// tsharkArgs are the options of every tshark run (internal/tshark).
var tsharkArgs = tshark.Args

// tsharkCheck has tshark dissect file: with CRCs in use, every one of
// the fpdus FPDUs must show "Good CRC32" and none "Bad CRC32"; without,
// no CRC verdict may appear. It returns tshark's -V text.
func tsharkCheck(t *testing.T, file string, fpdus int, crc bool) string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("tshark is not installed: the capture is not dissected")
		return ""
	}
	out, err := exec.Command(tshark, append([]string{"-r", file, "-V"}, tsharkArgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	text := string(out)
	good, bad := strings.Count(text, "Good CRC32"), strings.Count(text, "Bad CRC32")
	switch {
	case bad > 0:
		t.Errorf("tshark finds %d FPDUs with a bad CRC in %s", bad, file)
	case crc && good != fpdus:
		t.Errorf("tshark finds %d FPDUs with a good CRC in %s, want %d", good, file, fpdus)
	case !crc && good != 0:
		t.Errorf("CRCs are off, yet tshark finds %d good CRCs in %s", good, file)
	}
	if strings.Contains(text, "Malformed") {
		t.Errorf("tshark finds a malformed packet in %s", file)
	}
	if t.Failed() {
		t.Logf("tshark -V:\n%s", text)
	}
	return text
}
