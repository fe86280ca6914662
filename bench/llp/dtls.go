package llp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/pion/dtls/v3"
	dtlsnet "github.com/pion/dtls/v3/pkg/net"
	"github.com/pion/transport/v5/udp"

	"github.com/iwarpgo/iwarp/sctpddp/batchconn"
)

// UDPBufferSize is the SO_RCVBUF and SO_SNDBUF of the DTLS transports'
// sockets, as sctpddp sets them (sctpddp.DefaultUDPBufferSize).
const UDPBufferSize = 4 << 20

// dtlsOptions are sctpddp's PSK options: ECDHE-PSK with AES-128-CBC
// first, then PSK with AES-128-GCM; extended master secret required.
// gcm puts the AES-GCM suite first: a pion client and server agree on
// the client's first choice.
func dtlsOptions(sec *Security, gcm bool) []dtls.Option {
	suites := []dtls.CipherSuiteID{dtls.TLS_ECDHE_PSK_WITH_AES_128_CBC_SHA256, dtls.TLS_PSK_WITH_AES_128_GCM_SHA256}
	if gcm {
		suites[0], suites[1] = suites[1], suites[0]
	}
	return []dtls.Option{
		dtls.WithPSK(func([]byte) ([]byte, error) { return sec.PSK, nil }),
		dtls.WithPSKIdentityHint([]byte("llpbench")),
		dtls.WithCipherSuites(suites...),
		dtls.WithExtendedMasterSecret(dtls.RequireExtendedMasterSecret),
	}
}

func serverOptions(o []dtls.Option) []dtls.ServerOption {
	out := make([]dtls.ServerOption, len(o))
	for i, x := range o {
		out[i] = x
	}
	return out
}

func clientOptions(o []dtls.Option) []dtls.ClientOption {
	out := make([]dtls.ClientOption, len(o))
	for i, x := range o {
		out[i] = x
	}
	return out
}

// listenDTLS listens with pion's UDP listener (one socket, a connection
// per remote address) with sctpddp's socket buffers.
func listenDTLS(addr string, opts []dtls.Option) (net.Listener, error) {
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	lc := udp.ListenConfig{ReadBufferSize: UDPBufferSize, WriteBufferSize: UDPBufferSize}
	inner, err := lc.Listen("udp", la)
	if err != nil {
		return nil, err
	}
	l, err := dtls.NewListenerWithOptions(dtlsnet.PacketListenerFromListener(inner), serverOptions(opts)...)
	if err != nil {
		inner.Close()
		return nil, err
	}
	return l, nil
}

