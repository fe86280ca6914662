package main

import (
	"bytes"
	"errors"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"testing"
)

func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"--nope"}} {
		var out bytes.Buffer
		err := runDemo(args, &out, &out)
		var ue endpoint.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("runDemo(%q) = %v, want a usage error", args, err)
		}
	}
}
