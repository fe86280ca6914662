package perftest

import (
	"os"
	"testing"

	"github.com/iwarpgo/iwarp/internal/linuxguest"
)

// One guest for the test binary: the interop tests share it.
func TestMain(m *testing.M) { os.Exit(linuxguest.Main(m)) }
