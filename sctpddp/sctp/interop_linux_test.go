//go:build linux

package sctp

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/linuxguest"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// The test in this file associates this package with the Linux kernel's
// SCTP in the QEMU guest of internal/linuxguest, over UDP encapsulation
// (RFC 6951): the guest's net.sctp.udp_port is its UDP port, its
// net.sctp.encap_port the host's, and the C peer of testdata/usrsctp,
// built for the kernel's sockets, runs in the guest.

// guestUDPPort is the kernel's UDP encapsulation port in the guest: RFC
// 6951 §5.1's registered port.
const guestUDPPort = 9899

// guestModules are the modules the kernel's SCTP over UDP needs, in load
// order (libcrc32c is in the guest already).
var guestModules = []string{"kernel/net/ipv4/udp_tunnel.ko", "kernel/net/ipv6/ip6_udp_tunnel.ko", "kernel/net/sctp/sctp.ko"}

// guestSCTP makes the guest's kernel speak SCTP over UDP: sctp.ko is
// loaded (from the guest's image when it has it, else taken from the
// Debian package of the guest's kernel that the guest's build keeps in
// its cache) and net.sctp.udp_port set. encap_port is the host's UDP port
// the kernel's associations send to.
func guestSCTP(t *testing.T, g *linuxguest.Guest, encapPort int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := g.Run(ctx, "test -d /proc/sys/net/sctp || modprobe sctp 2>/dev/null"); err != nil {
		abi, err := g.Run(ctx, "uname -r")
		if err != nil {
			t.Fatal(err)
		}
		dir := kernelModules(t, strings.TrimSpace(abi))
		var load []string
		for _, m := range guestModules {
			b, err := os.ReadFile(filepath.Join(dir, m))
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(m)
			if err := os.WriteFile(filepath.Join(g.SharedDir(), name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			load = append(load, fmt.Sprintf("{ grep -q '^%s ' /proc/modules || insmod %s/%s; }", strings.TrimSuffix(name, ".ko"), linuxguest.GuestShare, name))
		}
		if out, err := g.Run(ctx, strings.Join(load, " && ")); err != nil {
			t.Fatalf("loading sctp.ko in the guest: %v\n%s", err, out)
		}
	}
	script := fmt.Sprintf("echo %d >/proc/sys/net/sctp/udp_port && echo %d >/proc/sys/net/sctp/encap_port", guestUDPPort, encapPort)
	if out, err := g.Run(ctx, script); err != nil {
		t.Fatalf("net.sctp.udp_port, encap_port: %v\n%s", err, out)
	}
}

// kernelModules returns a directory holding guestModules of kernel abi,
// unpacked once from the linux-image .deb in the guest's build cache
// (scripts/linux-guest/build.sh keeps it in $cache/debs) into
// $cache/sctp-modules/abi.
func kernelModules(t *testing.T, abi string) string {
	t.Helper()
	cache := os.Getenv("IWARP_GUEST_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "iwarp", "linux-guest")
	}
	dir := filepath.Join(cache, "sctp-modules", abi)
	if _, err := os.Stat(filepath.Join(dir, guestModules[len(guestModules)-1])); err == nil {
		return dir
	}
	debs, _ := filepath.Glob(filepath.Join(cache, "debs", "linux-image-"+abi+"_*.deb"))
	if len(debs) == 0 {
		t.Skipf("the guest's kernel has no sctp.ko in its initramfs, and no linux-image-%s .deb is in %s/debs to take it from", abi, cache)
	}
	// A cache that cannot be written to leaves the modules in the test's
	// temporary directory, unpacked again by each run.
	os.MkdirAll(filepath.Dir(dir), 0o755)
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "unpack-")
	if err != nil {
		tmp, dir = t.TempDir(), filepath.Join(t.TempDir(), abi)
	}
	defer os.RemoveAll(tmp)
	args := []string{"-x", "-C", tmp, "--wildcards"}
	for _, m := range guestModules {
		args = append(args, "./lib/modules/"+abi+"/"+m)
	}
	sh := fmt.Sprintf("dpkg-deb --fsys-tarfile %q | tar %s", debs[0], strings.Join(args, " "))
	if out, err := exec.Command("sh", "-c", sh).CombinedOutput(); err != nil {
		t.Fatalf("unpacking the kernel's SCTP modules: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "lib", "modules", abi), dir); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(filepath.Join(dir, guestModules[len(guestModules)-1])); serr != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestInteropLinux associates this package with the Linux kernel's SCTP
// in the guest over UDP encapsulation, in both roles, each side
// requiring the other's Adaptation Layer Indication (the guest's peer
// sets DDP's with SCTP_ADAPTATION_LAYER): 100 messages of up to 4 KiB on
// 4 streams, every third unordered, echoed by the kernel's peer; a DDP
// Stream Session on each of 2 more streams (Initiate, Accept, 10 DDP
// Segment Chunks each way, Terminate each way); an idle path until
// each side has sent a HEARTBEAT and answered the other's; a SHUTDOWN.
// tshark dissects each run. The guest runs under TCG and drops packets at times
// (its receive window reaches 0): retransmissions are expected.
//
// The guest is behind QEMU's user network, which forwards no UDP port
// to it; but the UDP socket that network opens on the host for the
// guest's port 9899, once the guest has sent from that port, carries
// datagrams to it from any host address. So for the kernel as server, a
// kernel client first sends an INIT to a host socket that only learns
// that socket's port; this package's client then sends there.
func TestInteropLinux(t *testing.T) {
	bin := buildPeer(t, false)
	g := linuxguest.ForTest(t, linuxguest.Options{})
	sock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	sock.SetReadBuffer(4 << 20)
	sock.SetWriteBuffer(4 << 20)
	ourUDP := sock.LocalAddr().(*net.UDPAddr).Port
	guestSCTP(t, g, ourUDP)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.SharedDir(), "sctp_peer"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	// RTO.Min 200 ms is the least Linux takes (SCTP_RTO_HARD_MIN).
	peerCmd := linuxguest.GuestShare + "/sctp_peer -a 1 -t 200 -h 100 -p " + strconv.Itoa(interopPeerPort)

	t.Run("kernel client", func(t *testing.T) {
		peer, err := g.Start(fmt.Sprintf("%s -c %s:%d", peerCmd, linuxguest.HostFromGuest, interopOurPort))
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Kill()
		capture := newCaptureConn(&answeringConn{UDPConn: sock})
		a, err := Server(capture, Config{Handshake: HandshakeConfig{LocalPort: interopOurPort, RequireDDP: true}, HandshakeTimeout: 30 * time.Second, HeartbeatInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("Server: %v\nthe guest's peer: %s", err, peer.Output())
		}
		linuxRun(t, a, peer, capture, uint16(ourUDP), true)
	})

	t.Run("kernel server", func(t *testing.T) {
		peer, err := g.Start(peerCmd + " -s")
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Kill()
		nat := guestNATPort(t, g)
		conn := dialPeerUDP(t, nat)
		for !strings.Contains(peer.Output(), "listening\n") {
			select {
			case <-peer.Done():
				t.Fatalf("the guest's peer: %s", peer.Output())
			case <-time.After(20 * time.Millisecond):
			}
		}
		capture := newCaptureConn(conn)
		a, err := Client(capture, Config{Handshake: HandshakeConfig{LocalPort: interopOurPort, PeerPort: interopPeerPort, RequireDDP: true}, HandshakeTimeout: 30 * time.Second, HeartbeatInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("Client: %v\nthe guest's peer: %s", err, peer.Output())
		}
		linuxRun(t, a, peer, capture, uint16(nat), false)
	})
}

// guestNATPort returns the host UDP port at which QEMU's user network
// carries datagrams to the guest's port 9899: a kernel client in the
// guest sends its INIT to a host socket here, which reads it and says
// where it came from.
func guestNATPort(t *testing.T, g *linuxguest.Guest) int {
	t.Helper()
	s, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	port := s.LocalAddr().(*net.UDPAddr).Port
	const primePort = interopPeerPort + 1
	p, err := g.Start(fmt.Sprintf("%s/sctp_peer -a 1 -p %d -r %d -c %s:%d", linuxguest.GuestShare, primePort, port, linuxguest.HostFromGuest, interopOurPort))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	s.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 2048)
	for {
		n, from, err := s.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no INIT from the guest: %v\n%s", err, p.Output())
		}
		if h := chunk.Header(buf[:n]); h.IsValid() && h.SourcePort() == primePort {
			return int(from.Port())
		}
	}
}

// linuxRun carries the traffic of TestInteropLinux on a, then shuts it
// down and checks the guest's peer's account and tshark's dissection.
func linuxRun(t *testing.T, a *Association, peer *linuxguest.Proc, capture *captureConn, port uint16, kernelClient bool) {
	t.Helper()
	if ad := a.Established().PeerAdaptation; !ad.DDP() {
		t.Errorf("the kernel's Adaptation Layer Indication %+v", ad)
	}
	echoExchange(t, a, 100, 4<<10, 4, 60*time.Second)
	ddpSessions(t, a, []uint16{4, 5}, 10, 30*time.Second)
	capture.waitHeartbeats(t, 20*time.Second)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := peer.Wait(ctx)
	if err != nil {
		t.Fatalf("the guest's peer: %v\n%s", err, out)
	}
	want := fmt.Sprintf("done messages=%d accepts=2 terminates=2", 100+2*(10+2))
	if !strings.Contains(out, "adaptation 1\n") || !strings.Contains(out, want+"\n") {
		t.Errorf("the guest's peer printed %q; want \"adaptation 1\" and %q", out, want)
	}
	r := dissect(t, capture.writePcap(t, t.TempDir()), port)
	checkDissection(t, r, map[string]bool{"1": true, "2": true})
	checkFragmented(t, r, capture)
	checkHeartbeats(t, r, capture)
	t.Logf("tshark: %d frames, chunks %v, DATA chunks of fragments by UDP source port %v", r.frames, r.chunks, r.fragments)
}
