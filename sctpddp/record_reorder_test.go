//go:build !js

package sctpddp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/capture/replay"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// reorderPlan is the order in which permuteRelay hands bob the six DDP
// Segments alice sends him, numbered from 0 by DDP-SSN: the Write's
// second and third segments before its first, and the Send's last
// before its second.
var reorderPlan = []int{1, 2, 0, 3, 5, 4}

// TestRecordReorder records, at the receiver, a DDP Stream Session over
// plain SCTP/UDP (RFC 6951) whose path reorders: alice RDMA Writes 1,506
// octets and Sends 1,494, three DDP Segments each at an MTU of
// wire.MinMTU, and a relay between the two UDP sockets passes them to
// bob in the order of reorderPlan. Every segment is an unordered DATA
// chunk (RFC 5043 §10), so bob's SCTP hands each over as it comes and
// DDP places it at once; a message is delivered only when all its
// segments and every message before it are placed (RFC 5041 §5.3,
// §5.4). The test checks that bob's memory holds what alice sent, that
// the capture, in bob's arrival order, has a segment of the Write and
// one of the Send that came before an earlier segment of the same
// message, and that the replay places those at once and delivers each
// message with the segment that completes it. With -update it writes the
// bundled capture the demo page replays.
func TestRecordReorder(t *testing.T) {
	rec, path := recordTo(t, "reorder-sctp.pcap")
	var relay *permuteRelay
	server, client := connectThrough(t, rec, func(l net.Addr) net.Addr {
		relay = newPermuteRelay(t, l)
		return relay.conn.LocalAddr()
	})
	if m := client.MULPDU(); m != wire.MinMULPDU {
		t.Fatalf("MULPDU %d, want %d", m, wire.MinMULPDU)
	}

	// bob dials and starts the session; alice, on the listener's side,
	// accepts it and sends.
	bob, alice := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, server.Sessions(0), 1, bob, alice)
	const writeLen, sendLen = 3 * (wire.MinMULPDU - 14), 3 * (wire.MinMULPDU - 18) // DDP's tagged and untagged headers
	target := bob.Reg(t, writeLen, rdmap.RemoteWrite)
	rbuf := bob.Reg(t, sendLen, rdmap.LocalWrite)
	if err := bob.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: sendLen}}}); err != nil {
		t.Fatal(err)
	}
	src := alice.Reg(t, writeLen+sendLen, 0)
	segments(src.Bytes()[:writeLen], "RDMA Write", wire.MinMULPDU-14)
	segments(src.Bytes()[writeLen:], "Send", wire.MinMULPDU-18)
	relay.arm(t, reorderPlan)
	if err := alice.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: writeLen}}, RemoteSTag: target.STag(), RemoteTO: target.Base()}); err != nil {
		t.Fatal(err)
	}
	if err := alice.QP.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: src, Offset: writeLen, Length: sendLen}}}); err != nil {
		t.Fatal(err)
	}
	// The Send's receive completes only once the Write before it is
	// delivered (RFC 5040 §5.5).
	if c := waitC(t, bob.RCQ); c.Status != rdmap.StatusSuccess || c.ByteLen != sendLen {
		t.Fatalf("bob's receive: %+v", c)
	}
	if !bytes.Equal(target.Bytes(), src.Bytes()[:writeLen]) || !bytes.Equal(rbuf.Bytes(), src.Bytes()[writeLen:]) {
		t.Fatal("bob's memory differs from what alice sent")
	}
	if got := relay.sent(); fmt.Sprint(got) != fmt.Sprint(reorderPlan) {
		t.Fatalf("the relay passed the segments in the order %v, want %v", got, reorderPlan)
	}
	client.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkReorderCapture(t, b)
}

