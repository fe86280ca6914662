//go:build !unix && !windows && !js

package sctpddp

import "syscall"

// setSocketBuffers leaves the OS defaults where no socket option API is
// known.
func setSocketBuffers(int) func(network, address string, c syscall.RawConn) error {
	return nil
}
