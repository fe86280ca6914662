// Package linuxguest boots a small Linux guest under QEMU for interop
// tests: Debian's kernel with soft-iWARP (siw, built out of tree with its
// MPA settings as module parameters), rdma-core's rping and ibv_* tools,
// perftest's ib_*_bw and ib_*_lat, and iproute2's rdma. The guest is built
// and cached by scripts/linux-guest/build.sh (README.md there explains the
// design and what siw does); this package boots it and drives it.
//
// The guest runs under QEMU's TCG (1 vCPU, 1 GiB), so it is slow: use it
// for function, never for performance figures. Its network is QEMU's user
// networking: the guest is GuestIP (10.0.2.15), and it reaches the host's
// 127.0.0.1 at HostFromGuest (10.0.2.2), so a Go peer listening on
// 127.0.0.1:P is 10.0.2.2:P to the guest. A server in the guest is reached
// from the host through a forwarded port: HostAddr or Forward.
//
// Commands run through a 9p share, not the network: Run waits for one,
// Start runs one in the background. Each runs as root with sh, in its own
// process group, with stdout and stderr together.
//
// Tests get a guest with ForTest (one per test, closed at its end) or
// Shared (one per test binary; the package's TestMain calls Main). Both
// skip the test, with the reason, where Available says no.
package linuxguest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The guest's addresses on QEMU's user network.
const (
	// GuestIP is the guest's address (eth0, under siw0).
	GuestIP = "10.0.2.15"
	// HostFromGuest is the address at which the guest reaches the host's
	// 127.0.0.1.
	HostFromGuest = "10.0.2.2"
	// GuestShare is where the guest sees SharedDir.
	GuestShare = "/host"
)

// Options configures a guest. The zero value boots siw with its defaults
// and forwards no port.
type Options struct {
	// Forward lists guest TCP ports reachable from the host: HostAddr
	// gives the host address of each. Forward adds more once booted.
	Forward []int
	// SiwParams are siw's module parameters at boot, e.g.
	// "mpa_version=1" or "peer_to_peer=1 rtr_type=2" (see ReloadSiw).
	SiwParams string
	// Log, if not nil, receives the guest's serial console (the kernel's
	// warnings and errors) and QEMU's messages. The last 64 KiB are kept
	// in any case, and errors about boot quote their end.
	Log io.Writer
	// Memory is the guest's memory in MiB; 0 means 1024.
	Memory int
}

// Guest is a running guest. Its methods may be called from several
// goroutines.
type Guest struct {
	dir     string // temporary: share/ (9p), qmp.sock
	share   string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when QEMU exits
	exitErr error
	console *ring
	qmp     *qmp

	seq atomic.Uint64

	mu       sync.Mutex
	forwards map[int]string // guest port -> host address
	siw      string         // siw's current parameters
	procs    map[*Proc]struct{}
	closed   bool
}

// Start boots a guest and returns once siw0 is up on eth0 and the guest
// runs commands (a few seconds; ctx bounds it). The caller must Close it.
func Start(ctx context.Context, o Options) (*Guest, error) {
	if ok, why := Available(); !ok {
		return nil, errors.New("linuxguest: " + why)
	}
	kernel := filepath.Join(avail.dir, "vmlinux")
	if _, err := os.Stat(kernel); err != nil {
		kernel = filepath.Join(avail.dir, "bzImage")
	}
	dir, err := os.MkdirTemp("", "linuxguest-")
	if err != nil {
		return nil, err
	}
	g := &Guest{
		dir:      dir,
		share:    filepath.Join(dir, "share"),
		exited:   make(chan struct{}),
		console:  &ring{max: 64 << 10},
		forwards: map[int]string{},
		procs:    map[*Proc]struct{}{},
		siw:      strings.TrimSpace(o.SiwParams),
	}
	fail := func(err error) (*Guest, error) {
		g.Close()
		return nil, err
	}
	for _, d := range []string{"cmd", "run"} {
		if err := os.MkdirAll(filepath.Join(g.share, d), 0o755); err != nil {
			return fail(err)
		}
	}
	if err := os.WriteFile(filepath.Join(g.share, "siw.params"), []byte(g.siw+"\n"), 0o644); err != nil {
		return fail(err)
	}
	mem := o.Memory
	if mem == 0 {
		mem = 1024
	}
	qmpPath := filepath.Join(dir, "qmp.sock")
	args := []string{
		"-nodefaults", "-no-user-config",
		"-machine", "pc", "-accel", "tcg",
		// qemu64 with the features siw's crc32c-intel and Debian's
		// binaries like; faster to boot under TCG than -cpu max.
		"-cpu", "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16",
		"-smp", "1", "-m", strconv.Itoa(mem),
		"-display", "none", "-no-reboot",
		"-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con",
		"-qmp", "unix:" + qmpPath + ",server=on,wait=off",
		"-kernel", kernel,
		"-initrd", filepath.Join(avail.dir, "initrd"),
		"-append", "console=ttyS0 panic=-1 loglevel=4 mitigations=off cryptomgr.notests",
		// The guest's only way out is 10.0.2.2 (the host's loopback):
		// it has no default route.
		"-netdev", "user,id=n0,net=10.0.2.0/24,host=" + HostFromGuest + ",dhcpstart=10.0.2.15",
		"-device", "virtio-net-pci,netdev=n0",
		"-virtfs", "local,path=" + g.share + ",mount_tag=host,security_model=none,id=fs0",
	}
	g.cmd = exec.Command(avail.qemu, args...)
	var out io.Writer = g.console
	if o.Log != nil {
		out = multiWriter(g.console, o.Log)
	}
	g.cmd.Stdout, g.cmd.Stderr = out, out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		return fail(fmt.Errorf("linuxguest: starting %s: %w", qemuBinary, err))
	}
	go func() {
		g.exitErr = g.cmd.Wait()
		close(g.exited)
	}()

	g.qmp, err = dialQMP(ctx, qmpPath, g.exited)
	if err != nil {
		return fail(g.bootError("QMP", err))
	}
	for _, p := range o.Forward {
		if _, err := g.Forward(p); err != nil {
			return fail(err)
		}
	}
	if err := g.waitReady(ctx); err != nil {
		return fail(err)
	}
	return g, nil
}

