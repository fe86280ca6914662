//go:build windows

package sctpddp

import "syscall"

// setSocketBuffers sets SO_RCVBUF and SO_SNDBUF on a socket being created
// (net.ListenConfig.Control); a refused value is not an error.
func setSocketBuffers(size int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
			_ = syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, size)
		})
	}
}
