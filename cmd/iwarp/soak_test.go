//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// TestSoakServe runs the hostile-peer attacks at full scale against the
// built binaries, "iwarp serve" (tcp:// and sctp:// with --psk) and
// "iwarp perf --listen", each started afresh for one attack with its
// default limits, and checks:
//
//   - a bad-CRC RDMA Write leaves the served region as it was;
//   - a peer holding 3,800 silent MPA connections (and, apart, 3,800 TCP
//     connections that never send their MPA Request), or opening 3,800
//     DDP Stream Sessions, does not keep another peer from connecting,
//     and serve stays under 2 GiB;
//   - a flooding sctp:// peer killed without a goodbye (a child process,
//     SIGKILL) has its sessions freed within 60 s;
//   - 8 s (or longer) of spoofed DTLS junk at 10,000 datagrams a second
//     keeps serve under 500 MiB, and a peer still connects;
//   - perf hellos asking for 8 GiB (and 2 GiB) leave the perf server
//     under 1 GiB, and real "iwarp perf" runs still work.
//
// Beside every attack a well-behaved peer from another loopback address
// (the limits are per IP address) connects once a second, RDMA Writes
// 64 KiB, reads it back and compares; every one of its attempts must
// succeed. The server's resident memory (VmRSS, VmHWM) is read from /proc
// and its heap from GODEBUG=gctrace=1; at the end a table sums up.
//
// IWARP_SOAK is the soak's length (a Go duration; skipped without it):
// each attack is held for an eighth of it, at least 8 s. Run it with
// scripts/soak-serve.sh.
func TestSoakServe(t *testing.T) {
	total, err := time.ParseDuration(os.Getenv("IWARP_SOAK"))
	if err != nil {
		t.Skip("set IWARP_SOAK to a duration to run the soak (scripts/soak-serve.sh)")
	}
	hold := max(8*time.Second, total/8)
	start := time.Now()
	var rows []*soakRow
	defer func() {
		printSoakTable(rows)
		fmt.Printf("soak took %v (each attack held %v)\n", time.Since(start).Round(time.Second), hold)
	}()
	for _, a := range []struct {
		name string
		run  func(t *testing.T, hold time.Duration) *soakRow
	}{
		{"BadCRCWrite", soakBadCRC},
		{"SilentMPA", func(t *testing.T, hold time.Duration) *soakRow { return soakSilent(t, hold, true) }},
		{"SilentTCP", func(t *testing.T, hold time.Duration) *soakRow { return soakSilent(t, hold, false) }},
		{"Sessions", soakSessions},
		{"KilledFlooder", soakKilledFlooder},
		{"DTLSJunk", soakDTLSJunk},
		{"PerfHello", soakPerfHello},
	} {
		var row *soakRow
		t.Run(a.name, func(t *testing.T) {
			row = a.run(t, hold)
			if row != nil {
				row.ok = !t.Failed()
			}
		})
		if row == nil {
			row = &soakRow{attack: a.name, scale: "stopped: see the log above"}
		}
		rows = append(rows, row)
	}
}

// soakPSK is the pre-shared key of the sctp:// servers.
const soakPSK = "soak key"

