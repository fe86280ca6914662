// Command lab8guest runs the steps of lab 8 that need Linux's siw without
// typing into the guest: it boots the project's guest (built by
// scripts/linux-guest/build.sh; a few seconds once built), runs the
// step's commands on both sides, prints what each printed, and powers the
// guest off. The host side is the iwarp command (on the PATH, or
// --iwarp).
//
//	go run ./docs/labs/code/lab8guest --step 3   # Linux pings Go
//	go run ./docs/labs/code/lab8guest --step 4   # Go pings Linux's rping -s -P
//	go run ./docs/labs/code/lab8guest --step 5   # siw peer-to-peer, then revision 1
//	go run ./docs/labs/code/lab8guest --step 9   # perftest's ib_write_bw both ways
//
// --pcap DIR keeps the host side's captures there (one file per run).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/iwarpgo/iwarp/internal/linuxguest"
)

// rpingPort is rping's port in the guest; the host side listens on a
// free port of its own, which the guest reaches at 10.0.2.2.
const rpingPort = 7174

type lab struct {
	g     *linuxguest.Guest
	iwarp string
	pcap  string
}

func main() {
	step := flag.Int("step", 3, "the step of lab 8: 3, 4, 5 or 9")
	iwarp := flag.String("iwarp", "iwarp", "the iwarp command")
	pcap := flag.String("pcap", "", "a directory for the host side's captures")
	flag.Parse()
	steps := map[int]func(context.Context, *lab) error{3: step3, 4: step4, 5: step5, 9: step9}
	f, ok := steps[*step]
	if !ok {
		fmt.Fprintln(os.Stderr, "lab8guest: steps 3, 4, 5 and 9 run here (1, 6, 7, 8 and 10 need no guest)")
		os.Exit(2)
	}
	if ok, why := linuxguest.Available(); !ok {
		fmt.Fprintln(os.Stderr, "lab8guest: no guest here:", why)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fmt.Println("== booting the guest (siw on eth0)")
	g, err := linuxguest.Start(ctx, linuxguest.Options{Forward: []int{rpingPort}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab8guest:", err)
		os.Exit(1)
	}
	l := &lab{g: g, iwarp: *iwarp, pcap: *pcap}
	err = f(ctx, l)
	g.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab8guest:", err)
		os.Exit(1)
	}
}

// host starts the iwarp command with args and returns it with its output.
func (l *lab) host(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, error) {
	cmd := exec.CommandContext(ctx, l.iwarp, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	fmt.Printf("host$ iwarp %s\n", strings.Join(args, " "))
	return cmd, &out, cmd.Start()
}

// capture returns the --pcap flags for a host run named name.
func (l *lab) capture(name string) []string {
	if l.pcap == "" {
		return nil
	}
	return []string{"--pcap", filepath.Join(l.pcap, name+".pcap")}
}

// guest runs cmd in the guest and prints what it printed.
func (l *lab) guest(ctx context.Context, cmd string) (string, error) {
	fmt.Printf("guest# %s\n", cmd)
	out, err := l.g.Run(ctx, cmd)
	fmt.Print(indent(out))
	return out, err
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// freePort returns a free TCP port on the host's loopback.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// linuxPingsGo runs our rping server on the host and rping -c in the
// guest, through 10.0.2.2.
func (l *lab) linuxPingsGo(ctx context.Context, name string, serverArgs ...string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	args := append([]string{"rping", "-s", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-v", "-V", "-d"}, serverArgs...)
	srv, out, err := l.host(ctx, append(args, l.capture(name)...)...)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, out, "listening on"); err != nil {
		srv.Process.Kill()
		return fmt.Errorf("our rping server: %w\n%s", err, out)
	}
	_, gerr := l.guest(ctx, fmt.Sprintf("rping -c -a %s -p %d -C 3 -v -V", linuxguest.HostFromGuest, port))
	werr := srv.Wait()
	fmt.Print(indent(out.String()))
	if gerr != nil {
		return fmt.Errorf("the guest's rping: %w", gerr)
	}
	return werr
}

func waitFor(ctx context.Context, out *bytes.Buffer, text string) error {
	for !strings.Contains(out.String(), text) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func step3(ctx context.Context, l *lab) error {
	fmt.Println("== step 3: Linux pings Go")
	return l.linuxPingsGo(ctx, "from-linux")
}

func step4(ctx context.Context, l *lab) error {
	fmt.Println("== step 4: Go pings Linux; rping's server with -P serves one client after another")
	srv, err := l.g.Start(fmt.Sprintf("rping -s -P -a %s -p %d -v", linuxguest.GuestIP, rpingPort))
	if err != nil {
		return err
	}
	defer srv.Kill()
	fmt.Printf("guest# rping -s -P -a %s -p %d -v &\n", linuxguest.GuestIP, rpingPort)
	if err := l.g.WaitListening(ctx, rpingPort); err != nil {
		return err
	}
	addr := l.g.HostAddr(rpingPort)
	host, port, _ := net.SplitHostPort(addr)
	for i := range 3 {
		cli, out, err := l.host(ctx, append([]string{"rping", "-c", "-a", host, "-p", port, "-C", "3", "-v", "-V", "-d"},
			l.capture(fmt.Sprintf("to-linux-%d", i+1))...)...)
		if err != nil {
			return err
		}
		err = cli.Wait()
		fmt.Print(indent(out.String()))
		if err != nil {
			return fmt.Errorf("our rping client, connection %d: %w", i+1, err)
		}
	}
	fmt.Println("guest's rping server, so far:")
	fmt.Print(indent(srv.Output()))
	return nil
}

func step5(ctx context.Context, l *lab) error {
	fmt.Println("== step 5a: siw asks for the peer-to-peer model, a zero-length RDMA Read as its RTR")
	if err := l.g.ReloadSiw(ctx, "peer_to_peer=1 rtr_type=2"); err != nil {
		return err
	}
	if err := l.linuxPingsGo(ctx, "p2p"); err != nil {
		return err
	}
	fmt.Println("== step 5b: siw as MPA revision 1: no IRD or ORD in the startup frames")
	if err := l.g.ReloadSiw(ctx, "mpa_version=1"); err != nil {
		return err
	}
	if err := l.linuxPingsGo(ctx, "rev1"); err != nil {
		return err
	}
	fmt.Println("== step 5c: our client in revision 1 to the guest's rping -s: its server cannot post its RDMA Read")
	if err := l.g.ReloadSiw(ctx, ""); err != nil {
		return err
	}
	srv, err := l.g.Start(fmt.Sprintf("rping -s -a %s -p %d -v", linuxguest.GuestIP, rpingPort))
	if err != nil {
		return err
	}
	defer srv.Kill()
	if err := l.g.WaitListening(ctx, rpingPort); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(l.g.HostAddr(rpingPort))
	cli, out, err := l.host(ctx, "rping", "-c", "-a", host, "-p", port, "-C", "1", "-v", "-d", "--rev", "1")
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sout, serr := srv.Wait(wctx)
	cli.Process.Kill()
	cli.Wait()
	fmt.Print(indent(out.String()))
	fmt.Println("guest's rping server:")
	fmt.Print(indent(sout))
	var ee *linuxguest.ExitError
	if serr != nil && !errors.As(serr, &ee) {
		return serr
	}
	return nil
}

func step9(ctx context.Context, l *lab) error {
	fmt.Println("== step 9a: perftest's client in the guest, our server on the host")
	port, err := freePort()
	if err != nil {
		return err
	}
	srv, out, err := l.host(ctx, append([]string{"perf", "--perftest", "--listen", fmt.Sprintf("tcp://127.0.0.1:%d", port),
		"--test", "write_bw", "-n", "100", "-s", "4096", "--once"}, l.capture("pt-from-linux")...)...)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, out, "server (perftest -R protocol)"); err != nil {
		srv.Process.Kill()
		return err
	}
	if _, err := l.guest(ctx, fmt.Sprintf("ib_write_bw -R -d siw0 -F -n 100 -s 4096 -p %d %s", port, linuxguest.HostFromGuest)); err != nil {
		srv.Process.Kill()
		return err
	}
	err = srv.Wait()
	fmt.Print(indent(out.String()))
	if err != nil {
		return err
	}
	fmt.Println("== step 9b: perftest's server in the guest, our client")
	psrv, err := l.g.Start(fmt.Sprintf("ib_write_bw -R -d siw0 -F -n 100 -s 4096 -p %d", rpingPort))
	if err != nil {
		return err
	}
	defer psrv.Kill()
	fmt.Printf("guest# ib_write_bw -R -d siw0 -F -n 100 -s 4096 -p %d &\n", rpingPort)
	if err := l.g.WaitListening(ctx, rpingPort); err != nil {
		return err
	}
	cli, cout, err := l.host(ctx, "perf", "--perftest", "--connect", "tcp://"+l.g.HostAddr(rpingPort),
		"--test", "write_bw", "-n", "100", "-s", "4096", "--no-crc")
	if err != nil {
		return err
	}
	err = cli.Wait()
	fmt.Print(indent(cout.String()))
	gout, gerr := psrv.Wait(ctx)
	fmt.Println("guest's ib_write_bw:")
	fmt.Print(indent(gout))
	if err != nil {
		return err
	}
	return gerr
}
