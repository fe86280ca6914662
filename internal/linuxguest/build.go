package linuxguest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// qemuBinary is the emulator the guest runs in (Debian's qemu-system-x86).
const qemuBinary = "qemu-system-x86_64"

// buildTimeout bounds a build that Available starts: a fresh one takes
// 1-5 minutes (package downloads, siw's build, the initramfs).
const buildTimeout = 15 * time.Minute

var avail struct {
	once sync.Once
	ok   bool
	why  string
	dir  string // the built guest: vmlinux or bzImage, initrd, stamp
	qemu string
}

// Available reports whether a guest can run here; if not, it says why in
// one line (for t.Skip).
//
// It needs linux/amd64, qemu-system-x86_64 and the guest that
// scripts/linux-guest/build.sh builds. If that build is not in the cache
// (${IWARP_GUEST_CACHE:-$HOME/.cache/iwarp/linux-guest}) or QEMU is not
// installed, Available runs the script, which builds (1-2 minutes) and
// installs what is missing with apt-get (as root or with sudo): the answer
// is no only when that fails. IWARP_LINUX_GUEST=off makes the answer no.
// The answer is computed once per process.
func Available() (ok bool, why string) {
	avail.once.Do(func() { avail.ok, avail.why = available() })
	return avail.ok, avail.why
}

func available() (bool, string) {
	if v := os.Getenv("IWARP_LINUX_GUEST"); v == "off" || v == "0" {
		return false, "IWARP_LINUX_GUEST=" + v + " turns the Linux guest off"
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return false, "the Linux guest runs on linux/amd64 only, not " + runtime.GOOS + "/" + runtime.GOARCH
	}
	script, err := buildScript()
	if err != nil {
		return false, err.Error()
	}
	_, noQEMU := exec.LookPath(qemuBinary)
	if out, err := exec.Command("bash", script, "--check").Output(); err == nil && noQEMU == nil {
		avail.dir = lastLine(out)
		avail.qemu, _ = exec.LookPath(qemuBinary)
		return true, ""
	}
	// Build, or install QEMU (build.sh does both: it returns at once when
	// the build is cached).
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if os.Getenv("IWARP_GUEST_CONSOLE") != "" {
		cmd.Stderr = multiWriter(&stderr, os.Stderr)
	}
	if err := cmd.Run(); err != nil {
		return false, fmt.Sprintf("the Linux guest's build failed (%v): %s", err, lastLine(stderr.Bytes()))
	}
	avail.dir = lastLine(stdout.Bytes())
	q, err := exec.LookPath(qemuBinary)
	if err != nil {
		return false, qemuBinary + " is not installed (Debian: apt-get install qemu-system-x86)"
	}
	avail.qemu = q
	return true, ""
}

// Cached reports whether the guest's build is in the cache, without
// building it. Test helpers use it to skip under -short rather than build.
func Cached() bool {
	script, err := buildScript()
	if err != nil {
		return false
	}
	return exec.Command("bash", script, "--check").Run() == nil
}

// buildScript finds scripts/linux-guest/build.sh: beside this source file
// in the module, or above the working directory.
func buildScript() (string, error) {
	const rel = "scripts/linux-guest/build.sh"
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			p := filepath.Join(d, rel)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		tried = append(tried, "above "+wd)
	}
	return "", errors.New("cannot find " + rel + " (looked " + strings.Join(tried, ", ") + ")")
}

func lastLine(b []byte) string {
	s := strings.TrimRight(string(b), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}
