//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pion/logging"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/iwarpgo/iwarp/term"
)

// The hostile peer's kit: a DDP stream to a served command that sends
// hand-built DDP Segments one at a time, framed by the real LLP (MPA over
// TCP, DDP over SCTP over DTLS), and a child process whose memory and
// stderr are watched.

// hostileFrom is the IP address the hostile peer connects from; the
// well-behaved clients use 127.0.0.1. The servers' limits are per IP
// address, so that a peer at its limit is refused while others are not.
const hostileFrom = "127.0.0.2"

// link is the hostile peer's DDP stream to the server, started by the
// LLP's own startup (an MPA Request and RTR; a DDP Stream Session
// Initiate). Segments are DDP Header and payload, built by the caller.
type link interface {
	// send sends one DDP Segment as the LLP frames it: an FPDU with its
	// CRC, or a DDP Segment Chunk with the next DDP-SSN.
	send(seg []byte) error
	// sendFlipped sends seg with one bit flipped, bit counting octet*8
	// plus the bit from the least significant: over MPA after the CRC is
	// computed (the receiver's CRC check fails), over SCTP in the
	// plaintext handed to DTLS (it arrives authenticated, and malformed).
	sendFlipped(seg []byte, bit int) error
	// sendLaterFirst sends a and then b so that b arrives first: over
	// SCTP a has the earlier DDP-SSN and its datagram is held back until
	// b's has gone; over MPA, whose stream has one order, b is written
	// before a.
	sendLaterFirst(a, b []byte) error
	// recv returns the next DDP Segment from the server, or why there is
	// none (the connection or session ended, ctx).
	recv(ctx context.Context) ([]byte, error)
	// close abandons the stream: a TCP close, an SCTP association's
	// close, without a goodbye of the protocol.
	close()
	// peerIRD is the IRD the server answered the startup with: the most
	// Read Requests it takes at once (RFC 6581 §9.1: "the initiator MUST
	// set ... its ORD at most to the responder IRD").
	peerIRD() int
}

// errEnded is recv's error once the server has ended the stream: a TCP
// FIN or reset, a DDP Stream Session Terminate, the association's end.
var errEnded = errors.New("the server ended the stream")

// taggedSeg builds a tagged DDP Segment carrying RDMAP opcode op.
func taggedSeg(op rdmap.Opcode, stag uint32, to uint64, last bool, payload []byte) []byte {
	h := ddp.Header{Tagged: true, Last: last, DV: ddp.Version, STag: stag, TO: to}
	h.RsvdULP[0] = byte(rdmap.MakeControl(op))
	return append(h.Append(nil), payload...)
}

// untaggedSeg builds an untagged DDP Segment carrying RDMAP opcode op on
// queue qn, message msn, at offset mo.
func untaggedSeg(op rdmap.Opcode, qn, msn, mo uint32, last bool, payload []byte) []byte {
	h := ddp.Header{Last: last, DV: ddp.Version, QN: qn, MSN: msn, MO: mo}
	h.RsvdULP[0] = byte(rdmap.MakeControl(op))
	return append(h.Append(nil), payload...)
}

// rdmapOp returns the RDMAP opcode and the DDP header of seg.
func rdmapOp(seg []byte) (rdmap.Opcode, ddp.Header, []byte, bool) {
	h, n, err := ddp.ParseHeader(seg)
	if err != nil {
		return 0, h, nil, false
	}
	return rdmap.Control(h.RsvdULP[0]).Opcode(), h, seg[n:], true
}

// asTerminate returns the triple of seg if it is an RDMAP Terminate.
func asTerminate(seg []byte) (*term.Error, bool) {
	op, h, body, ok := rdmapOp(seg)
	if !ok || op != rdmap.OpTerminate || h.Tagged || h.QN != rdmap.QNTerminate {
		return nil, false
	}
	th, _, err := rdmap.ParseTerminate(body)
	if err != nil {
		return &term.Error{Detail: "unparsable Terminate"}, true
	}
	return th.Err(), true
}

// mpaLink is a link over MPA/TCP from hostileFrom.
type mpaLink struct {
	c    net.Conn
	r    *mpa.Reader
	opts mpa.Options
	ird  int
	mu   sync.Mutex // serialises writes
	pos  uint64
}

