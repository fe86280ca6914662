package mpa

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
)

// startTLS is not offered in the browser: a page reaches its peer over a
// WebSocket, which the browser protects with TLS already, and the TLS
// code would more than double the browser peer.
func startTLS(context.Context, net.Conn, *tls.Config, bool) (net.Conn, error) {
	return nil, errors.New("mpa: Config.TLS is not available in the browser (use wss://)")
}
