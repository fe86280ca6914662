package sctp

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pion/logging"
	pion "github.com/pion/sctp"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The tests in this file run the handshake of this package against
// pion/sctp over an in-memory datagram link: the test plays one endpoint
// with the handshake functions, a pion association the other.

// pionLink carries whole packets between a pion association, which holds
// the net.Conn end, and the test.
type pionLink struct {
	toPion, fromPion chan []byte
	done             chan struct{}
	once             sync.Once
}

func newPionLink() *pionLink {
	return &pionLink{toPion: make(chan []byte, 64), fromPion: make(chan []byte, 64), done: make(chan struct{})}
}

func (l *pionLink) Read(b []byte) (int, error) {
	select {
	case p := <-l.toPion:
		return copy(b, p), nil
	case <-l.done:
		return 0, io.EOF
	}
}

func (l *pionLink) Write(b []byte) (int, error) {
	select {
	case l.fromPion <- bytes.Clone(b):
		return len(b), nil
	case <-l.done:
		return 0, net.ErrClosed
	}
}

func (l *pionLink) Close() error                     { l.once.Do(func() { close(l.done) }); return nil }
func (l *pionLink) LocalAddr() net.Addr              { return &net.UDPAddr{} }
func (l *pionLink) RemoteAddr() net.Addr             { return &net.UDPAddr{} }
func (l *pionLink) SetDeadline(time.Time) error      { return nil }
func (l *pionLink) SetReadDeadline(time.Time) error  { return nil }
func (l *pionLink) SetWriteDeadline(time.Time) error { return nil }

// send hands pion a packet, copied: the test reuses its buffers.
func (l *pionLink) send(t *testing.T, pkt []byte) {
	t.Helper()
	select {
	case l.toPion <- bytes.Clone(pkt):
	case <-time.After(10 * time.Second):
		t.Fatal("pion does not read")
	}
}

// next returns pion's next packet whose first chunk has type want,
// skipping others (retransmitted INITs, HEARTBEATs). The CRC32c is
// checked unless the packet's Checksum is 0 and zeroOK.
func (l *pionLink) next(t *testing.T, want chunk.Type, zeroOK bool) []byte {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case p := <-l.fromPion:
			if !(zeroOK && chunk.Header(p).IsValid() && chunk.Header(p).Checksum() == 0) {
				if err := chunk.VerifyChecksum(p); err != nil {
					t.Fatalf("pion's packet %x: %v", p, err)
				}
			}
			it := chunk.Chunks(p)
			if it.Next() && it.Chunk().Type() == want {
				return p
			}
		case <-timeout:
			t.Fatalf("no %v from pion", want)
		}
	}
}

func pionLogger() logging.LoggerFactory {
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelDisabled
	return lf
}

// pionDefaultPort is the port pion/sctp sends from and to.
const pionDefaultPort = 5000

