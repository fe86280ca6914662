package llp

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
)

// streamSender writes messages to a byte stream, each filled with its
// part of the pattern just before it is written.
type streamSender struct {
	w     io.Writer
	buf   []byte
	sent  int64
	close func() error
}

func newStreamSender(w io.Writer, close func() error) *streamSender {
	return &streamSender{w: w, buf: make([]byte, MessageSize), close: close}
}

func (s *streamSender) Send(ctx context.Context, n int) error {
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		Fill(s.buf, s.sent)
		if _, err := s.w.Write(s.buf); err != nil {
			return err
		}
		s.sent += MessageSize
	}
	return nil
}

func (s *streamSender) Sent() int64  { return s.sent }
func (s *streamSender) Close() error { return s.close() }

// streamReceiver reads a byte stream a message at a time and checks it
// in order.
type streamReceiver struct {
	r     io.Reader
	close func() error
}

func (r *streamReceiver) Receive(c *Counter) error {
	buf := make([]byte, MessageSize)
	var off int64
	for {
		n, err := io.ReadFull(r.r, buf)
		if n > 0 {
			n -= n % 8 // a short last read ends the stream: its tail is not counted
			if cerr := Check(buf[:n], off); cerr != nil {
				c.Fail(cerr)
				return cerr
			}
			c.Add(n)
			off += int64(n)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
	}
}

func (r *streamReceiver) Close() error { return r.close() }

// tcpListener accepts TCP connections, wrapping each with wrap.
type tcpListener struct {
	l    net.Listener
	wrap func(context.Context, net.Conn) (net.Conn, error)
}

func (l *tcpListener) Addr() net.Addr { return l.l.Addr() }
func (l *tcpListener) Close() error   { return l.l.Close() }

func (l *tcpListener) Accept(ctx context.Context) (Receiver, error) {
	stop := context.AfterFunc(ctx, func() { l.l.Close() })
	defer stop()
	c, err := l.l.Accept()
	if err != nil {
		return nil, err
	}
	if l.wrap != nil {
		if c, err = l.wrap(ctx, c); err != nil {
			return nil, err
		}
	}
	return &streamReceiver{r: c, close: c.Close}, nil
}

// TCP is plain TCP: the kernel's stream with the OS-default buffers (they
// autotune), a reference for tcp://.
func TCP() Transport {
	return Transport{
		Name: "tcp", Network: "tcp", About: "plain TCP, OS defaults",
		Listen: func(ctx context.Context, addr string, _ *Security) (Listener, error) {
			var lc net.ListenConfig
			l, err := lc.Listen(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return &tcpListener{l: l}, nil
		},
		Dial: func(ctx context.Context, addr string, _ *Security) (Sender, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return newStreamSender(c, c.Close), nil
		},
	}
}

// TLS is TLS 1.3 over TCP (crypto/tls, AES-GCM with the hardware's
// instructions), a reference for an encrypted stream.
func TLS() Transport {
	return Transport{
		Name: "tls", Network: "tcp", About: "TLS 1.3 over TCP (crypto/tls)",
		Listen: func(ctx context.Context, addr string, sec *Security) (Listener, error) {
			var lc net.ListenConfig
			l, err := lc.Listen(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			cfg := sec.serverTLS()
			return &tcpListener{l: l, wrap: func(ctx context.Context, c net.Conn) (net.Conn, error) {
				tc := tls.Server(c, cfg)
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}}, nil
		},
		Dial: func(ctx context.Context, addr string, sec *Security) (Sender, error) {
			d := tls.Dialer{Config: sec.clientTLS()}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return newStreamSender(c, c.Close), nil
		},
	}
}