// hostileIRD and hostileORD are what the hostile peer offers: one
// Read Request of the server's at a time, and several of its own.
const hostileIRD, hostileORD = 1, 16

// hostileStartup is what the hostile MPA initiator sends first, in one
// write: an MPA Request (revision 2, CRCs, the peer-to-peer model with a
// zero-length RDMA Write as RTR, hostileIRD and hostileORD) and that RTR,
// without waiting for the Reply.
func hostileStartup() []byte {
	e := ddp.EnhancedData{PeerToPeer: true, WriteRTR: true, IRD: hostileIRD, ORD: hostileORD}
	b := (&mpa.Frame{Rev: 2, CRC: true, Enhanced: true, PrivateData: e.Append(nil)}).Append(nil)
	hdr := ddp.Header{Tagged: true, Last: true, DV: ddp.Version}
	hdr.RsvdULP[0] = byte(rdmap.MakeControl(rdmap.OpWrite))
	b, err := mpa.AppendFPDU(b, 0, mpa.Options{CRC: true}, hdr.Append(nil))
	if err != nil {
		panic(err)
	}
	return b
}

// hostileStartupOffset is the stream offset of the first FPDU after
// hostileStartup's Request: Markers are off, so only its alignment
// matters.
var hostileStartupOffset = uint64(len(hostileStartup()) - mpa.FrameHeaderLen - ddp.EnhancedDataLen)

// dialMPA connects to addr from hostileFrom with hostileStartup and
// reads the Reply; a Reply with R set is ddp.RejectedError.
func dialMPA(ctx context.Context, addr string) (*mpaLink, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(hostileFrom)}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(hostileStartup()); err != nil {
		c.Close()
		return nil, err
	}
	rep, err := mpa.ReadFrame(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("MPA Reply: %w", err)
	}
	if !rep.Reply || rep.Reject {
		c.Close()
		return nil, &ddp.RejectedError{PrivateData: rep.PrivateData}
	}
	e, _, ok := rep.Enhancement()
	if !ok {
		c.Close()
		return nil, errors.New("an MPA Reply without IRD and ORD")
	}
	c.SetDeadline(time.Time{})
	opts := mpa.Options{CRC: true}
	return &mpaLink{c: c, r: mpa.NewReader(c, opts), opts: opts, ird: int(e.IRD), pos: hostileStartupOffset}, nil
}

func (l *mpaLink) peerIRD() int { return l.ird }

// fpdu frames seg at the stream's next offset.
func (l *mpaLink) fpdu(seg []byte) ([]byte, error) {
	f, err := mpa.AppendFPDU(nil, l.pos, l.opts, seg)
	if err == nil {
		l.pos += uint64(len(f))
	}
	return f, err
}

func (l *mpaLink) write(fs ...[]byte) error {
	var b []byte
	for _, f := range fs {
		b = append(b, f...)
	}
	l.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := l.c.Write(b)
	return err
}

func (l *mpaLink) send(seg []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := l.fpdu(seg)
	if err != nil {
		return err
	}
	return l.write(f)
}

func (l *mpaLink) sendFlipped(seg []byte, bit int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := l.fpdu(seg)
	if err != nil {
		return err
	}
	// The ULPDU starts after the 2-octet ULPDU_Length; the CRC covers it.
	i := 2 + (bit/8)%len(seg)
	f[i] ^= 1 << (bit % 8)
	return l.write(f)
}

func (l *mpaLink) sendLaterFirst(a, b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fb, err := l.fpdu(b)
	if err != nil {
		return err
	}
	fa, err := l.fpdu(a)
	if err != nil {
		return err
	}
	return l.write(fb, fa)
}

// sendPartial writes seg's FPDU up to n octets and nothing more: the
// server has an FPDU that has begun to arrive.
func (l *mpaLink) sendPartial(seg []byte, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := l.fpdu(seg)
	if err != nil {
		return err
	}
	return l.write(f[:min(n, len(f))])
}

func (l *mpaLink) recv(ctx context.Context) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		l.c.SetReadDeadline(dl)
	}
	u, err := l.r.Next()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %v", errEnded, err)
	}
	return append([]byte(nil), u...), nil
}

