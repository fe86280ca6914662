package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// build builds the example at dir into the test's directory.
func build(t *testing.T, dir, name string) string {
	exe := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", exe, dir).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, out)
	}
	return exe
}

// The server and three clients in processes of their own, over each
// transport: one client is killed in the middle of its transfers, the
// other two finish, and the server tells each end apart.
func TestServerAndClients(t *testing.T) {
	server, client := build(t, ".", "server"), build(t, "../client", "client")
	for _, listen := range []string{"tcp://127.0.0.1:0", "sctp://127.0.0.1:0"} {
		t.Run(listen[:strings.Index(listen, ":")], func(t *testing.T) {
			srv := exec.Command(server, "-listen", listen, "-dead-peer", "1s")
			out, err := srv.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			srv.Stderr = os.Stderr
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Process.Kill()
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			next := func(re string) []string {
				t.Helper()
				timeout := time.After(20 * time.Second)
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							t.Fatalf("the server exited before printing %q", re)
						}
						if m := regexp.MustCompile(re).FindStringSubmatch(l); m != nil {
							return m
						}
					case <-timeout:
						t.Fatalf("the server did not print %q", re)
					}
				}
			}
			url := next(`^listening on (\S+)`)[1]

			// The victim goes first, with rounds enough to outlast the
			// test; it is killed once its first round is done.
			victim := exec.Command(client, "-connect", url, "-rounds", "100000")
			vout, err := victim.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := victim.Start(); err != nil {
				t.Fatal(err)
			}
			vsc := bufio.NewScanner(vout)
			for vsc.Scan() && !strings.HasPrefix(vsc.Text(), "round 1:") {
			}
			victimID := next(`^client (\d+): Send of \d+ octets: "round 1 done"`)[1]
			type result struct {
				out []byte
				err error
			}
			done := make(chan result, 2)
			for range 2 {
				go func() {
					out, err := exec.Command(client, "-connect", url, "-rounds", "5").CombinedOutput()
					done <- result{out, err}
				}()
			}
			// The victim is killed once the others are under way; one of
			// them may end before the other connects.
			ends := map[string]string{}
			for connected := 0; connected < 2; {
				m := next(`^client (\d+): (?:(connected) |ended: (.*))`)
				if m[2] != "" {
					connected++
				} else {
					ends[m[1]] = m[3]
				}
			}
			victim.Process.Kill()
			victim.Wait()
			for range 2 {
				r := <-done
				if r.err != nil || !strings.HasSuffix(string(r.out), "done: 5 rounds\n") {
					t.Fatalf("a client: %v\n%s", r.err, r.out)
				}
			}
			for len(ends) < 3 {
				m := next(`^client (\d+): ended: (.*)`)
				ends[m[1]] = m[2]
			}
			for id, how := range ends {
				switch {
				case id != victimID && how != "disconnected in order":
					t.Errorf("client %s ended: %s", id, how)
				case id == victimID && strings.HasPrefix(listen, "sctp") && !strings.HasPrefix(how, "peer dead at "):
					t.Errorf("the killed client ended: %s", how)
				}
				// Over tcp:// the kernel closes a killed process's
				// connection with a FIN, as an orderly close does, when
				// nothing was in flight: the end may read either way.

			}
			t.Logf("%v", ends)
		})
	}
}