// waitReady waits for init.sh's share/ready (or share/failed).
func (g *Guest) waitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(filepath.Join(g.share, "ready")); err == nil {
			return nil
		}
		if b, err := os.ReadFile(filepath.Join(g.share, "failed")); err == nil {
			return g.bootError("siw", errors.New(strings.TrimSpace(string(b))))
		}
		select {
		case <-ctx.Done():
			return g.bootError("boot", ctx.Err())
		case <-g.exited:
			return g.bootError("boot", fmt.Errorf("QEMU exited: %v", g.exitErr))
		case <-t.C:
		}
	}
}

func (g *Guest) bootError(what string, err error) error {
	return fmt.Errorf("linuxguest: %s: %w; console ends: %s", what, err, tail(g.console.String(), 1500))
}

// SharedDir is the host directory that the guest sees as GuestShare
// (/host): a way to pass files either way.
func (g *Guest) SharedDir() string { return g.share }

// Console returns the end of the guest's serial console (kernel warnings
// and errors, at most 64 KiB).
func (g *Guest) Console() string { return g.console.String() }

// SiwParams returns the parameters siw was last loaded with ("" for its
// defaults).
func (g *Guest) SiwParams() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.siw
}

// ExitError is the error of a guest command that exited with a status
// other than 0 (137 when killed with SIGKILL).
type ExitError struct {
	Cmd    string
	Status int
	Output string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("linuxguest: %q: exit status %d; output ends: %s", e.Cmd, e.Status, tail(e.Output, 800))
}

// RpingTeardownRace reports whether err, the exit of an rping that printed
// out, is rping's own teardown race rather than a failure: rdma-core
// before v59 (the guest's is 44) destroys its CM event channel while its
// CM event thread may be about to read it again, and that thread then
// exits the process with status 255 after printing "rdma_get_cm_event:
// Bad file descriptor", although the run succeeded (rdma-core commit
// f3ae6534a, "rping: terminate CM event thread before exiting": "This
// causes flakiness in test scripts that use rping"). The line goes to
// stderr; what rping wrote to stdout, buffered, may follow it in out.
// What rping printed is to be checked as usual.
func RpingTeardownRace(out string, err error) bool {
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 255 {
		return false
	}
	for l := range strings.Lines(out) {
		if strings.TrimSpace(l) == "rdma_get_cm_event: Bad file descriptor" {
			return true
		}
	}
	return false
}

// Run runs a shell command in the guest and waits for it: its stdout and
// stderr together, and an *ExitError if it exits with a status other than
// 0. When ctx ends first, the command's process group is killed.
func (g *Guest) Run(ctx context.Context, cmd string) (string, error) {
	p, err := g.Start(cmd)
	if err != nil {
		return "", err
	}
	out, err := p.Wait(ctx)
	if ctx.Err() != nil && !p.exited() {
		p.Kill()
	}
	return out, err
}

// Proc is a command running in the guest in the background (Start).
type Proc struct {
	g    *Guest
	id   string
	cmd  string
	done chan struct{} // closed by Wait's poller when run/ID.rc appears

	mu     sync.Mutex
	status int
	out    string
}

