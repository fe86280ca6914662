//go:build !js

package sctp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// What the interop tests share with the C peer of testdata/usrsctp
// (sctp_peer.c): building it, reading its output, and the two kinds of
// traffic it answers, echoed user messages and DDP Stream Sessions.

// buildPeer compiles testdata/usrsctp/sctp_peer.c with cc into a
// temporary directory: with usrsctp's API if usrsctp, else the kernel's
// SCTP sockets, statically linked so that it runs in the Linux guest. It
// skips t, with the reason, when the compiler or usrsctp's library is
// missing.
func buildPeer(t *testing.T, usrsctp bool) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc); scripts/test.sh installs gcc")
	}
	src, err := filepath.Abs("testdata/usrsctp/sctp_peer.c")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sctp_peer")
	args := []string{"-O1", "-Wall", "-o", out, src}
	if usrsctp {
		args = append(args, "-DPEER_USRSCTP", "-lusrsctp", "-lpthread")
	} else {
		args = append(args, "-static")
	}
	msg, err := exec.Command(cc, args...).CombinedOutput()
	if err != nil {
		if usrsctp && bytes.Contains(msg, []byte("usrsctp.h")) {
			t.Skip("usrsctp is not installed (Debian: libusrsctp-dev; scripts/test.sh installs it)")
		}
		if !usrsctp && bytes.Contains(msg, []byte("cannot find -lc")) {
			t.Skip("no static C library to link the guest's peer with (Debian: libc6-dev)")
		}
		t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return out
}

// peerOutput collects the lines a peer prints, for waitLine.
type peerOutput struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // signalled at each line and at the end
	ended bool
	done  chan struct{} // closed at the end
}

func newPeerOutput(r io.Reader) *peerOutput {
	o := &peerOutput{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			o.mu.Lock()
			o.lines = append(o.lines, sc.Text())
			o.mu.Unlock()
			o.signal()
		}
		o.mu.Lock()
		o.ended = true
		o.mu.Unlock()
		o.signal()
		close(o.done)
	}()
	return o
}

func (o *peerOutput) signal() {
	select {
	case o.more <- struct{}{}:
	default:
	}
}

// waitLine returns the first line that starts with prefix, waiting for it
// until timeout or the end of the output.
func (o *peerOutput) waitLine(prefix string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		o.mu.Lock()
		for _, l := range o.lines {
			if strings.HasPrefix(l, prefix) {
				o.mu.Unlock()
				return l, nil
			}
		}
		ended, all := o.ended, strings.Join(o.lines, "\n")
		o.mu.Unlock()
		if ended {
			return "", fmt.Errorf("the peer ended without printing %q; it printed:\n%s", prefix, all)
		}
		select {
		case <-o.more:
		case <-deadline:
			return "", fmt.Errorf("no %q from the peer in %v; it printed:\n%s", prefix, timeout, all)
		}
	}
}

