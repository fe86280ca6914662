package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/internal/pcapfile"
	"github.com/iwarpgo/iwarp/mpa"
)

// recorder writes --pcap captures. For tcp:// it synthesizes an
// Ethernet/IPv4 (or IPv6)/TCP connection around the real MPA byte stream
// of each connection, from the MPA startup frames on, so that Wireshark
// dissects MPA, DDP and RDMAP and checks the CRCs. For sctp:// it writes
// the SCTP packets as they were before DTLS encryption, in raw IPv4 or
// IPv6 packets of protocol 132 between the IP addresses of the two ends
// (this end's shown as the next address when both are the same, as on
// loopback, since pion uses SCTP port 5000 at both ends).
//
// Its methods are safe for concurrent use; mu guards the file and every
// connection's state.
type recorder struct {
	mu      sync.Mutex
	f       *os.File
	bw      *bufio.Writer
	w       *pcapfile.Writer
	err     error
	localIP netip.Addr // sctp://: this end's address in the packets
	ipID    uint16
}

// newRecorder creates the capture file for endpoints of scheme.
func newRecorder(path, scheme string) (*recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	lt := pcapfile.LinkEthernet
	if scheme == "sctp" {
		lt = pcapfile.LinkRaw
	}
	r := &recorder{f: f, bw: bufio.NewWriterSize(f, 256<<10)}
	if r.w, err = pcapfile.NewWriter(r.bw, lt); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// setLocal sets the address of this end in SCTP packets.
func (r *recorder) setLocal(a net.Addr) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ua, ok := a.(*net.UDPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ua.IP); ok && !ip.IsUnspecified() {
			r.localIP = ip.Unmap()
		}
	}
}

// Close flushes and closes the file, returning the first error.
func (r *recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.bw.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	if r.err != nil {
		return fmt.Errorf("writing the capture: %v", r.err)
	}
	return nil
}

func (r *recorder) fail(err error) {
	if err != nil && r.err == nil {
		r.err = err
	}
}

// sctpTrace is sctpddp.Config.Trace: it writes one SCTP packet.
func (r *recorder) sctpTrace(peer net.Addr, outbound bool, packet []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	remote := netip.IPv4Unspecified()
	if ua, ok := peer.(*net.UDPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ua.IP); ok {
			remote = ip.Unmap()
		}
	}
	local := r.localIP
	if !local.IsValid() || local.Is4() != remote.Is4() {
		local = netip.IPv4Unspecified()
		if remote.IsLoopback() {
			local = remote
		} else if remote.Is6() {
			local = netip.IPv6Unspecified()
		}
	}
	if local == remote {
		// Loopback: both ends have one address and pion's SCTP ports
		// are equal too; show this end as the next address so that the
		// two directions differ.
		local = local.Next()
	}
	src, dst := local, remote
	if !outbound {
		src, dst = remote, local
	}
	r.ipID++
	r.fail(r.w.WritePacket(time.Now(), ipPacket(src, dst, 132, r.ipID, packet)))
}

// ipPacket builds an IPv4 or IPv6 packet of protocol proto around payload.
func ipPacket(src, dst netip.Addr, proto uint8, id uint16, payload []byte) []byte {
	if src.Is4() {
		b := make([]byte, 20+len(payload))
		b[0] = 0x45
		binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
		binary.BigEndian.PutUint16(b[4:6], id)
		b[6] = 0x40 // don't fragment
		b[8] = 64
		b[9] = proto
		s, d := src.As4(), dst.As4()
		copy(b[12:16], s[:])
		copy(b[16:20], d[:])
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		for sum > 0xffff {
			sum = sum>>16 + sum&0xffff
		}
		binary.BigEndian.PutUint16(b[10:12], ^uint16(sum))
		copy(b[20:], payload)
		return b
	}
	b := make([]byte, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:6], uint16(len(payload)))
	b[6] = proto
	b[7] = 64
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	copy(b[40:], payload)
	return b
}

// recordMSS is the TCP segment size of recorded connections: loopback's
// MSS (an MTU of 65535 less the IPv4 and TCP headers with timestamps).
const recordMSS = 65483

// tcpRecording is one recorded TCP connection. Octets traced before the
// connection's addresses are known (the startup frames of a dialing
// client) wait in pending.
type tcpRecording struct {
	r       *recorder
	cw      *pcapfile.ConnWriter
	pending []tracedChunk
	closed  bool
	dirs    [2]mpaFramer // client to server, server to client
}