// dialDTLS runs a DTLS handshake from a UDP socket with sctpddp's
// buffers.
func dialDTLS(ctx context.Context, addr string, opts []dtls.Option) (*dtls.Conn, error) {
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	pc.SetReadBuffer(UDPBufferSize)
	pc.SetWriteBuffer(UDPBufferSize)
	c, err := dtls.ClientWithOptions(pc, ra, clientOptions(opts)...)
	if err != nil {
		pc.Close()
		return nil, err
	}
	if err := c.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// recordSize is the largest DTLS record payload for an MTU: the MTU as
// sctp:// hands it to DTLS (so the datagram is the MTU plus the record's
// overhead, as with SCTP over DTLS), rounded down to 8.
func recordSize(mtu int) int { return mtu &^ 7 }

// DTLS is raw pion/dtls/v3 records over UDP, no SCTP: the ceiling of
// anything that runs over pion's DTLS. Records of the MTU's size (8000
// on loopback), sctpddp's PSK suites (so ECDHE-PSK with AES-128-CBC and
// HMAC-SHA256, as iwarp's sctp:// with a PSK), no flow control and no
// retransmission: what the receiver does not get is lost, and only what
// it verifies counts.
func DTLS(mtu int) Transport { return dtlsTransport(mtu, false) }

// DTLSGCM is DTLS with the PSK suite of AES-128-GCM, which sctpddp
// offers second: what the cipher suite costs.
func DTLSGCM(mtu int) Transport { return dtlsTransport(mtu, true) }

func dtlsTransport(mtu int, gcm bool) Transport {
	name := "dtls"
	if mtu != 8000 {
		name = fmt.Sprintf("dtls-%d", mtu)
	}
	if gcm {
		name += "-gcm"
	}
	size := recordSize(mtu)
	t := Transport{
		Name: name, Network: "udp", Lossy: true,
		About: fmt.Sprintf("raw pion/dtls records of %d octets, PSK (AES-CBC, HMAC-SHA256)", size),
		Listen: func(ctx context.Context, addr string, sec *Security) (Listener, error) {
			l, err := listenDTLS(addr, dtlsOptions(sec, gcm))
			if err != nil {
				return nil, err
			}
			return &dtlsListener{l: l, size: size}, nil
		},
		Dial: func(ctx context.Context, addr string, sec *Security) (Sender, error) {
			c, err := dialDTLS(ctx, addr, dtlsOptions(sec, gcm))
			if err != nil {
				return nil, err
			}
			return &dtlsSender{c: c, buf: make([]byte, size)}, nil
		},
	}
	if gcm {
		t.About = fmt.Sprintf("raw pion/dtls records of %d octets, PSK (AES-GCM)", size)
	}
	return t
}

type dtlsListener struct {
	l    net.Listener
	size int
}

func (l *dtlsListener) Addr() net.Addr { return l.l.Addr() }
func (l *dtlsListener) Close() error   { return l.l.Close() }

func (l *dtlsListener) Accept(ctx context.Context) (Receiver, error) {
	stop := context.AfterFunc(ctx, func() { l.l.Close() })
	defer stop()
	c, err := l.l.Accept()
	if err != nil {
		return nil, err
	}
	dc := c.(*dtls.Conn)
	if err := dc.HandshakeContext(ctx); err != nil {
		dc.Close()
		return nil, err
	}
	return &dtlsReceiver{c: dc, size: l.size}, nil
}

// dtlsSender sends the stream as records of size octets; a Send of n
// messages adds n * MessageSize to what it owes and sends every whole
// record of it.
type dtlsSender struct {
	c     *dtls.Conn
	batch *batchconn.Conn // corked around each Send, if not nil
	buf   []byte
	sent  int64
	owed  int64
	drops int64
}

func (s *dtlsSender) Send(ctx context.Context, n int) error {
	s.owed += int64(n) * MessageSize
	if s.batch == nil {
		return s.sendOwed(ctx)
	}
	s.batch.Cork()
	err := s.sendOwed(ctx)
	if ferr := flushBatch(s.batch); err == nil {
		err = ferr
	}
	return err
}

// sendOwed sends every whole record of what Send owes.
func (s *dtlsSender) sendOwed(ctx context.Context) error {
	for s.owed >= int64(len(s.buf)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		Fill(s.buf, s.sent)
		if _, err := s.c.Write(s.buf); err != nil {
			// A full socket buffer (ENOBUFS) loses the record, as the
			// network would.
			if !errors.Is(err, syscall.ENOBUFS) {
				return err
			}
			s.drops++
		}
		s.sent += int64(len(s.buf))
		s.owed -= int64(len(s.buf))
	}
	return nil
}

func (s *dtlsSender) Sent() int64  { return s.sent }
func (s *dtlsSender) Close() error { return s.c.Close() }

type dtlsReceiver struct {
	c    *dtls.Conn
	size int
}

func (r *dtlsReceiver) Receive(c *Counter) error {
	buf := make([]byte, 1<<16)
	for {
		n, err := r.c.Read(buf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if n != r.size {
			err := fmt.Errorf("llp: a DTLS record of %d octets, want %d", n, r.size)
			c.Fail(err)
			return err
		}
		if err := c.CheckUnit(buf[:n], r.size); err != nil {
			c.Fail(err)
			return err
		}
	}
}

func (r *dtlsReceiver) Close() error { return r.c.Close() }