// soakRow is one attack's line of the summary.
type soakRow struct {
	attack  string
	scale   string
	limit   int64 // the RSS the issue allows, 0: none stated
	before  int64 // server RSS before the attack
	peak    int64 // VmHWM: the server's peak RSS
	after   int64 // RSS after the attack ended and the server settled
	heap    int   // peak heap (MB) in gctrace
	live    int   // live heap (MB) at the last GC
	threads int   // OS threads at the peak of the attack
	cpu     time.Duration
	good    *peerStats
	freed   string
	ok      bool
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func printSoakTable(rows []*soakRow) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-44s | %-70s | %-31s | %-8s | %-7s | %-26s | %-10s | %s\n", "attack", "scale reached", "server RSS before/peak/after", "heap pk", "CPU", "good peer got in", "freed in", "verdict")
	fmt.Fprintf(&b, "%s\n", strings.Repeat("-", 240))
	for _, r := range rows {
		lim := ""
		if r.limit > 0 {
			lim = " (<" + mib(r.limit) + ")"
		}
		verdict := "MET"
		if !r.ok {
			verdict = "NOT MET"
		}
		good := "-"
		if r.good != nil {
			good = r.good.String()
		}
		freed := r.freed
		if freed == "" {
			freed = "-"
		}
		fmt.Fprintf(&b, "%-44s | %-70s | %-31s | %-8s | %-7s | %-26s | %-10s | %s\n", r.attack, r.scale,
			fmt.Sprintf("%s/%s/%s%s", strings.TrimSuffix(mib(r.before), " MiB"), strings.TrimSuffix(mib(r.peak), " MiB"), mib(r.after), lim),
			fmt.Sprintf("%d MB", r.heap), fmt.Sprintf("%.1f s", r.cpu.Seconds()), good, freed, verdict)
	}
	fmt.Print(b.String())
}

// proc is a running iwarp command: its JSON events (serve --json) or
// lines (perf), its resident memory, its heap as gctrace reports it.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{} // stdout closed

	mu      sync.Mutex
	events  []soakEvent
	lines   []string
	tail    []string // stderr's last lines, gctrace aside
	gcHeap  int      // MB: the largest heap a GC started at
	gcLive  int      // MB: the live heap after the last GC
	rssPeak int64
	thrPeak int
	stopped bool
}

type soakEvent struct {
	at time.Time
	m  map[string]any
}

var gcLine = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// startProc starts the iwarp binary with args, GODEBUG=gctrace=1.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(iwarpBin, args...)
	p.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			p.mu.Lock()
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.events = append(p.events, soakEvent{time.Now(), m})
			} else {
				p.lines = append(p.lines, sc.Text())
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		sc := bufio.NewScanner(errp)
		for sc.Scan() {
			l := sc.Text()
			p.mu.Lock()
			if m := gcLine.FindStringSubmatch(l); m != nil {
				a, _ := strconv.Atoi(m[1])
				c, _ := strconv.Atoi(m[3])
				p.gcHeap = max(p.gcHeap, a)
				p.gcLive = c
			} else if len(p.tail) < 200 {
				p.tail = append(p.tail, l)
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		for {
			select {
			case <-p.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			r, thr := procStatus(p.cmd.Process.Pid, "VmRSS"), procStatus(p.cmd.Process.Pid, "Threads")
			p.mu.Lock()
			p.rssPeak, p.thrPeak = max(p.rssPeak, r), max(p.thrPeak, int(thr))
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		p.cmd.Wait()
	})
	return p
}

// procStatus reads a field of /proc/PID/status: octets for the Vm
// fields, the number otherwise.
func procStatus(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key+":" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if len(f) == 3 && f[2] == "kB" {
				n <<= 10
			}
			return n
		}
	}
	return 0
}

func (p *proc) rss() int64 { return procStatus(p.cmd.Process.Pid, "VmRSS") }

// cpu returns the CPU time the process has used, user and system.
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
func (p *proc) hwm() int64 { return procStatus(p.cmd.Process.Pid, "VmHWM") }

// waitEvent waits for an event at index from or later for which ok holds;
// it returns its index, or -1 at the timeout.
func (p *proc) waitEvent(from int, timeout time.Duration, ok func(m map[string]any) bool) (int, soakEvent) {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		for i := from; i < len(p.events); i++ {
			if ok(p.events[i].m) {
				ev := p.events[i]
				p.mu.Unlock()
				return i, ev
			}
		}
		from = len(p.events)
		p.mu.Unlock()
		if time.Now().After(deadline) {
			return -1, soakEvent{}
		}
		select {
		case <-p.done:
			return -1, soakEvent{}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *proc) nEvents() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.events)
}

// count returns how many events of kind there are, among those from
// peers with the IP address host if host is not "".
func (p *proc) count(kind, host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.events {
		if e.m["event"] == kind && (host == "" || peerHost(e.m) == host) {
			n++
		}
	}
	return n
}