// mpaFramer cuts one direction of an MPA connection into its startup
// frame and whole FPDUs (Markers included), so that each goes into TCP
// segments of its own, as MPA senders aim for: Wireshark finds FPDUs with
// Markers only at the start of a segment. What it cannot frame it passes
// on as it came.
type mpaFramer struct {
	buf   []byte
	frame *mpa.Frame // this direction's startup frame, once complete
	opts  *mpa.Options
	pos   uint64 // stream position after the startup frame
	raw   bool   // framing lost: pass octets through
}

// units returns the complete units buffered so far. peer is the other
// direction's framer, whose startup frame settles the options.
func (f *mpaFramer) units(fromClient bool, peer *mpaFramer) [][]byte {
	var out [][]byte
	for len(f.buf) > 0 {
		if f.raw {
			out = append(out, f.buf)
			f.buf = nil
			break
		}
		if f.frame == nil {
			if len(f.buf) < mpa.FrameHeaderLen {
				break
			}
			n := mpa.FrameHeaderLen + int(binary.BigEndian.Uint16(f.buf[mpa.FrameHeaderLen-2:]))
			if len(f.buf) < n {
				break
			}
			fr, m, err := mpa.ParseFrame(f.buf[:n])
			if err != nil {
				f.raw = true
				continue
			}
			f.frame = &fr
			out = append(out, f.buf[:m])
			f.buf = f.buf[m:]
			continue
		}
		if f.opts == nil {
			if peer.frame == nil {
				break // the peer's frame settles the Markers
			}
			req, rep := f.frame, peer.frame
			if !fromClient {
				req, rep = rep, req
			}
			fromInit, fromResp := mpa.Negotiate(req, rep)
			if fromClient {
				f.opts = &fromInit
			} else {
				f.opts = &fromResp
			}
		}
		n, ok := mpa.FPDULen(f.buf, f.pos, *f.opts)
		if !ok || len(f.buf) < n {
			break
		}
		out = append(out, f.buf[:n])
		f.buf = f.buf[n:]
		f.pos += uint64(n)
	}
	if len(f.buf) == 0 {
		f.buf = nil
	}
	return out
}

type tracedChunk struct {
	t          time.Time
	fromClient bool
	b          []byte
}

func (r *recorder) tcpConn() *tcpRecording { return &tcpRecording{r: r} }

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}

// bind starts the connection in the capture, with its handshake, and
// writes what was traced so far.
func (t *tcpRecording) bind(client, server net.Addr) {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	cw, err := pcapfile.NewConnWriter(r.w, addrPort(client), addrPort(server))
	if err != nil {
		r.fail(err)
		return
	}
	start := time.Now()
	if len(t.pending) > 0 {
		start = t.pending[0].t
	}
	// Segments as large as loopback's: an FPDU is then one segment, as
	// MPA senders aim for, and dissectors that find FPDUs by Markers stay
	// in step.
	cw.MSS = recordMSS
	r.fail(cw.Open(start))
	t.cw = cw
	for _, c := range t.pending {
		r.fail(cw.Write(c.t, c.fromClient, c.b))
	}
	t.pending = nil
}

// write records octets sent by the client (fromClient) or the server.
// For a dialing client it is mpa.Config.Trace: fromLocal is fromClient.
func (t *tcpRecording) write(fromClient bool, b []byte) {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed || r.err != nil {
		return
	}
	d, p := &t.dirs[0], &t.dirs[1]
	if !fromClient {
		d, p = p, d
	}
	d.buf = append(d.buf, b...)
	now := time.Now()
	t.emit(now, fromClient, d.units(fromClient, p))
	// The peer may have waited for this direction's startup frame.
	t.emit(now, !fromClient, p.units(!fromClient, d))
}

// emit writes units of one direction, or keeps them until bind.
func (t *tcpRecording) emit(now time.Time, fromClient bool, units [][]byte) {
	for _, u := range units {
		if t.cw == nil {
			t.pending = append(t.pending, tracedChunk{now, fromClient, append([]byte(nil), u...)})
			continue
		}
		t.r.fail(t.cw.Write(now, fromClient, u))
	}
}

// close writes the connection's FINs.
func (t *tcpRecording) close() {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed || t.cw == nil {
		t.closed = true
		return
	}
	// Octets that never made a whole unit go out as they are.
	now := time.Now()
	for i := range t.dirs {
		if b := t.dirs[i].buf; len(b) > 0 {
			t.r.fail(t.cw.Write(now, i == 0, b))
		}
	}
	t.closed = true
	r.fail(t.cw.Close(now))
}

// discard forgets a connection that never started.
func (t *tcpRecording) discard() {
	t.r.mu.Lock()
	t.closed, t.pending = true, nil
	t.r.mu.Unlock()
}
