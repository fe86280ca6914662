package linuxguest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestBootAndDevices boots the shared guest and checks that siw0 is an
// iWARP device on eth0, as ibv_devices, ibv_devinfo and rdma link see it.
func TestBootAndDevices(t *testing.T) {
	start := time.Now()
	g := Shared(t)
	t.Logf("guest ready after %v", time.Since(start).Round(time.Millisecond))
	ctx := ctxFor(t, time.Minute)

	t0 := time.Now()
	if _, err := g.Run(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	t.Logf("a command's round trip: %v", time.Since(t0).Round(time.Millisecond))

	out, err := g.Run(ctx, "ibv_devices; rdma link show; ibv_devinfo -d siw0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"siw0",
		"link siw0/1 state ACTIVE",
		"netdev eth0",
		"transport:\t\t\tiWARP",
		"PORT_ACTIVE",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	out, err = g.Run(ctx, "ip -4 addr show dev eth0")
	if err != nil || !strings.Contains(out, GuestIP+"/24") {
		t.Errorf("eth0 is not %s: %v\n%s", GuestIP, err, out)
	}
}

// TestRunExitStatus checks that a failing command's status and output
// come back in an *ExitError.
func TestRunExitStatus(t *testing.T) {
	g := Shared(t)
	ctx := ctxFor(t, time.Minute)
	out, err := g.Run(ctx, "echo to-stdout; echo to-stderr >&2; exit 3")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 3 {
		t.Fatalf("want exit status 3, got %v", err)
	}
	if !strings.Contains(out, "to-stdout") || !strings.Contains(out, "to-stderr") {
		t.Errorf("output %q lacks stdout or stderr", out)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "to-stderr") {
		t.Errorf("error %q lacks the status or the output", err)
	}
}

// TestBackgroundProc starts a command in the background, reads its output
// while it runs, kills it, and sees it gone.
func TestBackgroundProc(t *testing.T) {
	g := Shared(t)
	ctx := ctxFor(t, time.Minute)
	p, err := g.Start("echo started; while :; do sleep 1; done")
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.Output(), "started") {
		select {
		case <-ctx.Done():
			t.Fatal("no output from the background command")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	out, err := p.Wait(ctx)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 137 {
		t.Errorf("want exit status 137 after Kill, got %v (output %q)", err, out)
	}
	// Its process group is gone: no sleep is left.
	if out, err := g.Run(ctx, "ps | grep -c '[s]leep 1' || true"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("sleep still runs after Kill: %v %q", err, out)
	}

	// A Run whose context ends is killed too.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := g.Run(short, "sleep 30"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("want the deadline's error, got %v", err)
	}
	if out, err := g.Run(ctx, "ps | grep -c '[s]leep 30' || true"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("sleep 30 still runs after its Run's context ended: %v %q", err, out)
	}
}