func (l *mpaLink) close() { l.c.Close() }

// sctpLink is a link over one DDP Stream Session of an association of
// its own, through a holdRelay from hostileFrom.
type sctpLink struct {
	relay *holdRelay
	a     *sctpddp.Association
	st    *sctpddp.Stream
	buf   []byte
	early [][]byte // DDP Segments that overtook the Accept
	ird   int
}

func (l *sctpLink) peerIRD() int { return l.ird }

// dialSCTP connects to addr (a UDP address) through a new relay from
// hostileFrom, with the soak's pre-shared key, and starts a DDP Stream
// Session on stream 1 with the enhanced Initiate (hostileIRD and
// hostileORD). A Reject is ddp.RejectedError.
func dialSCTP(ctx context.Context, addr string) (*sctpLink, error) {
	r, err := newHoldRelay(hostileFrom, addr)
	if err != nil {
		return nil, err
	}
	a, err := sctpddp.Dial(ctx, "udp", r.addr(), hostileSCTPConfig())
	if err != nil {
		r.close()
		return nil, err
	}
	l := &sctpLink{relay: r, a: a}
	if l.st, err = a.OpenStream(1); err != nil {
		l.close()
		return nil, err
	}
	l.buf = make([]byte, a.MULPDU()+wire.SSNLen)
	init := wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: hostileIRD, ORD: hostileORD}}
	if _, err := l.st.WriteSessionControl(ctx, init); err != nil {
		l.close()
		return nil, err
	}
	for {
		n, ppid, err := l.st.ReadMessage(ctx, l.buf)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("waiting for the Accept: %w", err)
		}
		if ppid != wire.PPIDSessionControl {
			// Chunks are unordered: the server's first segments (serve's
			// advertisement) may come before its Accept.
			sc, _, err := wire.ParseSegmentChunk(l.buf[:n])
			if err != nil || len(l.early) == 64 {
				l.close()
				return nil, fmt.Errorf("before the Accept: %v (%d segments)", err, len(l.early))
			}
			l.early = append(l.early, append([]byte(nil), sc.Segment...))
			continue
		}
		m, _, err := wire.ParseSessionControl(l.buf[:n])
		if err != nil {
			l.close()
			return nil, err
		}
		switch m.Function {
		case wire.FunctionEnhancedAccept:
			l.ird = int(m.Enhanced.IRD)
			return l, nil
		case wire.FunctionEnhancedReject, wire.FunctionReject:
			l.close()
			return nil, &ddp.RejectedError{PrivateData: append([]byte(nil), m.PrivateData...)}
		default:
			l.close()
			return nil, fmt.Errorf("%v in answer to the Initiate", m.Function)
		}
	}
}

// hostileSCTPConfig is the hostile peer's: the soak's key, and pion's
// logs off (its handshakes given up on purpose log errors).
func hostileSCTPConfig() *sctpddp.Config {
	c := soakSCTPConfig()
	c.LoggerFactory = &logging.DefaultLoggerFactory{DefaultLogLevel: logging.LogLevelDisabled}
	return c
}

func (l *sctpLink) send(seg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := l.st.WriteSegmentv(ctx, seg, nil)
	return err
}

func (l *sctpLink) sendFlipped(seg []byte, bit int) error {
	b := append([]byte(nil), seg...)
	b[(bit/8)%len(b)] ^= 1 << (bit % 8)
	return l.send(b)
}

// holdAbove is the size of datagram the relay holds back for
// sendLaterFirst: more than SCTP's SACKs and heartbeats, less than the
// segments it is used with.
const holdAbove = 400

func (l *sctpLink) sendLaterFirst(a, b []byte) error {
	if len(a) < 2*holdAbove || len(b) < 2*holdAbove {
		return fmt.Errorf("sendLaterFirst over SCTP needs segments of %d octets or more", 2*holdAbove)
	}
	held, passed := l.relay.holdNext(holdAbove)
	defer l.relay.release()
	if err := l.send(a); err != nil {
		return err
	}
	select {
	case <-held:
	case <-time.After(3 * time.Second):
		return errors.New("the relay saw no datagram to hold")
	}
	if err := l.send(b); err != nil {
		return err
	}
	select {
	case <-passed:
	case <-time.After(3 * time.Second):
		return errors.New("the relay saw no datagram after the held one")
	}
	// Let the later one be read before the earlier one comes.
	time.Sleep(20 * time.Millisecond)
	return nil
}

