package chunk

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pion/logging"
	"github.com/pion/sctp"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// The tests in this file check the codec against packets pion/sctp builds:
// two pion associations talk over an in-memory link that records every
// packet, and each recorded packet must parse, chunk by chunk, and encode
// again to the same bytes, checksum included. Packets this package builds
// must in turn be accepted by pion/sctp's parser.

// pionLink is a pair of in-memory datagram conns between two associations.
type pionLink struct {
	mu      sync.Mutex
	packets [][]byte // every packet written, in order
	drop    func(pkt []byte) bool
	done    chan struct{}
	once    sync.Once
}

type pionConn struct {
	link    *pionLink
	in, out chan []byte
}

func newPionLink() (*pionLink, *pionConn, *pionConn) {
	l := &pionLink{done: make(chan struct{})}
	ab, ba := make(chan []byte, 256), make(chan []byte, 256)
	return l, &pionConn{link: l, in: ba, out: ab}, &pionConn{link: l, in: ab, out: ba}
}

func (l *pionLink) close() { l.once.Do(func() { close(l.done) }) }

func (l *pionLink) recorded() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.packets...)
}

func (c *pionConn) Read(b []byte) (int, error) {
	select {
	case p := <-c.in:
		return copy(b, p), nil
	case <-c.link.done:
		return 0, io.EOF
	}
}

func (c *pionConn) Write(b []byte) (int, error) {
	p := bytes.Clone(b)
	c.link.mu.Lock()
	c.link.packets = append(c.link.packets, p)
	drop := c.link.drop != nil && c.link.drop(p)
	c.link.mu.Unlock()
	if drop {
		return len(b), nil
	}
	select {
	case c.out <- p:
		return len(b), nil
	case <-c.link.done:
		return 0, net.ErrClosed
	}
}

func (c *pionConn) Close() error                     { c.link.close(); return nil }
func (c *pionConn) LocalAddr() net.Addr              { return &net.UDPAddr{} }
func (c *pionConn) RemoteAddr() net.Addr             { return &net.UDPAddr{} }
func (c *pionConn) SetDeadline(time.Time) error      { return nil }
func (c *pionConn) SetReadDeadline(time.Time) error  { return nil }
func (c *pionConn) SetWriteDeadline(time.Time) error { return nil }

// pionPair starts a client and a server association over link.
func pionPair(t *testing.T, a, b *pionConn, interleaving bool) (client, server *sctp.Association) {
	t.Helper()
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelDisabled
	type result struct {
		a   *sctp.Association
		err error
	}
	srv := make(chan result, 1)
	go func() {
		s, err := sctp.ServerWithOptions(sctp.WithNetConn(b), sctp.WithLoggerFactory(lf), sctp.WithEnableInterleaving(interleaving))
		srv <- result{s, err}
	}()
	client, err := sctp.ClientWithOptions(sctp.WithNetConn(a), sctp.WithLoggerFactory(lf), sctp.WithEnableInterleaving(interleaving))
	if err != nil {
		t.Fatalf("pion client: %v", err)
	}
	r := <-srv
	if r.err != nil {
		t.Fatalf("pion server: %v", r.err)
	}
	return client, r.a
}

