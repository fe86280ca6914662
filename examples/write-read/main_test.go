package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The program runs as a user runs it, over each transport.
func TestWriteRead(t *testing.T) {
	for _, url := range []string{"tcp://127.0.0.1:0", "sctp://127.0.0.1:0"} {
		out, err := exec.Command("go", "run", ".", url).CombinedOutput()
		want := strings.SplitN(url, ":", 2)[0] + ": wrote and read back 1 MiB, equal: true\n"
		if err != nil || string(out) != want {
			t.Fatalf("%s: %v\n%s", url, err, out)
		}
	}
}
