//go:build !linux

package mpa

import "io"

// tryWriter is a writev(2) that does not wait, on Linux; elsewhere a
// Writer cannot write without waiting (Writer.CanNoWait reports false).
type tryWriter struct{}

func newTryWriter(io.Writer) *tryWriter { return nil }

func (*tryWriter) try([][]byte) (int, error) { panic("unreachable") }
