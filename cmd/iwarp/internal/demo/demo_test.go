package demo

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/leaktest"
	"github.com/iwarpgo/iwarp/internal/peer"
)

// get fetches path with the given headers, without the Transport's own
// gzip handling.
func get(t *testing.T, url, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}

func TestServesAssets(t *testing.T) {
	s := startServer(t, Config{})
	resp, body := get(t, s.url, "/", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "iwarp demo") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("GET /: Content-Security-Policy %q", csp)
	}
	resp, body = get(t, s.url, "/iwarp.wasm", map[string]string{"Accept-Encoding": "gzip, br"})
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Type") != "application/wasm" {
		t.Errorf("GET /iwarp.wasm headers: %v", resp.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := io.ReadAll(zr); string(raw) != "\x00asm fake" {
		t.Errorf("iwarp.wasm unpacks to %q", raw)
	}
	for _, p := range []string{"/iwarp.wasm.gz", "/nope.js", "/sub"} {
		if resp, _ := get(t, s.url, p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
}

// RFC 9110 §12.5.3: the wasm goes gzipped to a client that accepts gzip,
// unpacked to one that accepts identity only (q-values honoured, gzip;q=0
// is a refusal), and 406 to one that accepts neither.
func TestWasmContentNegotiation(t *testing.T) {
	s := startServer(t, Config{})
	for _, c := range []struct {
		accept []string // nil: no Accept-Encoding field
		want   string   // "gzip", "identity" or "406"
	}{
		{nil, "identity"},
		{[]string{""}, "identity"},
		{[]string{"gzip"}, "gzip"},
		{[]string{"GZIP;Q=1"}, "gzip"},
		{[]string{"x-gzip"}, "gzip"},
		{[]string{"gzip, deflate, br"}, "gzip"},
		{[]string{"br"}, "identity"},
		{[]string{"gzip;q=0"}, "identity"},
		{[]string{"gzip; q=0.000"}, "identity"},
		{[]string{"gzip;q=0.5, identity;q=1"}, "identity"},
		{[]string{"gzip;q=1, identity;q=0.5"}, "gzip"},
		{[]string{"*"}, "gzip"},
		{[]string{"*;q=0"}, "406"},
		{[]string{"identity;q=0"}, "406"},
		{[]string{"gzip;q=0, identity;q=0"}, "406"},
		{[]string{"*;q=0, identity"}, "identity"},
		{[]string{"*;q=0, gzip;q=0.1"}, "gzip"},
		{[]string{"br", "gzip"}, "gzip"}, // two fields
	} {
		req, _ := http.NewRequest("GET", s.url+"/iwarp.wasm", nil)
		if c.accept != nil {
			req.Header["Accept-Encoding"] = c.accept
		}
		tr := &http.Transport{DisableCompression: true}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		got := "406"
		if resp.StatusCode == 200 {
			got = "identity"
			if resp.Header.Get("Content-Encoding") == "gzip" {
				got = "gzip"
			}
		} else if resp.StatusCode != http.StatusNotAcceptable {
			got = resp.Status
		}
		if got != c.want {
			t.Errorf("Accept-Encoding %q: %s, want %s", c.accept, got, c.want)
		}
		if got == "identity" && string(body) != "\x00asm fake" {
			t.Errorf("Accept-Encoding %q: identity body %q", c.accept, body)
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: Vary %q", c.accept, resp.Header.Get("Vary"))
		}
	}
}

// TestGoPeer connects to the Go peer as the page does, with a small
// MULPDU, and checks that an RDMA Write lands in the Go peer's memory
// segment by segment, that a Send fills its first receive buffer, and
// that a Write to a bad STag ends in a Terminate both ends report; then
// that no goroutine is left behind.
func TestGoPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaktest.Check(t)
	s := startServer(t, Config{})
	func() {
		ps := dialPage(t, ctx, s.url, 48, 1, nil)
		defer ps.close()
		mem := region(ps.state, "Go peer memory")
		if mem == nil || mem.Base != goMemBase || mem.Len != goMemLen || !mem.Valid {
			t.Fatalf("the Go peer's regions: %+v", ps.state)
		}
		msg := []byte("Direct data placement, one small segment at a time.")
		if _, err := ps.peers[0].Write(msg, mem.STag, goMemBase+7); err != nil {
			t.Fatal(err)
		}
		placed := 0
		ps.events(ctx, func(e peer.Event) bool {
			if e.Kind == "segment-placed" && e.Tagged && e.Region == mem.STag {
				placed += int(e.Len)
			}
			r := region(ps.state, "Go peer memory")
			return placed == len(msg) && r != nil && bytes.Equal(r.Data[7:7+len(msg)], msg)
		})
		if _, err := ps.peers[0].Send([]byte("ping"), false, 0); err != nil {
			t.Fatal(err)
		}
		ps.waitFor(ctx, func(m Message) bool {
			for _, r := range m.Regions {
				if r.Recv && r.MSN == 1 && r.Filled && string(r.Data[:4]) == "ping" {
					return true
				}
			}
			return false
		})
		if _, err := ps.peers[0].Write([]byte("bad"), 0x00dead01, 0); err != nil {
			t.Fatal(err)
		}
		ps.events(ctx, func(e peer.Event) bool {
			if e.Kind == "terminate" && !strings.Contains(e.CodeName, "Invalid Steering Tag") {
				t.Errorf("Terminate %+v, want Invalid Steering Tag", e)
			}
			return e.Kind == "terminate"
		})
		select {
		case <-ps.peers[0].QP.Terminated():
		case <-ctx.Done():
			t.Fatal("the page side's queue pair did not terminate")
		}
	}()
	// Every goroutine of the Go peer and the server ends (leaktest;
	// pion's own may take a moment to wind down).
	s.stop()
}

// TestFaults provokes each of the page's fault buttons against the Go
// peer and checks the Terminate both ends report, named in RFC 6580's
// words.
func TestFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startServer(t, Config{})
	faults := []struct {
		name string
		do   func(p *peer.Peer, mem *peer.Region) error
		want string // the Error Code's name
	}{
		{"bad STag", func(p *peer.Peer, mem *peer.Region) error {
			_, err := p.Write([]byte("bad"), 0x00dead01, 0)
			return err
		}, "Invalid Steering Tag"},
		{"out of bounds", func(p *peer.Peer, mem *peer.Region) error {
			_, err := p.Write([]byte("out of bounds!!!"), mem.STag, mem.Base+uint64(mem.Len)-4)
			return err
		}, "Base or bounds violation"},
		{"stale key", func(p *peer.Peer, mem *peer.Region) error {
			stale := mem.STag&^0xff | (mem.STag+1)&0xff
			_, err := p.Write([]byte("stale"), stale, mem.Base)
			return err
		}, "Invalid Steering Tag"},
		{"no receive buffer", func(p *peer.Peer, mem *peer.Region) error {
			for range goRecvs + 1 {
				if _, err := p.Send([]byte("send"), false, 0); err != nil {
					return err
				}
			}
			return nil
		}, "no buffer available"},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ps := dialPage(t, ctx, s.url, 64, 1, nil)
			defer ps.close()
			mem := region(ps.state, "Go peer memory")
			if err := f.do(ps.peers[0], mem); err != nil {
				t.Fatal(err)
			}
			ps.events(ctx, func(e peer.Event) bool {
				if e.Kind != "terminate" {
					return false
				}
				if !strings.Contains(e.CodeName, f.want) || e.LayerName == "" || e.TypeName == "" {
					t.Errorf("Go peer's Terminate: layer %q type %q code %q, want code %q", e.LayerName, e.TypeName, e.CodeName, f.want)
				}
				return true
			})
			select {
			case <-ps.peers[0].QP.Terminated():
			case <-ctx.Done():
				t.Fatal("the page side did not terminate")
			}
		})
	}
}