// Start starts a shell command in the guest in the background. The caller
// must Wait for it or Kill it (Close kills what is left).
func (g *Guest) Start(cmd string) (*Proc, error) {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return nil, errors.New("linuxguest: the guest is closed")
	}
	select {
	case <-g.exited:
		return nil, g.bootError("start", fmt.Errorf("QEMU exited: %v", g.exitErr))
	default:
	}
	id := fmt.Sprintf("c%06d", g.seq.Add(1))
	p := &Proc{g: g, id: id, cmd: cmd, done: make(chan struct{})}
	tmp := filepath.Join(g.share, "cmd", "."+id)
	if err := os.WriteFile(tmp, []byte(cmd+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(g.share, "cmd", id+".sh")); err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.procs[p] = struct{}{}
	g.mu.Unlock()
	go p.poll()
	return p, nil
}

func (p *Proc) path(ext string) string { return filepath.Join(p.g.share, "run", p.id+ext) }

// poll waits for run/ID.rc, or for QEMU's end.
func (p *Proc) poll() {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(p.path(".rc")); err == nil {
			out, _ := os.ReadFile(p.path(".out"))
			st, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				st = -1
			}
			p.mu.Lock()
			p.status, p.out = st, string(out)
			p.mu.Unlock()
			break
		}
		select {
		case <-p.g.exited:
			out, _ := os.ReadFile(p.path(".out"))
			p.mu.Lock()
			p.status, p.out = -1, string(out)
			p.mu.Unlock()
			close(p.done)
			p.g.forget(p)
			return
		case <-t.C:
		}
	}
	close(p.done)
	p.g.forget(p)
}

func (g *Guest) forget(p *Proc) {
	g.mu.Lock()
	delete(g.procs, p)
	g.mu.Unlock()
}