// exchange sends msg on stream sid from one association and reads it at
// the other.
func exchange(t *testing.T, from, to *sctp.Association, sid uint16, msg []byte) *sctp.Stream {
	t.Helper()
	s, err := from.OpenStream(sid, sctp.PayloadTypeWebRTCBinary)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(msg); err != nil {
		t.Fatal(err)
	}
	r, err := to.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := r.Read(buf)
	if err != nil || !bytes.Equal(buf[:n], msg) {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	return s
}

// checkPionPackets parses every recorded packet, encodes it again from the
// parsed chunks and compares the bytes; it returns the chunk types seen.
func checkPionPackets(t *testing.T, packets [][]byte) map[Type]int {
	t.Helper()
	seen := map[Type]int{}
	for i, pkt := range packets {
		h := Header(pkt)
		if !h.IsValid() {
			t.Fatalf("packet %d: %x", i, pkt)
		}
		if err := VerifyChecksum(pkt); err != nil {
			t.Errorf("packet %d: %v", i, err)
		}
		again := AppendHeader(nil, h.SourcePort(), h.DestinationPort(), h.VerificationTag())
		it := Chunks(pkt)
		for it.Next() {
			c := it.Chunk()
			seen[c.Type()]++
			if c.Type() == TypeHeartbeat && c.Length() == 4 {
				// pion/sctp v1.12.1 sends HEARTBEAT chunks without the
				// mandatory Heartbeat Info parameter (its chunkHeartbeat
				// has Marshal, not the marshal its chunk interface
				// calls, so only the chunk header is written). The
				// iterator hands the chunk out; ParseHeartbeat rejects
				// it, leaving the association to skip it.
				_, _, err := ParseHeartbeat(c)
				wantErr(t, "pion's empty HEARTBEAT", err, ErrLength)
				seen[0xff]++
				again = append(again, c...)
				continue
			}
			enc, known, err := reencode(c)
			if !known || err != nil {
				t.Errorf("packet %d: %v chunk %x: known %v, %v", i, c.Type(), c, known, err)
				continue
			}
			again = append(again, enc...)
		}
		if err := it.Err(); err != nil {
			t.Errorf("packet %d: %v", i, err)
		}
		SetPacketChecksum(again)
		if !bytes.Equal(again, pkt) {
			t.Errorf("packet %d re-encoded:\n got %x\nwant %x", i, again, pkt)
		}
	}
	if seen[0xff] > 0 {
		t.Logf("%d HEARTBEAT chunks without Heartbeat Info from pion/sctp", seen[0xff])
		delete(seen, 0xff)
	}
	return seen
}

// TestPionInit takes the INIT a pion/sctp client sends and checks our
// parse of it and our checksum against pion's bytes.
func TestPionInit(t *testing.T) {
	link, a, _ := newPionLink()
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelDisabled
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = sctp.ClientContext(ctx, sctp.WithNetConn(a), sctp.WithLoggerFactory(lf),
			sctp.WithEnableZeroChecksum(true), sctp.WithEnableInterleaving(true))
	}()
	var pkt []byte
	for pkt == nil {
		if p := link.recorded(); len(p) > 0 {
			pkt = p[0]
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no INIT from pion")
		case <-time.After(time.Millisecond):
		}
	}
	link.close()
	cancel()
	<-done

	// RFC 9260 §3.1: "A packet containing an INIT chunk MUST have a zero
	// Verification Tag."
	h := Header(pkt)
	if h.VerificationTag() != 0 {
		t.Errorf("Verification Tag %#x", h.VerificationTag())
	}
	if err := VerifyChecksum(pkt); err != nil {
		t.Fatalf("pion's INIT: %v", err)
	}
	if Checksum(pkt) != h.Checksum() {
		t.Errorf("checksum %#x, pion wrote %#x", Checksum(pkt), h.Checksum())
	}
	it := Chunks(pkt)
	if !it.Next() || it.Chunk().Type() != TypeInit {
		t.Fatalf("first chunk: %v", it.Err())
	}
	init, _, err := ParseInit(it.Chunk())
	if err != nil {
		t.Fatal(err)
	}
	if it.Next() {
		t.Error("INIT bundled with another chunk")
	}
	if err := init.Check(); err != nil {
		t.Error(err)
	}
	var zc ZeroChecksumAcceptable
	var ext SupportedExtensions
	ps := Params(init.Params)
	for ps.Next() {
		switch p := ps.Param(); p.Type() {
		case ParamZeroChecksumAcceptable:
			zc, _, err = ParseZeroChecksumAcceptable(p)
		case ParamSupportedExtensions:
			ext, _, err = ParseSupportedExtensions(p)
		}
		if err != nil {
			t.Error(err)
		}
	}
	if ps.Err() != nil {
		t.Error(ps.Err())
	}
	if zc.EDMID != EDMIDDTLS {
		t.Errorf("Zero Checksum Acceptable EDMID %d, want %d", zc.EDMID, EDMIDDTLS)
	}
	if !ext.Has(TypeReconfig) || !ext.Has(TypeForwardTSN) || !ext.Has(TypeIData) {
		t.Errorf("Supported Extensions %x", ext.ChunkTypes)
	}

	// Our encoding of what we parsed is pion's packet, byte for byte.
	ours := init.Append(AppendHeader(nil, h.SourcePort(), h.DestinationPort(), 0))
	SetPacketChecksum(ours)
	if !bytes.Equal(ours, pkt) {
		t.Errorf("ours %x\npion %x", ours, pkt)
	}
	t.Logf("pion INIT: %x", pkt)
}