// unreported returns how many refusals serve counted without reporting
// them one by one ("unreported" events, which name no peer).
func (p *proc) unreported() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.events {
		if e.m["event"] == "unreported" {
			n += int(e.m["refused"].(float64))
		}
	}
	return n
}

func peerHost(m map[string]any) string {
	h, _, _ := net.SplitHostPort(fmt.Sprint(m["peer"]))
	return h
}

// connIDs returns the ids of the connections from host.
func (p *proc) connIDs(host string) map[float64]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := map[float64]bool{}
	for _, e := range p.events {
		if e.m["event"] == "connected" && peerHost(e.m) == host {
			ids[e.m["conn"].(float64)] = true
		}
	}
	return ids
}

// open returns the number of connections connected and not yet closed.
func (p *proc) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.events {
		switch e.m["event"] {
		case "connected":
			n++
		case "closed":
			n--
		}
	}
	return n
}

// waitOpen waits until the server has n connections open at most.
func (p *proc) waitOpen(n int, timeout time.Duration) bool {
	return waitfor.Until(timeout, func() bool { return p.open() <= n })
}

func (p *proc) stderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tail
	if len(t) > 20 {
		t = t[len(t)-20:]
	}
	return strings.Join(t, "\n")
}

// row fills in a row's memory figures: it waits for the server to settle
// (its connections closed and a few seconds), and reads the peak.
func (p *proc) row(r *soakRow) {
	r.peak = p.hwm()
	r.cpu = p.cpu()
	time.Sleep(3 * time.Second)
	r.after = p.rss()
	p.mu.Lock()
	r.heap, r.live, r.threads = p.gcHeap, p.gcLive, p.thrPeak
	p.mu.Unlock()
	if r.limit > 0 && r.peak >= r.limit {
		p.t.Errorf("%s: the server's RSS peaked at %s, the issue allows less than %s (heap at most %d MB by gctrace)", r.attack, mib(r.peak), mib(r.limit), r.heap)
	}
	p.t.Logf("%s: RSS %s before, %s peak, %s after; heap peak %d MB, live %d MB at the last GC; %d threads at most; %v of CPU",
		r.attack, mib(r.before), mib(r.peak), mib(r.after), r.heap, r.live, r.threads, r.cpu.Round(10*time.Millisecond))
}

// stop sends SIGINT and waits for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select { // the goroutine dump is written as it exits
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		p.t.Errorf("%s did not stop on SIGINT:\n%s", p.name, p.stderrTail())
		return
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Errorf("%s exited with %v:\n%s", p.name, err, p.stderrTail())
	}
}

// startSoakServe starts "iwarp serve --json" on url with its defaults.
func startSoakServe(t *testing.T, url string, args ...string) (*proc, string) {
	t.Helper()
	p := startProc(t, "serve", append([]string{"serve", "--json", "--advertise-send", "--listen", url}, args...)...)
	i, ev := p.waitEvent(0, 15*time.Second, func(m map[string]any) bool { return m["event"] == "listening" })
	if i < 0 {
		t.Fatalf("serve printed no listening event:\n%s", p.stderrTail())
	}
	time.Sleep(500 * time.Millisecond)
	return p, ev.m["url"].(string)
}

// peerStats counts a well-behaved peer's attempts.
type peerStats struct {
	mu    sync.Mutex
	tries int
	ok    int
	worst time.Duration // the slowest connection, to the advertisement
	errs  []string
}

func (s *peerStats) add(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if err != nil {
		if len(s.errs) < 5 {
			s.errs = append(s.errs, err.Error())
		}
		return
	}
	s.ok++
	s.worst = max(s.worst, d)
}

func (s *peerStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d/%d, slowest %v", s.ok, s.tries, s.worst.Round(time.Millisecond))
}

// check fails t unless every attempt succeeded.
func (s *peerStats) check(t *testing.T, what string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tries == 0 || s.ok != s.tries {
		t.Errorf("%s: the well-behaved peer got in %d times of %d: %q", what, s.ok, s.tries, s.errs)
	}
}