// connectThrough makes an association over plain UDP (RFC 6951) at an
// MTU of wire.MinMTU from a Dial through the relay that via starts in
// front of a Listener's address, and records the client's packets.
func connectThrough(t *testing.T, rec *capture.Recorder, via func(listener net.Addr) net.Addr) (server, client *Association) {
	t.Helper()
	ctx := testCtx(t)
	srv := &Config{InsecurePlainUDP: true, MTU: wire.MinMTU}
	cli := &Config{InsecurePlainUDP: true, MTU: wire.MinMTU, Trace: rec.SCTPTrace}
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	addr := via(l.Addr())
	ach := make(chan *Association, 1)
	go func() {
		a, _ := l.Accept(ctx)
		ach <- a
	}()
	client, err = Dial(ctx, "udp", addr.String(), cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server = <-ach
	if server == nil {
		t.Fatal("no association accepted")
	}
	t.Cleanup(func() { server.Close() })
	rec.SetLocal(client.LocalAddr())
	return server, client
}

// segments fills b with the text of a message cut into segments of n
// octets: each says which of them it is, then dots.
func segments(b []byte, what string, n int) {
	for i := range b {
		b[i] = '.'
	}
	for k := 0; k*n < len(b); k++ {
		copy(b[k*n:min(len(b), (k+1)*n)], fmt.Sprintf("%s, segment %d of %d ", what, k+1, (len(b)+n-1)/n))
	}
}

// checkReorderCapture checks the capture of TestRecordReorder: in the
// order bob received them, a segment of each message comes before an
// earlier one (by DDP-SSN) of the same message, and the replay places
// every segment as it comes and delivers each message with the last of
// its segments to arrive.
func checkReorderCapture(t *testing.T, b []byte) {
	t.Helper()
	recs, err := capture.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// The segments of each message, in arrival order: the Write by its
	// STag, the Send by its queue and MSN.
	type seg struct{ ssn, n int }
	byMsg := map[string][]seg{}
	var msgs []string
	for _, r := range recs {
		if r.Kind != capture.KindSegment || r.DDP == nil || r.DDPSSN == nil || (r.Op != "RDMA Write" && r.Op != "Send") {
			continue
		}
		k := fmt.Sprintf("%s STag %#x", r.Op, r.DDP.STag)
		if !r.DDP.Tagged {
			k = fmt.Sprintf("%s QN %d MSN %d", r.Op, r.DDP.QN, r.DDP.MSN)
		}
		if byMsg[k] == nil {
			msgs = append(msgs, k)
		}
		byMsg[k] = append(byMsg[k], seg{int(*r.DDPSSN), r.N})
	}
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "RDMA Write") || !strings.HasPrefix(msgs[1], "Send") {
		t.Fatalf("messages %q, want one RDMA Write and one Send", msgs)
	}
	for _, k := range msgs {
		s := byMsg[k]
		early := false
		for i := 1; i < len(s); i++ {
			for j := range i {
				early = early || s[j].ssn > s[i].ssn
			}
		}
		if len(s) != 3 || !early {
			t.Errorf("%s: segments (DDP-SSN, record) %v: want three, one arriving before an earlier one", k, s)
		}
	}

	m, warn, err := replay.Decode(b)
	if err != nil || warn != "" {
		t.Fatalf("replay: %v %q", err, warn)
	}
	for _, op := range []string{"RDMA Write", "Send"} {
		var evs []*replay.Event
		for i := range m.Events {
			if e := &m.Events[i]; e.Kind == replay.EventSegment && e.Rec.Op == op {
				evs = append(evs, e)
			}
		}
		if len(evs) != 3 {
			t.Fatalf("%s: %d segment events", op, len(evs))
		}
		// Each is placed when it arrives; the message is delivered with
		// the one that arrives last, all three at once.
		for i, e := range evs {
			if e.Buffer == 0 {
				t.Errorf("%s: record %d placed nowhere: %s", op, e.Rec.N, e.Why)
			}
			if n := len(e.Delivered); i < 2 && n != 0 || i == 2 && n != 3 {
				t.Errorf("%s: record %d (arrival %d) delivers %v", op, e.Rec.N, i+1, e.Delivered)
			}
		}
	}
}