func (l *sctpLink) recv(ctx context.Context) ([]byte, error) {
	if len(l.early) > 0 {
		seg := l.early[0]
		l.early = l.early[1:]
		return seg, nil
	}
	for {
		n, ppid, err := l.st.ReadMessage(ctx, l.buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: %v", errEnded, err)
		}
		switch ppid {
		case wire.PPIDSegment:
			sc, _, err := wire.ParseSegmentChunk(l.buf[:n])
			if err != nil {
				return nil, err
			}
			return append([]byte(nil), sc.Segment...), nil
		case wire.PPIDSessionControl:
			m, _, err := wire.ParseSessionControl(l.buf[:n])
			if err == nil && m.Function == wire.FunctionTerminate {
				return nil, fmt.Errorf("%w: DDP Stream Session Terminate", errEnded)
			}
			return nil, fmt.Errorf("session control %v during the session", m.Function)
		}
	}
}

// closeGrace is how long the relay outlives its association's close:
// the goodbye (a close_notify, an SCTP ABORT) is sent after Close
// returns, and without it the server holds the association until its
// dead-peer timeout.
const closeGrace = 100 * time.Millisecond

func (l *sctpLink) close() {
	if l.a != nil {
		l.a.Close()
	}
	time.Sleep(closeGrace)
	l.relay.close()
}

// holdRelay forwards datagrams between its address on 127.0.0.1 and a
// target, through a socket bound to an address of its choosing, so that a
// DTLS/SCTP client behind it is a peer at that address for the target.
// On request it holds back one datagram towards the target and lets the
// next ones overtake it: the network reordering SCTP allows.
type holdRelay struct {
	pc, up *net.UDPConn
	mu     sync.Mutex // guards the fields below
	client *net.UDPAddr
	armed  int    // hold the next datagram longer than this (0: none)
	held   []byte // the datagram held
	heldc  chan struct{}
	passc  chan struct{} // closed when a datagram longer than armed overtakes the held one
	wg     sync.WaitGroup
}

func newHoldRelay(from, target string) (*holdRelay, error) {
	ta, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	up, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, ta)
	if err != nil {
		pc.Close()
		return nil, err
	}
	r := &holdRelay{pc: pc, up: up}
	r.wg.Add(2)
	go r.toTarget()
	go r.toClient()
	return r, nil
}

func (r *holdRelay) addr() string { return r.pc.LocalAddr().String() }

func (r *holdRelay) toTarget() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, addr, err := r.pc.ReadFromUDP(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.client = addr
		switch {
		case r.armed > 0 && r.held == nil && n > r.armed:
			r.held = append([]byte(nil), buf[:n]...)
			close(r.heldc)
			r.mu.Unlock()
			continue
		case r.armed > 0 && r.held != nil && n > r.armed && r.passc != nil:
			close(r.passc)
			r.passc = nil
		}
		r.mu.Unlock()
		r.up.Write(buf[:n])
	}
}

func (r *holdRelay) toClient() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := r.up.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		r.mu.Lock()
		c := r.client
		r.mu.Unlock()
		if err == nil && c != nil {
			r.pc.WriteToUDP(buf[:n], c)
		}
	}
}

// holdNext holds the next datagram towards the target longer than size;
// held is closed when it is held, passed when a later one of that size
// has gone past it. release sends it.
func (r *holdRelay) holdNext(size int) (held, passed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed, r.held = size, nil
	r.heldc, r.passc = make(chan struct{}), make(chan struct{})
	return r.heldc, r.passc
}

// release sends the datagram held, if any, and holds no more.
func (r *holdRelay) release() {
	r.mu.Lock()
	b := r.held
	r.armed, r.held, r.passc = 0, nil, nil
	r.mu.Unlock()
	if b != nil {
		r.up.Write(b)
	}
}

func (r *holdRelay) close() {
	r.pc.Close()
	r.up.Close()
	r.wg.Wait()
}

