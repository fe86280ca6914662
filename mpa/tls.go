//go:build !js

package mpa

import (
	"context"
	"crypto/tls"
	"net"
)

// startTLS runs TLS's handshake over nc, as the server or the client.
func startTLS(ctx context.Context, nc net.Conn, cfg *tls.Config, server bool) (net.Conn, error) {
	var tc *tls.Conn
	if server {
		tc = tls.Server(nc, cfg)
	} else {
		tc = tls.Client(nc, cfg)
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return tc, nil
}