// firstData returns the first DATA chunk of a packet.
func firstData(t *testing.T, pkt []byte) chunk.Data {
	t.Helper()
	it := chunk.Chunks(pkt)
	for it.Next() {
		if it.Chunk().Type() == chunk.TypeData {
			d, _, err := chunk.ParseData(it.Chunk())
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no DATA in %x", pkt)
	return chunk.Data{}
}

// TestPionClient has a pion/sctp client associate with the passive side
// of this package: pion's INIT answered by HandleInit, its COOKIE ECHO by
// HandleCookieEcho, and pion's Client returns the established
// association, whose first DATA chunk carries the tag and TSN the
// handshake gave.
func TestPionClient(t *testing.T) {
	for _, zero := range []bool{false, true} {
		name := "CRC32c"
		if zero {
			name = "zero checksum"
		}
		t.Run(name, func(t *testing.T) {
			keys, err := NewCookieKeys(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			cfg := HandshakeConfig{LocalPort: pionDefaultPort, ARwnd: 1 << 20, OutboundStreams: 64, InboundStreams: 64, ZeroChecksum: zero}
			link := newPionLink()
			defer link.Close()
			type result struct {
				a   *pion.Association
				err error
			}
			client := make(chan result, 1)
			go func() {
				a, err := pion.ClientWithOptions(pion.WithNetConn(link), pion.WithLoggerFactory(pionLogger()),
					pion.WithEnableZeroChecksum(zero))
				client <- result{a, err}
			}()

			initPkt := link.next(t, chunk.TypeInit, false)
			res, err := HandleInit(nil, initPkt, &cfg, &keys, rand.Reader, time.Now())
			if err != nil {
				t.Fatalf("HandleInit of pion's INIT: %v", err)
			}
			// pion sends no Adaptation Layer Indication: RFC 5043 §11.1's
			// NONE, "RDMA and DDP procedures MUST NOT be performed upon
			// this association".
			if res.PeerAdaptation.Present || res.PeerZeroChecksum != zero || res.Unrecognized != 0 {
				t.Errorf("pion's INIT: %+v", res)
			}
			link.send(t, res.Packet)

			echo := link.next(t, chunk.TypeCookieEcho, false)
			ack, est, err := HandleCookieEcho(nil, echo, &keys, time.Now())
			if err != nil {
				t.Fatalf("HandleCookieEcho of pion's COOKIE ECHO: %v", err)
			}
			link.send(t, ack)

			var r result
			select {
			case r = <-client:
			case <-time.After(10 * time.Second):
				t.Fatal("pion's Client does not return")
			}
			if r.err != nil {
				t.Fatalf("pion's Client: %v", r.err)
			}
			defer r.a.Close()

			ih := chunk.Header(initPkt)
			i, _, _ := chunk.ParseInit(initPkt[chunk.HeaderLen:])
			if est.PeerVerificationTag != i.InitiateTag || est.PeerInitialTSN != i.InitialTSN || est.PeerARwnd != i.ARwnd ||
				est.PeerPort != ih.SourcePort() || est.PeerAdaptation.DDP() || est.SendZeroChecksum != zero || est.ReceiveZeroChecksum != zero {
				t.Errorf("established %+v, pion's INIT %+v", est, i)
			}

			// pion's first DATA chunk: our tag, its Initial TSN, and
			// under RFC 9653 a zero Checksum.
			s, err := r.a.OpenStream(0, pion.PayloadTypeWebRTCBinary)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			dataPkt := link.next(t, chunk.TypeData, zero)
			d := firstData(t, dataPkt)
			if h := chunk.Header(dataPkt); h.VerificationTag() != est.LocalVerificationTag || (h.Checksum() == 0) != zero {
				t.Errorf("pion's DATA packet header %x", []byte(h[:12]))
			}
			if d.TSN != est.PeerInitialTSN || !bytes.Equal(d.UserData, []byte("hello")) {
				t.Errorf("pion's DATA %+v", d)
			}
		})
	}
}

// TestPionServer has the active side of this package associate with a
// pion/sctp server: AppendInit's INIT, pion's INIT ACK read by
// HandleInitAck, the COOKIE ECHO accepted, pion's COOKIE ACK read by
// HandleCookieAck; pion's Server returns, and its first DATA chunk
// carries the tag and TSN the handshake gave.
func TestPionServer(t *testing.T) {
	for _, zero := range []bool{false, true} {
		name := "CRC32c"
		if zero {
			name = "zero checksum"
		}
		t.Run(name, func(t *testing.T) {
			cfg := HandshakeConfig{LocalPort: pionDefaultPort, PeerPort: pionDefaultPort, ARwnd: 1 << 20,
				OutboundStreams: 64, InboundStreams: 64, ZeroChecksum: zero}
			link := newPionLink()
			defer link.Close()
			type result struct {
				a   *pion.Association
				err error
			}
			server := make(chan result, 1)
			go func() {
				a, err := pion.ServerWithOptions(pion.WithNetConn(link), pion.WithLoggerFactory(pionLogger()),
					pion.WithEnableZeroChecksum(zero))
				server <- result{a, err}
			}()

			w, err := NewCookieWait(&cfg, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			link.send(t, w.AppendInit(nil))
			// pion sends its INIT ACK with a zero Checksum once the INIT
			// announced Zero Checksum Acceptable.
			initAck := link.next(t, chunk.TypeInitAck, zero)
			if (chunk.Header(initAck).Checksum() == 0) != zero {
				t.Errorf("pion's INIT ACK Checksum %#x", chunk.Header(initAck).Checksum())
			}
			echo, e, err := w.HandleInitAck(nil, initAck)
			if err != nil {
				t.Fatalf("HandleInitAck of pion's INIT ACK: %v", err)
			}
			if e.Unrecognized != 0 || e.Established.PeerAdaptation.Present || e.Established.SendZeroChecksum != zero {
				t.Errorf("pion's INIT ACK: %+v", e)
			}
			link.send(t, echo)
			ack := link.next(t, chunk.TypeCookieAck, zero)
			est, err := e.HandleCookieAck(ack)
			if err != nil {
				t.Fatalf("HandleCookieAck of pion's COOKIE ACK: %v", err)
			}

			var r result
			select {
			case r = <-server:
			case <-time.After(10 * time.Second):
				t.Fatal("pion's Server does not return")
			}
			if r.err != nil {
				t.Fatalf("pion's Server: %v", r.err)
			}
			defer r.a.Close()

			ia, _, _ := chunk.ParseInitAck(initAck[chunk.HeaderLen:])
			if est.PeerVerificationTag != ia.InitiateTag || est.PeerInitialTSN != ia.InitialTSN || est.PeerARwnd != ia.ARwnd ||
				est.OutboundStreams != min(64, ia.NumInboundStreams) || est.InboundStreams != min(64, ia.NumOutboundStreams) {
				t.Errorf("established %+v, pion's INIT ACK %+v", est, ia)
			}

			s, err := r.a.OpenStream(1, pion.PayloadTypeWebRTCBinary)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			dataPkt := link.next(t, chunk.TypeData, zero)
			d := firstData(t, dataPkt)
			if h := chunk.Header(dataPkt); h.VerificationTag() != est.LocalVerificationTag || (h.Checksum() == 0) != zero {
				t.Errorf("pion's DATA packet header %x", []byte(h[:12]))
			}
			if d.TSN != est.PeerInitialTSN || !bytes.Equal(d.UserData, []byte("hello")) {
				t.Errorf("pion's DATA %+v", d)
			}
		})
	}
}