func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the command has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Output returns what the command has written so far (all of it once it
// has exited).
func (p *Proc) Output() string {
	if p.exited() {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.out
	}
	b, _ := os.ReadFile(p.path(".out"))
	return string(b)
}

// Wait waits for the command to exit and returns its output, with an
// *ExitError if its status is not 0. If ctx ends first, Wait returns
// ctx's error and the output so far; the command goes on.
func (p *Proc) Wait(ctx context.Context) (string, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return p.Output(), fmt.Errorf("linuxguest: %q: %w; output so far ends: %s", p.cmd, ctx.Err(), tail(p.Output(), 800))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == -1 {
		select {
		case <-p.g.exited:
			return p.out, p.g.bootError(fmt.Sprintf("%q", p.cmd), fmt.Errorf("QEMU exited: %v", p.g.exitErr))
		default:
		}
	}
	if p.status != 0 {
		return p.out, &ExitError{Cmd: p.cmd, Status: p.status, Output: p.out}
	}
	return p.out, nil
}

// Kill sends SIGKILL to the command's process group and returns when the
// guest has done so (Wait then reports exit status 137). A command the
// guest has not picked up yet never starts.
func (p *Proc) Kill() error {
	if p.exited() {
		return nil
	}
	// Not started yet: take the command back.
	if os.Remove(filepath.Join(p.g.share, "cmd", p.id+".sh")) == nil {
		os.WriteFile(p.path(".out"), nil, 0o644)
		os.WriteFile(p.path(".rc"), []byte("137\n"), 0o644)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pid string
	for {
		if b, err := os.ReadFile(p.path(".pid")); err == nil && len(bytes.TrimSpace(b)) > 0 {
			pid = string(bytes.TrimSpace(b))
			break
		}
		if p.exited() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("linuxguest: kill %q: the guest never started it", p.cmd)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := strconv.Atoi(pid); err != nil {
		return fmt.Errorf("linuxguest: kill %q: bad pid %q", p.cmd, pid)
	}
	k, err := p.g.Start("kill -KILL -" + pid + " 2>/dev/null; kill -KILL " + pid + " 2>/dev/null; true")
	if err != nil {
		return err
	}
	if _, err := k.Wait(ctx); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("linuxguest: kill %q: it did not exit", p.cmd)
	}
}

// HostAddr returns the host address ("127.0.0.1:H") forwarded to the
// guest's TCP port guestPort by Options.Forward or Forward, or "" if that
// port is not forwarded.
func (g *Guest) HostAddr(guestPort int) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.forwards[guestPort]
}

// Forward makes the guest's TCP port guestPort reachable from the host
// and returns the host address ("127.0.0.1:H"), picking a free port H. A
// port already forwarded keeps its address. QEMU accepts a connection to
// H at once and then connects to the guest: a guest port with no listener
// shows on the host as a connection that closes.
func (g *Guest) Forward(guestPort int) (string, error) {
	if a := g.HostAddr(guestPort); a != "" {
		return a, nil
	}
	var last error
	for try := 0; try < 8; try++ {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		l.Close()
		rule := fmt.Sprintf("tcp:%s-%s:%d", addr, GuestIP, guestPort)
		// Another process may take the port between Close and QEMU's
		// bind: QEMU then says "Could not set up host forwarding rule",
		// and another port is tried.
		msg, err := g.qmp.hmp("hostfwd_add n0 " + rule)
		if err != nil {
			return "", fmt.Errorf("linuxguest: hostfwd_add %s: %w", rule, err)
		}
		if strings.TrimSpace(msg) == "" {
			g.mu.Lock()
			g.forwards[guestPort] = addr
			g.mu.Unlock()
			return addr, nil
		}
		last = errors.New(strings.TrimSpace(msg))
	}
	return "", fmt.Errorf("linuxguest: forwarding guest port %d: %w", guestPort, last)
}

// WaitListening waits until a TCP socket in the guest listens on port (as
// an rdma_cm listener's does: siw listens with a kernel TCP socket), so
// that a host peer can connect to a guest server it has just started.
func (g *Guest) WaitListening(ctx context.Context, port int) error {
	script := fmt.Sprintf(`while ! awk 'NR > 1 && $4 == "0A" && $2 ~ /:%04X$/ {f = 1} END {exit !f}' /proc/net/tcp /proc/net/tcp6; do sleep 0.05; done`, port)
	_, err := g.Run(ctx, script)
	return err
}

// ReloadSiw reloads siw with module parameters params ("" for siw's
// defaults), as space-separated name=value words: rdma link delete siw0,
// rmmod siw, insmod siw.ko params, rdma link add siw0 type siw netdev eth0
// (0.3-0.45 s). A program that holds the device loses it (rdma link delete
// removes it under the program); kill such programs first. The
// parameters and their meanings are in scripts/linux-guest/README.md:
//
//	mpa_version=1|2           MPA revision siw requests as initiator (2)
//	mpa_crc_required=0|1      request CRC as initiator (0)
//	mpa_crc_strict=0|1        with mpa_crc_required=0, refuse peers that set C (0)
//	peer_to_peer=0|1          request the RFC 6581 peer-to-peer model (0)
//	rtr_type=0..3             RTRs offered: 1 Write, 2 Read, 3 both (3)
//	try_gso=0|1               the MPA GSO hint bit (0)
//	siw_tcp_nagle=0|1         leave Nagle on (0: TCP_NODELAY)
//	relaxed_ird_negotiation=0|1 adjust IRD/ORD instead of failing (1)
//
// All are also writable in /sys/module/siw/parameters/ without a reload.
func (g *Guest) ReloadSiw(ctx context.Context, params string) error {
	params = strings.TrimSpace(params)
	for _, w := range strings.Fields(params) {
		name, _, ok := strings.Cut(w, "=")
		if !ok || name == "" || strings.ContainsAny(w, "'\"`$;&|<>\\(){}") {
			return fmt.Errorf("linuxguest: ReloadSiw: %q is not a name=value word", w)
		}
	}
	if _, err := g.Run(ctx, "sh /etc/iwarp/init.sh siw "+params); err != nil {
		return err
	}
	g.mu.Lock()
	g.siw = params
	g.mu.Unlock()
	return nil
}

// Close stops the guest (QEMU is killed: the guest keeps nothing) and
// removes its temporary directory.
func (g *Guest) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	if g.qmp != nil {
		g.qmp.close()
	}
	if g.cmd != nil && g.cmd.Process != nil {
		g.cmd.Process.Kill()
		<-g.exited
	}
	return os.RemoveAll(g.dir)
}

// killProcs kills every background command still running (Shared's
// cleanup between tests).
func (g *Guest) killProcs() {
	g.mu.Lock()
	var ps []*Proc
	for p := range g.procs {
		ps = append(ps, p)
	}
	g.mu.Unlock()
	for _, p := range ps {
		p.Kill()
	}
}

// ring keeps the last max bytes written to it.
type ring struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b = append(r.b, p...)
	if len(r.b) > r.max {
		r.b = append(r.b[:0], r.b[len(r.b)-r.max:]...)
	}
	return len(p), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.b)
}

// multiWriter writes to every writer and ignores their errors (a console
// reader must not stop QEMU's output).
func multiWriter(ws ...io.Writer) io.Writer { return multi(ws) }

type multi []io.Writer

func (m multi) Write(p []byte) (int, error) {
	for _, w := range m {
		w.Write(p)
	}
	return len(p), nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	if s == "" {
		return "(nothing)"
	}
	return s
}