// TestPionSession records a whole pion/sctp association: handshake, DATA
// and SACK both ways, HEARTBEAT, a stream reset (RE-CONFIG) and shutdown.
// pion's HEARTBEAT has no Heartbeat Info (see checkPionPackets), so no
// HEARTBEAT ACK answers it.
func TestPionSession(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pion/sctp associations")
	}
	link, a, b := newPionLink()
	defer link.close()
	client, server := pionPair(t, a, b, false)
	s := exchange(t, client, server, 1, []byte("hello, server"))
	exchange(t, server, client, 2, bytes.Repeat([]byte("large message "), 200))
	client.ActiveHeartbeat()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, link, TypeHeartbeat, TypeReconfig)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	waitFor(t, link, TypeShutdownComplete)
	_ = server.Close()

	seen := checkPionPackets(t, link.recorded())
	for _, want := range []Type{TypeInit, TypeInitAck, TypeCookieEcho, TypeCookieAck, TypeData, TypeSACK,
		TypeHeartbeat, TypeReconfig, TypeShutdown, TypeShutdownAck, TypeShutdownComplete} {
		if seen[want] == 0 {
			t.Errorf("no %v recorded", want)
		}
	}
	t.Logf("chunks recorded: %v", seen)
}

// TestPionForwardTSN records the FORWARD TSN pion/sctp sends when it
// abandons a message sent without retransmissions (RFC 3758) that the
// link lost.
func TestPionForwardTSN(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pion/sctp associations")
	}
	link, a, b := newPionLink()
	defer link.close()
	client, server := pionPair(t, a, b, false)
	exchange(t, client, server, 1, []byte("open"))
	s, err := client.OpenStream(4, sctp.PayloadTypeWebRTCBinary)
	if err != nil {
		t.Fatal(err)
	}
	s.SetReliabilityParams(true, sctp.ReliabilityTypeRexmit, 0)
	dropped := false
	link.mu.Lock()
	link.drop = func(pkt []byte) bool {
		it := Chunks(pkt)
		for it.Next() {
			if d, _, err := ParseData(it.Chunk()); err == nil && d.StreamID == 4 && !dropped {
				dropped = true
				return true
			}
		}
		return false
	}
	link.mu.Unlock()
	if _, err := s.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, link, TypeForwardTSN)
	_ = client.Close()
	_ = server.Close()
	seen := checkPionPackets(t, link.recorded())
	t.Logf("chunks recorded: %v", seen)
}

// TestPionInterleaving records an association that negotiates I-DATA (RFC
// 8260) and ends with an ABORT.
func TestPionInterleaving(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pion/sctp associations")
	}
	link, a, b := newPionLink()
	defer link.close()
	client, server := pionPair(t, a, b, true)
	exchange(t, client, server, 3, bytes.Repeat([]byte{0x5a}, 3000))
	// pion may delay its SACK: the association ends once it has been sent.
	waitFor(t, link, TypeSACK)
	client.Abort("done")
	waitFor(t, link, TypeAbort)
	_ = server.Close()
	_ = client.Close()

	seen := checkPionPackets(t, link.recorded())
	for _, want := range []Type{TypeIData, TypeSACK, TypeAbort} {
		if seen[want] == 0 {
			t.Errorf("no %v recorded", want)
		}
	}
	if seen[TypeData] != 0 {
		t.Error("DATA chunks on an association with I-DATA")
	}
	t.Logf("chunks recorded: %v", seen)
}

