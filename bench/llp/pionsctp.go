package llp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pion/dtls/v3"
	"github.com/pion/sctp"
)

// The association as sctpddp makes it (sctpddp.Default*): a 1 MiB
// receive window, 64 KiB messages, no I-DATA, and a 256 KiB cap on what
// the stream has queued or in flight.
const (
	pionReceiveWindow = 1 << 20
	pionSendQueue     = 256 << 10
	pionPPID          = 0x4b // an unassigned PPID; the payload is not RFC 5043's
)

func pionOptions(nc net.Conn, mtu int) []sctp.AssociationOption {
	return []sctp.AssociationOption{
		sctp.WithNetConn(nc),
		sctp.WithMTU(uint32(mtu)),
		sctp.WithMaxReceiveBufferSize(pionReceiveWindow),
		sctp.WithMaxMessageSize(MessageSize),
		sctp.WithEnableInterleaving(false),
	}
}

// PionSCTP is pion/sctp over pion/dtls, the stack sctp:// runs on today,
// set up as sctpddp sets it up (PSK, 4 MiB UDP buffers, the MTU named,
// 1 MiB window, 256 KiB send queue) with one reliable unordered stream
// carrying 64 KiB messages and no RFC 5043 framing.
func PionSCTP(mtu int) Transport {
	name := "pion-sctp"
	if mtu != 8000 {
		name = fmt.Sprintf("pion-sctp-%d", mtu)
	}
	return Transport{
		Name: name, Network: "udp", About: fmt.Sprintf("pion/sctp over pion/dtls, MTU %d, unordered stream", mtu),
		Listen: func(ctx context.Context, addr string, sec *Security) (Listener, error) {
			l, err := listenDTLS(addr, dtlsOptions(sec, false))
			if err != nil {
				return nil, err
			}
			return &pionListener{l: l, mtu: mtu}, nil
		},
		Dial: func(ctx context.Context, addr string, sec *Security) (Sender, error) {
			c, err := dialDTLS(ctx, addr, dtlsOptions(sec, false))
			if err != nil {
				return nil, err
			}
			opts := pionOptions(c, mtu)
			copts := make([]sctp.ClientOption, len(opts))
			for i, o := range opts {
				copts[i] = o
			}
			a, err := sctp.ClientContext(ctx, copts...)
			if err != nil {
				c.Close()
				return nil, err
			}
			st, err := a.OpenStream(1, pionPPID)
			if err != nil {
				a.Close()
				return nil, err
			}
			st.SetReliabilityParams(true, sctp.ReliabilityTypeReliable, 0)
			s := &pionSender{a: a, st: st, buf: make([]byte, MessageSize), low: make(chan struct{}, 1)}
			st.SetBufferedAmountLowThreshold(pionSendQueue / 2)
			st.OnBufferedAmountLow(func() {
				select {
				case s.low <- struct{}{}:
				default:
				}
			})
			return s, nil
		},
	}
}

type pionListener struct {
	l   net.Listener
	mtu int
}

func (l *pionListener) Addr() net.Addr { return l.l.Addr() }
func (l *pionListener) Close() error   { return l.l.Close() }

func (l *pionListener) Accept(ctx context.Context) (Receiver, error) {
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
	opts := pionOptions(dc, l.mtu)
	sopts := make([]sctp.ServerOption, len(opts))
	for i, o := range opts {
		sopts[i] = o
	}
	a, err := sctp.ServerWithOptions(sopts...)
	if err != nil {
		dc.Close()
		return nil, err
	}
	return &pionReceiver{a: a}, nil
}

// pionSender writes a message while less than the send queue cap is
// queued or in flight, as sctpddp's Stream does.
type pionSender struct {
	a    *sctp.Association
	st   *sctp.Stream
	buf  []byte
	sent int64
	low  chan struct{}
}

func (s *pionSender) Send(ctx context.Context, n int) error {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for range n {
		for s.st.BufferedAmount()+MessageSize > pionSendQueue {
			t.Reset(10 * time.Millisecond) // the callback may have fired before the check
			select {
			case <-s.low:
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		Fill(s.buf, s.sent)
		if _, err := s.st.WriteSCTP(s.buf, pionPPID); err != nil {
			return err
		}
		s.sent += MessageSize
	}
	return nil
}

func (s *pionSender) Sent() int64 { return s.sent }
func (s *pionSender) Close() error {
	s.st.Close()
	return s.a.Close()
}

type pionReceiver struct{ a *sctp.Association }

func (r *pionReceiver) Receive(c *Counter) error {
	st, err := r.a.AcceptStream()
	if err != nil {
		return nil
	}
	buf := make([]byte, MessageSize)
	for {
		n, _, err := st.ReadSCTP(buf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if n != MessageSize {
			err := fmt.Errorf("llp: an SCTP message of %d octets, want %d", n, MessageSize)
			c.Fail(err)
			return err
		}
		if err := c.CheckUnit(buf[:n], MessageSize); err != nil {
			c.Fail(err)
			return err
		}
	}
}

func (r *pionReceiver) Close() error { return r.a.Close() }
