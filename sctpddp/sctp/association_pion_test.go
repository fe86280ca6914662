//go:build !js

package sctp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pion/dtls/v3"
	pion "github.com/pion/sctp"
)

// The tests in this file associate this package with pion/sctp, in
// both roles, over plain UDP (RFC 6951's encapsulation) and over
// pion/dtls (RFC 8261), and carry many messages on several streams both
// ways, ordered and unordered, before a graceful SHUTDOWN (RFC 9260 §9.2).
// pion sends no Adaptation Layer Indication, so this package's
// HandshakeConfig.RequireDDP stays false.

// dtlsConnPair returns the two ends of a DTLS connection (PSK,
// AES-128-GCM) over UDP on 127.0.0.1: one Read is one record.
func dtlsConnPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	key := []byte("sctp interop test key, 32 octets")
	opts := []dtls.Option{
		dtls.WithPSK(func([]byte) ([]byte, error) { return key, nil }),
		dtls.WithPSKIdentityHint([]byte("sctp")),
		dtls.WithCipherSuites(dtls.TLS_PSK_WITH_AES_128_GCM_SHA256),
		dtls.WithExtendedMasterSecret(dtls.RequireExtendedMasterSecret),
	}
	var copts []dtls.ClientOption
	var sopts []dtls.ServerOption
	for _, o := range opts {
		copts = append(copts, o)
		sopts = append(sopts, o)
	}
	cu, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	su, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*net.UDPConn{cu, su} {
		c.SetReadBuffer(4 << 20)
		c.SetWriteBuffer(4 << 20)
	}
	c, err := dtls.ClientWithOptions(cu, su.LocalAddr(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dtls.ServerWithOptions(su, cu.LocalAddr(), sopts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.HandshakeContext(ctx) }()
	if err := c.HandshakeContext(ctx); err != nil {
		t.Fatalf("DTLS client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("DTLS server handshake: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c, s
}

// pionPair associates this package on ours and pion/sctp on theirs,
// this package as the client (the side that sends INIT) if oursClient.
// With zeroChecksum both announce Zero Checksum Acceptable (RFC 9653), as
// sctp:// does over DTLS, and both must see the other's.
func pionPair(t *testing.T, ours, theirs net.Conn, oursClient, zeroChecksum bool, cfg Config) (*Association, *pion.Association) {
	t.Helper()
	type res struct {
		a   *pion.Association
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var a *pion.Association
		var err error
		if oursClient {
			a, err = pion.ServerWithOptions(pion.WithNetConn(theirs), pion.WithLoggerFactory(pionLogger()),
				pion.WithEnableZeroChecksum(zeroChecksum))
		} else {
			a, err = pion.ClientWithOptions(pion.WithNetConn(theirs), pion.WithLoggerFactory(pionLogger()),
				pion.WithEnableZeroChecksum(zeroChecksum))
		}
		ch <- res{a, err}
	}()
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	cfg.Handshake.ZeroChecksum = zeroChecksum
	start := Server
	if oursClient {
		start = Client
	}
	a, err := start(ours, cfg)
	if err != nil {
		t.Fatalf("ours: %v", err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("pion: %v", r.err)
	}
	est := a.Established()
	if est.PeerAdaptation.DDP() {
		t.Errorf("pion sent an Adaptation Layer Indication: %+v", est.PeerAdaptation)
	}
	if est.SendZeroChecksum != zeroChecksum || est.ReceiveZeroChecksum != zeroChecksum {
		t.Errorf("zero checksum: send %v, receive %v; want %v", est.SendZeroChecksum, est.ReceiveZeroChecksum, zeroChecksum)
	}
	return a, r.a
}

// exchangePion sends count messages each way between ours and theirs on
// streams 0 to streams-1 and checks every byte, PPID and stream, and the
// order of the ordered messages on each stream. This package sends every
// third message unordered; pion, whose unordered flag is per stream,
// sends unordered on the odd streams.
func exchangePion(t *testing.T, ours *Association, theirs *pion.Association, count, maxLen int, streams uint16, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	const fromOurs, fromPion = 21, 22 // the seeds of the two directions
	// PPIDs no dissector of tshark's claims: the payloads stay data.
	const ourPPID, pionPPID = 0x1000, 0x2000
	ps := make([]*pion.Stream, streams)
	for sid := range streams {
		s, err := theirs.OpenStream(sid, pion.PayloadProtocolIdentifier(pionPPID+uint32(sid)))
		if err != nil {
			t.Fatal(err)
		}
		s.SetReliabilityParams(sid%2 == 1, pion.ReliabilityTypeReliable, 0)
		s.SetReadDeadline(time.Now().Add(timeout))
		ps[sid] = s
	}
	perStream := func(sid uint16) int { return (count - int(sid) + int(streams) - 1) / int(streams) }
	var wg sync.WaitGroup
	errs := make(chan error, 4*int(streams)+2)
	// check verifies message i received on stream sid, and its order.
	check := func(seed uint64, sid uint16, b []byte, ordered func(i int) bool, last *int, seen map[int]bool) error {
		if len(b) < 8 {
			return fmt.Errorf("stream %d: %d-byte message", sid, len(b))
		}
		i := int(binary.BigEndian.Uint64(b))
		if !bytes.Equal(b, testMsg(seed, i, maxLen)) || uint16(i)%streams != sid || seen[i] {
			return fmt.Errorf("stream %d: message %d corrupted, misrouted or duplicated", sid, i)
		}
		seen[i] = true
		if ordered(i) {
			if i <= *last {
				return fmt.Errorf("stream %d: ordered message %d after %d", sid, i, *last)
			}
			*last = i
		}
		return nil
	}
	wg.Add(2)
	go func() { // ours -> pion
		defer wg.Done()
		for i := range count {
			m := testMsg(fromOurs, i, maxLen)
			sid := uint16(i) % streams
			if err := ours.SendMessageContext(ctx, sid, ourPPID+uint32(sid), i%3 == 0, [][]byte{m[:3], m[3:]}); err != nil {
				errs <- fmt.Errorf("SendMessage %d: %w", i, err)
				return
			}
		}
	}()
	go func() { // pion -> ours
		defer wg.Done()
		for i := range count {
			m := testMsg(fromPion, i, maxLen)
			sid := uint16(i) % streams
			if _, err := ps[sid].WriteSCTP(m, pion.PayloadProtocolIdentifier(pionPPID+uint32(sid))); err != nil {
				errs <- fmt.Errorf("pion WriteSCTP %d: %w", i, err)
				return
			}
		}
	}()
	for sid := range streams {
		wg.Add(2)
		go func() { // at pion
			defer wg.Done()
			buf := make([]byte, maxLen)
			last, seen := -1, map[int]bool{}
			for range perStream(sid) {
				n, ppid, err := ps[sid].ReadSCTP(buf)
				if err != nil {
					errs <- fmt.Errorf("pion ReadSCTP on stream %d: %w", sid, err)
					return
				}
				if ppid != pion.PayloadProtocolIdentifier(ourPPID+uint32(sid)) {
					errs <- fmt.Errorf("pion: stream %d: PPID %d", sid, ppid)
					return
				}
				if err := check(fromOurs, sid, buf[:n], func(i int) bool { return i%3 != 0 }, &last, seen); err != nil {
					errs <- fmt.Errorf("at pion: %w", err)
					return
				}
			}
		}()
		go func() { // at ours
			defer wg.Done()
			st, err := ours.OpenStream(sid)
			if err != nil {
				errs <- err
				return
			}
			buf := make([]byte, maxLen)
			last, seen := -1, map[int]bool{}
			for range perStream(sid) {
				n, ppid, unordered, err := st.ReadMessage(ctx, buf)
				if err != nil {
					errs <- fmt.Errorf("ReadMessage on stream %d: %w", sid, err)
					return
				}
				if ppid != pionPPID+uint32(sid) || unordered != (sid%2 == 1) {
					errs <- fmt.Errorf("stream %d: PPID %d, unordered %v", sid, ppid, unordered)
					return
				}
				if err := check(fromPion, sid, buf[:n], func(int) bool { return sid%2 == 0 }, &last, seen); err != nil {
					errs <- fmt.Errorf("at ours: %w", err)
					return
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

// TestInteropPion runs this package against pion/sctp in both roles,
// over UDP and over DTLS (there with zero checksums, RFC 9653): 200
// messages of up to 8 KiB each way on 5 streams, then a SHUTDOWN
// started by the client. Over UDP the packets
// are captured and dissected by tshark: no malformed packet, every
// checksum good, the Adaptation Layer Indication in this package's INIT
// or INIT ACK and none in pion's, and the SHUTDOWN sequence complete.
func TestInteropPion(t *testing.T) {
	for _, transport := range []string{"udp", "dtls"} {
		for _, oursClient := range []bool{true, false} {
			name := transport + "/pion client"
			if oursClient {
				name = transport + "/pion server"
			}
			t.Run(name, func(t *testing.T) {
				var ours, theirs net.Conn
				var capture *captureConn
				if transport == "udp" {
					ours, theirs = udpPair(t)
					capture = newCaptureConn(ours)
					ours = capture
				} else {
					ours, theirs = dtlsConnPair(t)
				}
				a, p := pionPair(t, ours, theirs, oursClient, transport == "dtls", Config{})
				defer p.Close()
				exchangePion(t, a, p, 200, 8<<10, 5, 20*time.Second)
				shutdownWithPion(t, a, p, oursClient)
				if capture == nil {
					return
				}
				r := dissect(t, capture.writePcap(t, t.TempDir()), uint16(theirs.LocalAddr().(*net.UDPAddr).Port))
				ourChunk := "2" // INIT ACK
				if oursClient {
					ourChunk = "1" // INIT
				}
				checkDissection(t, r, map[string]bool{ourChunk: true})
				checkFragmented(t, r, capture)
				if r.chunks["7"] == 0 || r.chunks["8"] == 0 || r.chunks["14"] == 0 {
					t.Errorf("SHUTDOWN %d, SHUTDOWN ACK %d, SHUTDOWN COMPLETE %d", r.chunks["7"], r.chunks["8"], r.chunks["14"])
				}
				t.Logf("tshark: %d frames, chunks %v, DATA chunks of fragments by UDP source port %v", r.frames, r.chunks, r.fragments)
			})
		}
	}
}

// TestInteropPionLoss runs this package against pion/sctp in both roles
// over UDP through a link that drops 2 % of the packets each way,
// duplicates 2 % and reorders 2 %: 100 messages of up to 4 KiB each way
// on 4 streams, every one checked, then a SHUTDOWN on a clean link.
func TestInteropPionLoss(t *testing.T) {
	for _, oursClient := range []bool{true, false} {
		name := "pion client"
		if oursClient {
			name = "pion server"
		}
		t.Run(name, func(t *testing.T) {
			ours, theirs := udpPair(t)
			lossy := newLossyConn(ours, 3, 0.02, 0.02, 0.02)
			a, p := pionPair(t, lossy, theirs, oursClient, false, Config{})
			defer p.Close()
			exchangePion(t, a, p, 100, 4<<10, 4, 30*time.Second)
			lossy.stop()
			shutdownWithPion(t, a, p, oursClient)
			dropped, duped, swapped := lossy.impaired()
			t.Logf("the link dropped %d packets, duplicated %d, reordered %d", dropped, duped, swapped)
			if dropped == 0 || duped+swapped == 0 {
				t.Errorf("the link dropped %d packets, duplicated %d, reordered %d: the run was not impaired", dropped, duped, swapped)
			}
		})
	}
}

// shutdownWithPion has the client end the association gracefully and
// checks that this package saw a clean SHUTDOWN.
func shutdownWithPion(t *testing.T, a *Association, p *pion.Association, oursClient bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if oursClient {
		if err := a.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		return
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("pion Shutdown: %v", err)
	}
	select {
	case <-a.Done():
	case <-ctx.Done():
		t.Fatal("pion's SHUTDOWN did not end the association")
	}
	if err := a.Err(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after pion's SHUTDOWN: %v, want ErrClosed", err)
	}
	a.Close()
}
