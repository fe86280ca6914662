//go:build !linux

package mpa

import "net"

// newTryNow returns nil: WriteNow writes only on Linux, where a
// non-blocking writev(2) is at hand.
func newTryNow(net.Conn) func([][]byte) (int, error) { return nil }