// waitFor waits until each of types has been recorded.
func waitFor(t *testing.T, link *pionLink, types ...Type) {
	t.Helper()
	var have map[Type]bool
	if !waitfor.Until(5*time.Second, func() bool {
		have = map[Type]bool{}
		for _, p := range link.recorded() {
			it := Chunks(p)
			for it.Next() {
				have[it.Chunk().Type()] = true
			}
		}
		for _, typ := range types {
			if !have[typ] {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("waiting for %v; recorded %v", types, have)
	}
}

// TestPionParsesOurs hands packets this package builds to pion/sctp's
// parser, which verifies the checksum and parses every chunk.
func TestPionParsesOurs(t *testing.T) {
	params := SupportedExtensions{ChunkTypes: []byte{byte(TypeReconfig), byte(TypeForwardTSN)}}.Append(nil)
	params = RawParam{Type: ParamForwardTSNSupported}.Append(params)
	params = ZeroChecksumAcceptable{EDMID: EDMIDDTLS}.Append(params)
	cookie := RawParam{Type: ParamStateCookie, Value: bytes.Repeat([]byte{7}, 13)}.Append(nil)
	for name, c := range map[string]codec{
		"INIT":               Init{InitiateTag: 1, ARwnd: 1 << 20, NumOutboundStreams: 16, NumInboundStreams: 16, InitialTSN: 5, Params: params},
		"INIT ACK":           InitAck{InitiateTag: 2, ARwnd: 1 << 20, NumOutboundStreams: 16, NumInboundStreams: 16, InitialTSN: 6, Params: append(cookie, params...)},
		"COOKIE ECHO":        CookieEcho{Cookie: bytes.Repeat([]byte{7}, 13)},
		"COOKIE ACK":         CookieAck{},
		"DATA":               Data{Flags: FlagBeginning | FlagEnding, TSN: 9, StreamID: 1, PPID: 16, UserData: []byte("hello")},
		"I-DATA":             IData{Flags: FlagBeginning | FlagEnding, TSN: 9, StreamID: 1, MID: 3, PPID: 16, UserData: []byte("hello")},
		"SACK":               SACK{CumulativeTSNAck: 9, ARwnd: 1 << 16, GapAckBlocks: GapAckBlocks(nil).AppendBlock(2, 4), DuplicateTSNs: TSNList(nil).AppendTSN(8)},
		"HEARTBEAT":          Heartbeat{Info: []byte("12345678")},
		"ABORT":              Abort{Causes: RawCause{Code: CauseUserInitiatedAbort, Info: []byte("bye")}.Append(nil)},
		"ERROR":              OperationError{Causes: RawCause{Code: CauseUnrecognizedChunkType, Info: hexBytes(t, "fe000004")}.Append(nil)},
		"SHUTDOWN":           Shutdown{CumulativeTSNAck: 9},
		"SHUTDOWN ACK":       ShutdownAck{},
		"SHUTDOWN COMPLETE":  ShutdownComplete{T: true},
		"FORWARD TSN":        ForwardTSN{NewCumulativeTSN: 10, Streams: ForwardTSNStreams(nil).AppendStream(1, 2)},
		"I-FORWARD-TSN":      IForwardTSN{NewCumulativeTSN: 10, Streams: IForwardTSNStreams(nil).AppendStream(IForwardTSNStream{StreamID: 1, MID: 3})},
		"RE-CONFIG":          Reconfig{Params: OutgoingSSNResetRequest{RequestSeq: 1, ResponseSeq: 0, SenderLastTSN: 9, Streams: StreamList(nil).AppendStream(1)}.Append(nil)},
		"RE-CONFIG response": Reconfig{Params: ReconfigResponse{ResponseSeq: 1, Result: ResultSuccessPerformed}.Append(nil)},
	} {
		var w Builder
		w.Start(nil, 5000, 5000, 0x01020304)
		w.Buf = c.Append(w.Buf)
		pkt := w.Finish()
		if sctp.TryMarshalUnmarshal(pkt) != 1 {
			t.Errorf("%s: pion/sctp rejects %x", name, pkt)
		}
	}
	// And it rejects a corrupted one, so the check above means something.
	var w Builder
	w.Start(nil, 5000, 5000, 1)
	w.Buf = Shutdown{CumulativeTSNAck: 9}.Append(w.Buf)
	pkt := w.Finish()
	pkt[len(pkt)-1] ^= 1
	if sctp.TryMarshalUnmarshal(pkt) != 0 {
		t.Error("pion/sctp accepts a packet with a bad checksum")
	}
}
