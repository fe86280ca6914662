//go:build !js

package sctpddp

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/pion/dtls/v3"
	"github.com/pion/sctp"
)

const benchMessage = 64 << 10

// BenchmarkThroughput sends 64 KiB messages over one stream on loopback,
// DTLS over UDP, and measures until the receiver has them all.
//
//   - pion-defaults: pion/dtls and pion/sctp as they come (MTU 1191, 1 MiB
//     receive window, OS-default UDP buffers, ordered stream), with the
//     sender waiting while more than the peer's 1 MiB window is queued
//     (pion queues without limit otherwise).
//   - tuned-*: Dial/Listen with this package's defaults (4 MiB UDP
//     buffers, 256 KiB send queue cap, unordered stream) at the MTU named.
//
// Run: go test -run XXX -bench Throughput -benchtime 300x ./sctpddp
func BenchmarkThroughput(b *testing.B) {
	b.Run("pion-defaults/64KiB", benchPionDefaults)
	b.Run("tuned-mtu1350/64KiB", func(b *testing.B) { benchTuned(b, DefaultMTU, false) })
	b.Run("tuned-mtu8000/64KiB", func(b *testing.B) { benchTuned(b, LoopbackMTU, false) })
	b.Run("tuned-mtu1350/MULPDU-segments", func(b *testing.B) { benchTuned(b, DefaultMTU, true) })
	b.Run("tuned-mtu8000/MULPDU-segments", func(b *testing.B) { benchTuned(b, LoopbackMTU, true) })
}

func benchPionDefaults(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc, _ := mustCert(b)
	cc, _ := mustCert(b)
	l, err := dtls.ListenWithOptions("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)},
		dtls.WithCertificates(sc), dtls.WithInsecureSkipVerify(true))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	type res struct {
		a   *sctp.Association
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ch <- res{nil, err}
			return
		}
		if err := c.(*dtls.Conn).HandshakeContext(ctx); err != nil {
			ch <- res{nil, err}
			return
		}
		a, err := sctp.ServerWithOptions(sctp.WithNetConn(c))
		ch <- res{a, err}
	}()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	conn, err := dtls.ClientWithOptions(pc, l.Addr(), dtls.WithCertificates(cc), dtls.WithInsecureSkipVerify(true))
	if err != nil {
		b.Fatal(err)
	}
	if err := conn.HandshakeContext(ctx); err != nil {
		b.Fatal(err)
	}
	client, err := sctp.ClientWithOptions(sctp.WithNetConn(conn))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	r := <-ch
	if r.err != nil {
		b.Fatal(r.err)
	}
	server := r.a
	defer server.Close()

	out, err := client.OpenStream(1, sctp.PayloadProtocolIdentifier(PPIDSegment))
	if err != nil {
		b.Fatal(err)
	}
	const window = 1 << 20
	low := make(chan struct{}, 1)
	out.SetBufferedAmountLowThreshold(window / 2)
	out.OnBufferedAmountLow(func() {
		select {
		case low <- struct{}{}:
		default:
		}
	})
	msg := make([]byte, benchMessage)
	// Open the stream on the server side first.
	if _, err := out.WriteSCTP(msg, sctp.PayloadProtocolIdentifier(PPIDSegment)); err != nil {
		b.Fatal(err)
	}
	in, err := server.AcceptStream()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, benchMessage)
	if _, _, err := in.ReadSCTP(buf); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	b.SetBytes(benchMessage)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			if _, _, err := in.ReadSCTP(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range b.N {
		for out.BufferedAmount() > window {
			select {
			case <-low:
			case <-time.After(recheckInterval):
			}
		}
		if _, err := out.WriteSCTP(msg, sctp.PayloadProtocolIdentifier(PPIDSegment)); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func benchTuned(b *testing.B, mtu uint32, segments bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc, sf := mustCert(b)
	cc, cf := mustCert(b)
	srv := &Config{Certificate: &sc, PeerFingerprints: []Fingerprint{cf}, MTU: mtu}
	cli := &Config{Certificate: &cc, PeerFingerprints: []Fingerprint{sf}, MTU: mtu}
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ch := make(chan *Association, 1)
	go func() {
		a, _ := l.Accept(ctx)
		ch <- a
	}()
	client, err := Dial(ctx, "udp", l.Addr().String(), cli)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	server := <-ch
	if server == nil {
		b.Fatal("accept failed")
	}
	defer server.Close()

	out, err := client.OpenStream(1)
	if err != nil {
		b.Fatal(err)
	}
	var msg []byte
	size := benchMessage
	write := func() error { return out.writeRaw(ctx, msg) }
	if segments {
		size = client.MULPDU()
		msg = taggedSegment(size - taggedHeaderLen)
		write = func() error { _, err := out.WriteSegment(ctx, msg); return err }
	} else {
		msg = make([]byte, benchMessage)
	}
	if err := write(); err != nil {
		b.Fatal(err)
	}
	in, err := server.AcceptStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, benchMessage+SSNLen)
	if _, err := in.readRaw(buf); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			if _, err := in.readRaw(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range b.N {
		if err := write(); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// writeRaw sends msg as one SCTP message through the stream's flow
// control, bypassing the RFC 5043 checks (64 KiB is above any MULPDU).
func (s *Stream) writeRaw(ctx context.Context, msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.waitRoom(ctx, len(msg), false); err != nil {
		return err
	}
	_, err := s.s.WriteSCTP(msg, sctp.PayloadProtocolIdentifier(PPIDSegment))
	return err
}

func (s *Stream) readRaw(buf []byte) (int, error) {
	n, _, err := s.s.ReadSCTP(buf)
	return n, err
}
