package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary play the helpers that llpbench re-runs
// itself as.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "-serve-helper" || os.Args[1] == "-relay-helper") {
		if err := run(os.Args[1:], os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRun runs one short round of three transports between two
// processes, through the proxy and relay, and reads the table.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-rounds", "2", "-duration", "200ms", "-delay", "1ms", "-timeout", "30s",
		"-transports", "iwarp-tcp,quic,pion-sctp,tcp"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"iwarp-tcp", "quic", "pion-sctp", "tcp", "2 (0)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "(1)") || strings.Contains(out.String(), "(2)") {
		t.Fatalf("a transfer failed:\n%s", out.String())
	}
}
