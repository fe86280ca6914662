package linuxguest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

// bootTimeout bounds a test helper's boot (a few seconds normally; a
// loaded machine's TCG is slower).
const bootTimeout = 2 * time.Minute

// skipUnless skips t when no guest can run here, or when the build is not
// cached and the tests run with -short (a fresh build takes minutes).
func skipUnless(t testing.TB) {
	t.Helper()
	if testing.Short() && !Cached() {
		t.Skip("linuxguest: -short, and the guest's build is not cached (scripts/linux-guest/build.sh makes it)")
	}
	if ok, why := Available(); !ok {
		t.Skip("linuxguest: " + why)
	}
}

// consoleLog returns where a helper's guest writes its console: os.Stderr
// when IWARP_GUEST_CONSOLE is set, else nowhere (the guest keeps its end).
func consoleLog() *os.File {
	if os.Getenv("IWARP_GUEST_CONSOLE") != "" {
		return os.Stderr
	}
	return nil
}

// ForTest boots a guest for one test and closes it when the test ends;
// it skips the test (with the reason) where Available says no. A test
// that fails gets the end of the guest's console in its log.
func ForTest(t testing.TB, o Options) *Guest {
	t.Helper()
	skipUnless(t)
	if o.Log == nil {
		if f := consoleLog(); f != nil {
			o.Log = f
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	g, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("linuxguest: the guest's console ends:\n%s", tail(g.Console(), 4000))
		}
		g.Close()
	})
	return g
}

var shared struct {
	mu          sync.Mutex
	g           *Guest
	siwDefaults string // siw's parameters when it booted
}

// Shared returns the test binary's shared guest, booting it at the first
// call (siw with its defaults, no port forwarded: use Forward). It skips
// the test where Available says no. Between tests it is put back as it
// was: at the end of each test that called Shared, the background commands
// still running are killed and siw is reloaded with its defaults if its
// parameters changed (by ReloadSiw or in sysfs). Forwarded ports stay.
// Tests that share it must not run in parallel.
//
// The package's TestMain must call Main, which closes the guest:
//
//	func TestMain(m *testing.M) { os.Exit(linuxguest.Main(m)) }
//
// (Without it QEMU still dies with the test binary, but its temporary
// directory stays.)
func Shared(t testing.TB) *Guest {
	t.Helper()
	skipUnless(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.g != nil {
		select {
		case <-shared.g.exited:
			t.Logf("linuxguest: the shared guest had stopped (%v); booting another. Its console ended:\n%s",
				shared.g.exitErr, tail(shared.g.Console(), 2000))
			shared.g.Close()
			shared.g = nil
		default:
		}
	}
	if shared.g == nil {
		o := Options{}
		if f := consoleLog(); f != nil {
			o.Log = f
		}
		ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
		g, err := Start(ctx, o)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		shared.siwDefaults, err = siwState(ctx, g)
		cancel()
		if err != nil {
			g.Close()
			t.Fatal(err)
		}
		shared.g = g
	}
	g, defaults := shared.g, shared.siwDefaults
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("linuxguest: the shared guest's console ends:\n%s", tail(g.Console(), 4000))
		}
		g.killProcs()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Parameters changed by ReloadSiw or written in sysfs.
		if now, err := siwState(ctx, g); g.SiwParams() != "" || err != nil || now != defaults {
			if err := g.ReloadSiw(ctx, ""); err != nil {
				t.Errorf("linuxguest: putting siw's defaults back: %v", err)
			}
		}
	})
	return g
}

// siwState returns siw's module parameters as the guest has them now.
func siwState(ctx context.Context, g *Guest) (string, error) {
	return g.Run(ctx, "grep . /sys/module/siw/parameters/*")
}

// Main runs the tests and then closes the shared guest, if one was
// booted; it returns m.Run's code. Call it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	if shared.g != nil {
		shared.g.Close()
		shared.g = nil
	}
	shared.mu.Unlock()
	return code
}
