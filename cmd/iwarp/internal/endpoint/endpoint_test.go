//go:build !js

package endpoint

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want URL
		bad  string // in the usage error, if bad
	}{
		{"tcp://127.0.0.1:5000", URL{"tcp", "127.0.0.1:5000"}, ""},
		{"sctp://[::1]:5000", URL{"sctp", "[::1]:5000"}, ""},
		{"", URL{}, "missing endpoint URL"},
		{"udp://h:1", URL{}, "the scheme is tcp"},
		{"tcp://h", URL{}, "no port"},
	} {
		got, err := Parse(c.in)
		if c.bad != "" {
			var ue UsageError
			if !errors.As(err, &ue) || !strings.Contains(ue.Msg, c.bad) {
				t.Errorf("Parse(%q): %v, want a usage error with %q", c.in, err, c.bad)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestCheck covers each contradiction Check refuses, and what it lets
// through, for the flags as a command line gives them.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		args      []string
		url       string
		listening bool
		bad       string // in the usage error; "" when the flags are fine
	}{
		{nil, "tcp://h:1", false, ""},
		{[]string{"--markers", "--no-crc"}, "tcp://h:1", true, ""},
		{[]string{"--psk", "k"}, "sctp://h:1", false, ""},
		{[]string{"--insecure-skip-verify"}, "sctp://h:1", false, ""},
		{[]string{"--insecure-udp"}, "sctp://h:1", true, ""},
		{nil, "sctp://h:1", true, ""},
		{nil, "sctp://h:1", false, "an sctp:// client verifies its server"},
		{[]string{"--fingerprint", "AA", "--psk", "k"}, "sctp://h:1", false, "give one"},
		{[]string{"--fingerprint", "AB:CD"}, "sctp://h:1", false, "bad --fingerprint"},
		{[]string{"--insecure-udp", "--psk", "k"}, "sctp://h:1", false, "--insecure-udp is sctp:// without DTLS"},
		{[]string{"--insecure-skip-verify"}, "sctp://h:1", true, "--insecure-skip-verify is for an sctp:// client"},
		{[]string{"--cert", "c.pem"}, "sctp://h:1", true, "--cert and --key go together"},
		{[]string{"--cert", "c.pem", "--key", "k.pem", "--psk", "k"}, "sctp://h:1", false, "--cert and --key are for the listener"},
		{[]string{"--psk", "k"}, "tcp://h:1", false, "apply to sctp:// endpoints only"},
		{[]string{"--keylog", "f"}, "tcp://h:1", false, "--keylog applies to sctp://"},
		{[]string{"--dead-peer", "1s"}, "tcp://h:1", true, "--dead-peer applies to sctp://"},
		{[]string{"--dead-peer", "-1s", "--psk", "k"}, "sctp://h:1", true, "must not be negative"},
		{[]string{"--markers", "--psk", "k"}, "sctp://h:1", false, "--markers and --no-crc apply to tcp://"},
	} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		u, err := Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		err = f.Check(u, c.listening)
		var ue UsageError
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%q on %s (listening %v): %v, want no error", c.args, c.url, c.listening, err)
		case c.bad != "" && (!errors.As(err, &ue) || !strings.Contains(ue.Msg, c.bad)):
			t.Errorf("%q on %s (listening %v): %v, want a usage error with %q", c.args, c.url, c.listening, err, c.bad)
		}
	}
}

// TestDialListenRecorded connects over tcp:// with --markers, the
// listener recording with --pcap, and checks what each end reports and
// that the capture holds the connection's MPA startup.
func TestDialListenRecorded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "c.pcap")
	lf := &Flags{Markers: true, PCAP: file}
	l, rec, err := ListenRecorded(ctx, URL{"tcp", "127.0.0.1:0"}, lf, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	server, client := rdmaptest.NewPeer(t, rdmap.QPConfig{}), rdmaptest.NewPeer(t, rdmap.QPConfig{})
	accepted := make(chan *Conn, 1)
	go func() {
		p, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		c, err := p.Accept(ctx, server.QP)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err := Dial(ctx, URL{"tcp", l.Addr().String()}, &Flags{Markers: true}, nil, client.QP, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.FailNow()
	}
	if c.MPA() == nil || !*c.Info.MarkersTx || !*c.Info.MarkersRx || c.Info.Transport != "tcp" {
		t.Errorf("client: %+v", c.Info)
	}
	if want := "tcp " + s.Info.Local + " -> " + s.Info.Peer + ", MPA rev 2, CRC true, markers tx true rx true"; s.Info.String() != want {
		t.Errorf("server: %q, want %q", s.Info, want)
	}
	c.Close(ctx)
	s.Close(ctx)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	recs, err := capture.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	var startup []string
	for _, r := range recs {
		if r.Kind == capture.KindMPARequest || r.Kind == capture.KindMPAReply {
			startup = append(startup, r.Kind)
		}
	}
	if want := []string{capture.KindMPARequest, capture.KindMPAReply}; !slices.Equal(startup, want) {
		t.Errorf("the capture's MPA startup: %q, want a Request and a Reply", startup)
	}
}
