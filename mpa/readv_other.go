//go:build !linux

package mpa

import "io"

// vecReader is readv(2) on Linux; elsewhere the Reader reads the octets
// after an ULPDU with a read of their own.
type vecReader struct{}

func newVecReader(io.Reader) *vecReader { return nil }

func (*vecReader) readv(a, b []byte) (int, error) { panic("unreachable") }