// permuteRelay forwards UDP datagrams between one client and a server
// (SCTP packets over UDP, RFC 6951). Once armed with a plan, it holds the
// server's packets that carry the next DDP Segment Chunks and passes
// them to the client in the plan's order, numbered from the first chunk
// after arming by DDP-SSN: a path that reorders, the same way every run.
// Every other packet goes through at once, and so does a retransmission
// of a chunk already passed; one of a chunk held is dropped, since the
// chunk is on its way. What is held goes out in DDP-SSN order after two
// seconds if the plan cannot complete, so that a test fails rather than
// hangs.
type permuteRelay struct {
	conn   *net.UDPConn
	server *net.UDPAddr
	wg     sync.WaitGroup

	mu     sync.Mutex
	client *net.UDPAddr
	plan   []int
	first  int            // DDP-SSN of chunk 0; -1 before one is seen
	held   map[int][]byte // by chunk number
	tsns   map[uint32]int // TSNs seen, by chunk number
	next   int            // index in plan of the next chunk to pass
	passed []int
}

func newPermuteRelay(t *testing.T, server net.Addr) *permuteRelay {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &permuteRelay{conn: c, server: server.(*net.UDPAddr), first: -1, held: map[int][]byte{}, tsns: map[uint32]int{}}
	r.wg.Add(1)
	go r.loop()
	t.Cleanup(func() { c.Close(); r.wg.Wait() })
	return r
}

// arm reorders the next len(plan) DDP Segment Chunks from the server.
func (r *permuteRelay) arm(t *testing.T, plan []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plan, r.first, r.next, r.passed = plan, -1, 0, nil
	clear(r.held)
	clear(r.tsns)
	flush := time.AfterFunc(2*time.Second, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for k := range len(r.plan) {
			if p, ok := r.held[k]; ok {
				delete(r.held, k)
				r.conn.WriteToUDP(p, r.client)
			}
		}
		r.plan = nil
	})
	t.Cleanup(func() { flush.Stop() })
}

// sent returns the chunk numbers passed so far, in the order passed.
func (r *permuteRelay) sent() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.passed...)
}

func (r *permuteRelay) loop() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		pkt := append([]byte(nil), buf[:n]...)
		if from.Port != r.server.Port || !from.IP.Equal(r.server.IP) {
			r.mu.Lock()
			r.client = from
			r.mu.Unlock()
			r.conn.WriteToUDP(pkt, r.server)
			continue
		}
		r.mu.Lock()
		r.fromServer(pkt)
		r.mu.Unlock()
	}
}

// fromServer passes or holds a packet from the server; r.mu is held.
func (r *permuteRelay) fromServer(pkt []byte) {
	if r.client == nil {
		return
	}
	tsn, _, ssn, ok := segmentChunk(pkt)
	if !ok || r.plan == nil {
		r.conn.WriteToUDP(pkt, r.client)
		return
	}
	if k, seen := r.tsns[tsn]; seen {
		if _, held := r.held[k]; !held {
			r.conn.WriteToUDP(pkt, r.client)
		}
		return
	}
	if r.first < 0 {
		r.first = int(ssn)
	}
	k := int(ssn - uint16(r.first))
	if k >= len(r.plan) {
		r.conn.WriteToUDP(pkt, r.client)
		return
	}
	r.tsns[tsn] = k
	r.held[k] = pkt
	for r.next < len(r.plan) {
		p, ok := r.held[r.plan[r.next]]
		if !ok {
			break
		}
		delete(r.held, r.plan[r.next])
		r.conn.WriteToUDP(p, r.client)
		r.passed = append(r.passed, r.plan[r.next])
		r.next++
	}
	if r.next == len(r.plan) {
		r.plan = nil
	}
}

// segmentChunk returns the TSN, the SCTP stream and the DDP-SSN of the
// first DATA chunk of an SCTP packet that carries a DDP Segment Chunk
// (PPID 16, RFC 5043 §5.2).
func segmentChunk(pkt []byte) (tsn uint32, id, ssn uint16, ok bool) {
	be := binary.BigEndian
	for off := 12; off+4 <= len(pkt); {
		typ, l := pkt[off], int(be.Uint16(pkt[off+2:]))
		if l < 4 || off+l > len(pkt) {
			return 0, 0, 0, false
		}
		if typ == 0 && l >= 18 && wire.PPID(be.Uint32(pkt[off+12:])) == wire.PPIDSegment {
			return be.Uint32(pkt[off+4:]), be.Uint16(pkt[off+8:]), be.Uint16(pkt[off+16:]), true
		}
		off += (l + 3) &^ 3
	}
	return 0, 0, 0, false
}
