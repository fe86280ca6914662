//go:build !js

package batchconn

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/pion/dtls/v3"
)

// dtlsOptions are the options of a PSK client and server, as package
// sctpddp uses them.
func dtlsOptions() []dtls.Option {
	key := []byte("batchconn test key, 32 octets..")
	return []dtls.Option{
		dtls.WithPSK(func([]byte) ([]byte, error) { return key, nil }),
		dtls.WithPSKIdentityHint([]byte("batchconn")),
		dtls.WithCipherSuites(dtls.TLS_PSK_WITH_AES_128_GCM_SHA256),
		dtls.WithExtendedMasterSecret(dtls.RequireExtendedMasterSecret),
	}
}

// dtlsPair runs the DTLS handshake of a client on cc and a server on sc.
func dtlsPair(t testing.TB, cc, sc net.PacketConn) (client, server *dtls.Conn) {
	t.Helper()
	var copts []dtls.ClientOption
	var sopts []dtls.ServerOption
	for _, o := range dtlsOptions() {
		copts = append(copts, o)
		sopts = append(sopts, o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := dtls.ClientWithOptions(cc, sc.LocalAddr(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	server, err = dtls.ServerWithOptions(sc, cc.LocalAddr(), sopts...)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- server.HandshakeContext(ctx) }()
	if err := client.HandshakeContext(ctx); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	t.Cleanup(func() {
		_ = client.Close()
		_ = server.Close()
	})
	return client, server
}

// recordSize is the length of record i of a burst: runs of equal
// lengths (GSO's case) and others.
func recordSize(burst, i int) int {
	if burst%2 == 0 {
		return 1200
	}
	return 1 + (burst*131+i*977)%7000
}

// TestDTLS runs pion/dtls over two Conns and echoes bursts of records:
// the client writes a burst, the server reads each record and writes it
// back, the client reads the echoes; every octet is checked both ways.
// Corked, each side holds its burst and sends it with one Flush.
func TestDTLS(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    *Config
		corked bool
	}{
		{"plain", nil, false},
		{"corked", nil, true},
		{"corked-nogso-nogro", &Config{DisableGSO: true, DisableGRO: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cc, sc := newConn(t, "udp4", c.cfg), newConn(t, "udp4", c.cfg)
			client, server := dtlsPair(t, cc, sc)
			const bursts, perBurst = 40, 32
			echoDone := make(chan error, 1)
			go func() {
				echoDone <- func() error {
					buf := make([]byte, 9000)
					for burst := range bursts {
						recs := make([][]byte, perBurst)
						for i := range perBurst {
							n, err := server.Read(buf)
							if err != nil {
								return err
							}
							want := datagram(burst*perBurst+i, recordSize(burst, i))
							if !bytes.Equal(buf[:n], want) {
								return fmt.Errorf("server: record %d of burst %d: %d octets, want %d (or different content)", i, burst, n, len(want))
							}
							recs[i] = append([]byte(nil), buf[:n]...)
						}
						if c.corked {
							sc.Cork()
						}
						for _, r := range recs {
							if _, err := server.Write(r); err != nil {
								return err
							}
						}
						if c.corked {
							if err := sc.Flush(); err != nil {
								return err
							}
						}
					}
					return nil
				}()
			}()
			buf := make([]byte, 9000)
			_ = client.SetReadDeadline(time.Now().Add(20 * time.Second))
			for burst := range bursts {
				if c.corked {
					cc.Cork()
				}
				for i := range perBurst {
					if _, err := client.Write(datagram(burst*perBurst+i, recordSize(burst, i))); err != nil {
						t.Fatal(err)
					}
				}
				if c.corked {
					if err := cc.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				for i := range perBurst {
					n, err := client.Read(buf)
					if err != nil {
						t.Fatalf("client: echo %d of burst %d: %v", i, burst, err)
					}
					want := datagram(burst*perBurst+i, recordSize(burst, i))
					if !bytes.Equal(buf[:n], want) {
						t.Fatalf("client: echo %d of burst %d: %d octets, want %d (or different content)", i, burst, n, len(want))
					}
				}
			}
			if err := <-echoDone; err != nil {
				t.Fatal(err)
			}
			cs, ss := cc.Stats(), sc.Stats()
			t.Logf("client %+v", cs)
			t.Logf("server %+v", ss)
			if c.corked && cc.Features().Batch && cs.SendCalls > 2*bursts+10 {
				t.Errorf("corked: %d send calls for %d bursts", cs.SendCalls, bursts)
			}
		})
	}
}