// echoExchange sends count messages on streams 0 to streams-1, every
// third unordered, to a peer that echoes each on its stream, and checks
// every echo: bytes, PPID, U bit, and the order of the ordered ones.
func echoExchange(t *testing.T, a *Association, count, maxLen int, streams uint16, timeout time.Duration) {
	t.Helper()
	const seed = 31
	const ppid = 0x3000 // a PPID no dissector of tshark's claims
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, int(streams)+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range count {
			m := testMsg(seed, i, maxLen)
			sid := uint16(i) % streams
			if err := a.SendMessageContext(ctx, sid, ppid+uint32(sid), i%3 == 0, [][]byte{m[:6], m[6:]}); err != nil {
				errs <- fmt.Errorf("SendMessage %d: %w", i, err)
				return
			}
		}
	}()
	for sid := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := a.OpenStream(sid)
			if err != nil {
				errs <- err
				return
			}
			buf := make([]byte, maxLen)
			last, seen := -1, map[int]bool{}
			for range (count - int(sid) + int(streams) - 1) / int(streams) {
				n, p, unordered, err := st.ReadMessage(ctx, buf)
				if err != nil {
					errs <- fmt.Errorf("stream %d: ReadMessage: %w (%d echoes read)", sid, err, len(seen))
					return
				}
				i := int(binary.BigEndian.Uint64(buf))
				if n < 8 || !bytes.Equal(buf[:n], testMsg(seed, i, maxLen)) || uint16(i)%streams != sid ||
					p != ppid+uint32(sid) || unordered != (i%3 == 0) || seen[i] {
					errs <- fmt.Errorf("stream %d: echo of message %d corrupted, misrouted or duplicated (PPID %#x, U %v)", sid, i, p, unordered)
					return
				}
				seen[i] = true
				if !unordered {
					if i <= last {
						errs <- fmt.Errorf("stream %d: ordered echo %d after %d", sid, i, last)
						return
					}
					last = i
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// ddpSessions runs a DDP Stream Session (RFC 5043 §6.2) on each of
// streams, with the peer as the passive side: this side sends a DDP
// Stream Session Initiate, the peer a DDP Stream Session Accept; each
// side then sends segments DDP Segment Chunks with DDP-SSNs 1, 2, ...
// (each an untagged DDP Segment, RFC 5041 §4.3; the peer's carry ours
// back), and this side's DDP Stream
// Session Terminate is answered by the peer's. Every message is
// unordered (RFC 5043 §5.2.1); the peer's DDP-SSNs must have no gaps
// (§6: "The DDP-SSNs assigned to the Data Chunks for a session MUST NOT
// have any gaps") and its segments must be ours, each once.
func ddpSessions(t *testing.T, a *Association, streams []uint16, segments int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := make(chan error, len(streams))
	var wg sync.WaitGroup
	for _, sid := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ddpSession(ctx, a, sid, segments); err != nil {
				errs <- fmt.Errorf("DDP stream %d: %w", sid, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// segment returns DDP Segment i of a session on stream sid: an untagged
// DDP Header for queue 0, MSN i, MO 0, Last set, then a payload that
// names the stream and i.
func segment(sid uint16, i int) []byte {
	h := ddp.Header{Last: true, DV: ddp.Version, QN: 0, MSN: uint32(i), MO: 0}
	b := h.Append(nil)
	return append(b, fmt.Sprintf("DDP stream %d, segment %d of an interop test", sid, i)...)
}

func ddpSession(ctx context.Context, a *Association, sid uint16, segments int) error {
	st, err := a.OpenStream(sid)
	if err != nil {
		return err
	}
	send := func(ppid wire.PPID, m []byte) error {
		return st.SendMessage(ctx, uint32(ppid), true, [][]byte{m})
	}
	buf := make([]byte, 1<<12)
	recv := func(want wire.PPID) ([]byte, error) {
		n, ppid, unordered, err := st.ReadMessage(ctx, buf)
		if err != nil {
			return nil, err
		}
		if ppid != uint32(want) || !unordered {
			return nil, fmt.Errorf("a message with PPID %d, unordered %v; want PPID %d, unordered", ppid, unordered, want)
		}
		return buf[:n], nil
	}
	recvControl := func(ssn wire.SSN, f wire.FunctionCode) (wire.SessionControl, error) {
		b, err := recv(wire.PPIDSessionControl)
		if err != nil {
			return wire.SessionControl{}, err
		}
		m, _, err := wire.ParseSessionControl(b)
		if err != nil {
			return m, err
		}
		if m.SSN != ssn || m.Function != f {
			return m, fmt.Errorf("%v with DDP-SSN %d; want %v with DDP-SSN %d", m.Function, m.SSN, f, ssn)
		}
		return m, nil
	}

	private := fmt.Appendf(nil, "initiator on stream %d", sid)
	initiate := wire.SessionControl{SSN: 0, Function: wire.FunctionInitiate, PrivateData: private}
	if err := send(wire.PPIDSessionControl, initiate.Append(nil)); err != nil {
		return err
	}
	accept, err := recvControl(0, wire.FunctionAccept)
	if err != nil {
		return fmt.Errorf("after Initiate: %w", err)
	}
	if !bytes.Equal(accept.PrivateData, private) {
		return fmt.Errorf("Accept's Private Data %q", accept.PrivateData)
	}
	for i := 1; i <= segments; i++ {
		c := wire.SegmentChunk{SSN: wire.SSN(i), Segment: segment(sid, i)}
		if err := send(wire.PPIDSegment, c.Append(nil)); err != nil {
			return err
		}
	}
	var ssns, msns []int
	for range segments {
		b, err := recv(wire.PPIDSegment)
		if err != nil {
			return fmt.Errorf("segments: %w", err)
		}
		c, _, err := wire.ParseSegmentChunk(b)
		if err != nil {
			return err
		}
		h, _, err := ddp.ParseHeader(c.Segment)
		if err != nil {
			return err
		}
		if h.Tagged || !bytes.Equal(c.Segment, segment(sid, int(h.MSN))) {
			return fmt.Errorf("DDP-SSN %d: segment %x is none of ours", c.SSN, c.Segment)
		}
		ssns = append(ssns, int(c.SSN))
		msns = append(msns, int(h.MSN))
	}
	slices.Sort(ssns)
	slices.Sort(msns)
	for i := range segments {
		if ssns[i] != i+1 || msns[i] != i+1 {
			return fmt.Errorf("the peer's DDP-SSNs %v and MSNs %v; want 1 to %d each once", ssns, msns, segments)
		}
	}
	terminate := wire.SessionControl{SSN: wire.SSN(segments + 1), Function: wire.FunctionTerminate}
	if err := send(wire.PPIDSessionControl, terminate.Append(nil)); err != nil {
		return err
	}
	if _, err := recvControl(wire.SSN(segments+1), wire.FunctionTerminate); err != nil {
		return fmt.Errorf("after Terminate: %w", err)
	}
	return nil
}
