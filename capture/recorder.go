package capture

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/mpa"
)

// Transport is what a Recorder records.
type Transport int

const (
	// TCP: MPA connections, inside synthesized Ethernet/IP/TCP packets.
	TCP Transport = iota
	// SCTP: the SCTP packets of DTLS associations (sctpddp.Config.Trace),
	// inside raw IP packets.
	SCTP
)

// Recorder writes a capture of iWARP sessions as they run. For TCP it
// synthesizes an Ethernet/IPv4 (or IPv6)/TCP connection around the real
// MPA byte stream of each connection, from the MPA startup frames on, so
// that Wireshark dissects MPA, DDP and RDMAP and checks the CRCs. For SCTP
// it writes the SCTP packets as they were before DTLS encryption, in raw
// IPv4 or IPv6 packets of protocol 132 between the IP addresses of the two
// ends (this end's shown as the next address when both are the same, as
// on loopback, since pion uses SCTP port 5000 at both ends).
//
// Each packet goes to the file as it comes (pcapfile.File): the capture
// can be read while it is written, and a process killed leaves it whole
// up to its last packets.
//
// Its methods are safe for concurrent use; those of a nil *Recorder do
// nothing.
type Recorder struct {
	mu      sync.Mutex // guards the file and every connection's state
	f       *pcapfile.File
	err     error
	localIP netip.Addr // SCTP: this end's address in the packets
	ipID    uint16
}

// NewRecorder creates the capture file path for sessions of transport t.
func NewRecorder(path string, t Transport) (*Recorder, error) {
	lt := pcapfile.LinkEthernet
	if t == SCTP {
		lt = pcapfile.LinkRaw
	}
	f, err := pcapfile.CreateFile(path, lt)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f}, nil
}

// SetLocal sets the address of this end in SCTP packets: the UDP address
// a listener or an association's socket is bound to.
func (r *Recorder) SetLocal(a net.Addr) {
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

// Close writes what waits and closes the file, returning the first error
// of the recording.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail(r.f.Close())
	if r.err != nil {
		return fmt.Errorf("writing the capture: %v", r.err)
	}
	return nil
}

func (r *Recorder) fail(err error) {
	if err != nil && r.err == nil {
		r.err = err
	}
}

// SCTPTrace is sctpddp.Config.Trace: it records one SCTP packet that this
// end sent (outbound) or received from peer.
func (r *Recorder) SCTPTrace(peer net.Addr, outbound bool, packet []byte) {
	if r == nil {
		return
	}
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
	ip := pcapfile.AppendIPHeader(nil, src, dst, pcapfile.ProtoSCTP, r.ipID, len(packet))
	r.fail(r.f.WritePacket(time.Now(), append(ip, packet...)))
}

// MSS is the TCP segment size of recorded connections: loopback's MSS (an
// MTU of 65535 less the IPv4 and TCP headers with timestamps). An FPDU is
// then one segment, as MPA senders aim for, and dissectors that find FPDUs
// by Markers stay in step.
const MSS = 65483

// TCPConn is one recorded TCP connection. Octets traced before the
// connection's addresses are known (the startup frames of a dialing
// client) wait until Bind. Its methods are safe for concurrent use.
type TCPConn struct {
	r       *Recorder
	cw      *pcapfile.ConnWriter
	pending []tracedChunk
	closed  bool
	dirs    [2]mpaFramer // client to server, server to client
}

type tracedChunk struct {
	t          time.Time
	fromClient bool
	b          []byte
}

// TCPConn starts recording a connection.
func (r *Recorder) TCPConn() *TCPConn { return &TCPConn{r: r} }

// MPATrace is an mpa.Config.Trace that records each connection as a TCP
// connection of its own: a client's (Dial) when server is false, a
// Listener's when it is true.
func (r *Recorder) MPATrace(server bool) func(local, remote net.Addr) mpa.Tracer {
	return func(local, remote net.Addr) mpa.Tracer {
		c := r.TCPConn()
		if server {
			c.Bind(remote, local)
		} else {
			c.Bind(local, remote)
		}
		return mpaTracer{c, server}
	}
}

// mpaTracer turns one end's view of the stream into the client's and
// the server's.
type mpaTracer struct {
	c      *TCPConn
	server bool
}

func (t mpaTracer) Octets(fromLocal bool, b []byte) { t.c.Trace(fromLocal != t.server, b) }
func (t mpaTracer) Close()                          { t.c.Close() }

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}

// Bind starts the connection between client and server in the capture,
// with its handshake, and writes what was traced so far.
func (t *TCPConn) Bind(client, server net.Addr) {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	cw, err := pcapfile.NewConnWriter(r.f.Writer, addrPort(client), addrPort(server))
	if err != nil {
		r.fail(err)
		return
	}
	start := time.Now()
	if len(t.pending) > 0 {
		start = t.pending[0].t
	}
	cw.MSS = MSS
	r.fail(cw.Open(start))
	t.cw = cw
	for _, c := range t.pending {
		r.fail(cw.Write(c.t, c.fromClient, c.b))
	}
	t.pending = nil
}

// Trace records octets sent by the client (fromClient) or the server:
// each MPA startup frame and FPDU, once whole, goes into a segment of its
// own.
func (t *TCPConn) Trace(fromClient bool, b []byte) {
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

// emit writes units of one direction, or keeps them until Bind.
func (t *TCPConn) emit(now time.Time, fromClient bool, units [][]byte) {
	for _, u := range units {
		if t.cw == nil {
			t.pending = append(t.pending, tracedChunk{now, fromClient, append([]byte(nil), u...)})
			continue
		}
		t.r.fail(t.cw.Write(now, fromClient, u))
	}
}

// Close writes the connection's FINs, after the octets that never made a
// whole frame or FPDU.
func (t *TCPConn) Close() {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed || t.cw == nil {
		t.closed = true
		return
	}
	now := time.Now()
	for i := range t.dirs {
		if b := t.dirs[i].buf; len(b) > 0 {
			r.fail(t.cw.Write(now, i == 0, b))
		}
	}
	t.closed = true
	r.fail(t.cw.Close(now))
}

// Discard forgets a connection that never started.
func (t *TCPConn) Discard() {
	t.r.mu.Lock()
	t.closed, t.pending = true, nil
	t.r.mu.Unlock()
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
