package llp

import (
	"context"
	"errors"
	"net"

	"github.com/quic-go/quic-go"
)

// quicConfig gives quic-go room to run: flow-control windows that its
// auto-tuning may grow to 64 MiB per stream and 96 MiB per connection
// (the defaults stop at 6 and 15 MiB, less than a 100 ms path at a few
// hundred MB/s), the default 512 KiB starting windows so that the tuning
// is quic-go's own. GSO and the 7 MiB UDP buffers quic-go asks for are
// its defaults (it forces them with SO_RCVBUFFORCE/SO_SNDBUFFORCE where
// it has the privilege, and logs if it could not).
func quicConfig() *quic.Config {
	return &quic.Config{
		MaxStreamReceiveWindow:     64 << 20,
		MaxConnectionReceiveWindow: 96 << 20,
		MaxIdleTimeout:             30e9,
	}
}

// QUIC is quic-go: one bidirectional stream carrying the messages, TLS
// 1.3, the sender writing 64 KiB buffers as io.Copy would.
func QUIC() Transport {
	return Transport{
		Name: "quic", Network: "udp", About: "quic-go, one stream, TLS 1.3",
		Listen: func(ctx context.Context, addr string, sec *Security) (Listener, error) {
			tc := sec.serverTLS()
			tc.NextProtos = []string{"llpbench"}
			l, err := quic.ListenAddr(addr, tc, quicConfig())
			if err != nil {
				return nil, err
			}
			return &quicListener{l: l}, nil
		},
		Dial: func(ctx context.Context, addr string, sec *Security) (Sender, error) {
			tc := sec.clientTLS()
			tc.NextProtos = []string{"llpbench"}
			c, err := quic.DialAddr(ctx, addr, tc, quicConfig())
			if err != nil {
				return nil, err
			}
			st, err := c.OpenStreamSync(ctx)
			if err != nil {
				c.CloseWithError(0, "")
				return nil, err
			}
			return newStreamSender(st, func() error {
				st.Close()
				return c.CloseWithError(0, "")
			}), nil
		},
	}
}

type quicListener struct{ l *quic.Listener }

func (l *quicListener) Addr() net.Addr { return l.l.Addr() }
func (l *quicListener) Close() error   { return l.l.Close() }

func (l *quicListener) Accept(ctx context.Context) (Receiver, error) {
	c, err := l.l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return &quicReceiver{c: c}, nil
}

// quicReceiver takes the connection's first stream when its first data
// arrives.
type quicReceiver struct{ c *quic.Conn }

func (r *quicReceiver) Receive(c *Counter) error {
	st, err := r.c.AcceptStream(context.Background())
	if err != nil {
		return nil // the connection closed before any stream
	}
	err = (&streamReceiver{r: st}).Receive(c)
	var ae *quic.ApplicationError
	if errors.As(err, &ae) {
		return nil // the sender closed the connection
	}
	return err
}

func (r *quicReceiver) Close() error { return r.c.CloseWithError(0, "") }