// child is a served command run as a process: the tail of its output,
// what its stderr says of a crash, its resident memory and threads
// sampled every 100 ms.
type child struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	url  string
	done chan struct{} // the process has exited
	err  error         // its exit status, once done

	mu       sync.Mutex // guards the fields below
	stdout   []string   // the last lines
	stderr   []string
	crash    []string // stderr from a "panic:", "fatal error:" or "SIGQUIT" on
	rssStart int64
	rssPeak  int64
	rssLast  int64
	thrPeak  int64
	samples  []int64 // VmRSS every second
}

// listenLine finds the address a command listens on in its first lines.
var listenLine = regexp.MustCompile(`"url":"(\w+://[^"]+)"|listening on (\w+://\S+)`)

// startChild starts the iwarp binary with args and waits for the address
// it listens on. GOTRACEBACK=all makes a crash, and the SIGQUIT that ends
// it, print every goroutine.
func startChild(t *testing.T, name string, args ...string) *child {
	t.Helper()
	c := &child{t: t, name: name, done: make(chan struct{})}
	c.cmd = exec.Command(iwarpBin, args...)
	c.cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if m := listenLine.FindStringSubmatch(l); m != nil {
				select {
				case urlc <- m[1] + m[2]:
				default:
				}
			}
			c.mu.Lock()
			c.stdout = appendTail(c.stdout, l, 50)
			c.mu.Unlock()
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(errp)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			c.mu.Lock()
			if c.crash == nil && (strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "SIGQUIT")) {
				c.crash = []string{}
			}
			if c.crash != nil {
				c.crash = append(c.crash, l)
			} else {
				c.stderr = appendTail(c.stderr, l, 50)
			}
			c.mu.Unlock()
		}
	}()
	go func() {
		readers.Wait()
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	go c.sample()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	select {
	case c.url = <-urlc:
	case <-c.done:
		t.Fatalf("%s exited before listening: %v\n%s", name, c.err, c.stderrText())
	case <-time.After(15 * time.Second):
		t.Fatalf("%s printed no address:\n%s", name, c.stderrText())
	}
	c.mu.Lock()
	c.rssStart = c.rssLast
	c.mu.Unlock()
	return c
}

func appendTail(tail []string, l string, n int) []string {
	if len(tail) == n {
		tail = append(tail[:0], tail[1:]...)
	}
	return append(tail, l)
}

// sample reads VmRSS and Threads every 100 ms until the process exits.
func (c *child) sample() {
	pid := c.cmd.Process.Pid
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		rss, thr := procStatus(pid, "VmRSS"), procStatus(pid, "Threads")
		c.mu.Lock()
		if rss > 0 {
			c.rssLast = rss
			c.rssPeak = max(c.rssPeak, rss)
			c.thrPeak = max(c.thrPeak, thr)
			if i%10 == 0 {
				c.samples = append(c.samples, rss)
			}
		}
		c.mu.Unlock()
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
	}
}

// alive fails the test if the process has exited or printed a crash.
func (c *child) alive() bool {
	c.t.Helper()
	select {
	case <-c.done:
		c.t.Errorf("%s exited: %v\n%s", c.name, c.err, c.stderrText())
		return false
	default:
	}
	c.mu.Lock()
	crashed := c.crash != nil
	c.mu.Unlock()
	if crashed {
		c.t.Errorf("%s crashed:\n%s", c.name, c.stderrText())
		return false
	}
	return true
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stderrText is the tail of stderr, and a crash's first lines.
func (c *child) stderrText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.Join(c.stderr, "\n")
	if c.crash != nil {
		crash := c.crash
		if len(crash) > 40 {
			crash = crash[:40]
		}
		s += "\n" + strings.Join(crash, "\n")
	}
	return s
}

// goroutines stops the process with SIGQUIT and counts the goroutines its
// dump lists (GOTRACEBACK=all); -1 if it printed none.
func (c *child) goroutines() int {
	c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.crash {
		if strings.HasPrefix(l, "goroutine ") && strings.HasSuffix(l, ":") {
			n++
		}
	}
	if c.crash == nil {
		return -1
	}
	return n
}
