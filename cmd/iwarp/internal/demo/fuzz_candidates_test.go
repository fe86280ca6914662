package demo

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"
)

// candidateOffer is a browser's offer of a data channel, with the given
// candidate lines in its one media section.
func candidateOffer(candidates ...string) string {
	var b strings.Builder
	b.WriteString("v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n" +
		"a=group:BUNDLE 0\r\na=extmap-allow-mixed\r\na=msid-semantic: WMS\r\n" +
		"m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\n")
	for _, c := range candidates {
		b.WriteString(c)
	}
	b.WriteString("a=ice-ufrag:Yj3N\r\na=ice-pwd:5bN3mRbiNlKQFAm0I2dSAaFR\r\na=ice-options:trickle\r\n" +
		"a=fingerprint:sha-256 6B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08\r\n" +
		"a=setup:actpass\r\na=mid:0\r\na=sctp-port:5000\r\na=max-message-size:262144\r\n")
	return b.String()
}

// candidatePolicies are the servings the filter is fuzzed under: on
// loopback, on an IPv4 and an IPv6 address, and on every interface.
var candidatePolicies = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(192, 0, 2, 10), net.ParseIP("2001:db8::10"), net.ParseIP("::1"), net.IPv4zero}

// FuzzCandidateFilter fuzzes the ICE candidate filter with SDP text under
// each policy and limit, and checks: the output is a subsequence of the
// input's lines; every line that is not a candidate is kept; the kept
// candidates are the first that acceptLine accepts, at most the limit of
// them; kept <= total, and total counts the input's candidate lines;
// filtering the output again changes nothing; and every candidate that
// pion's SDP parser finds in the output (what the Go peer would use) is
// one the filter kept, so that no way of writing a line gets a candidate
// past it.
func FuzzCandidateFilter(f *testing.F) {
	f.Add(candidateOffer(
		"a=candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host generation 0 network-id 1\r\n",
		"a=candidate:2 1 UDP 2122260223 192.0.2.10 50001 typ host\r\n",
		"a=candidate:3 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0\r\n",
		"a=candidate:4 1 udp 2122260223 2001:db8::10 50002 typ host\r\n",
		"a=candidate:5 1 udp 1686052607 198.51.100.7 61000 typ srflx raddr 192.0.2.10 rport 50001\r\n",
		"a=candidate:6 1 udp 2122260223 0123abcd-1111-2222-3333-444455556666.local 50003 typ host\r\n",
	), uint8(8), uint8(0))
	f.Add(candidateOffer(
		"a=candidate:1 1 udp 1 127.0.0.1 1023 typ host\r\n",
		"a=candidate:1 1 udp 1 127.0.0.1 65536 typ host\r\n",
		"a=candidate:1 1 udp 1 127.0.0.1 +5000 typ host\r\n",
		"a=candidate:1 1 udp 1 ::ffff:127.0.0.1 5000 typ host\r\n",
		"a=candidate:1 1 udp 1 224.0.0.1 5000 typ host\r\n",
		"a=candidate:1 1 udp 1 255.255.255.255 5000 typ host\r\n",
		"a=candidate:1 1 udp 1 0.0.0.0 5000 typ host\r\n",
		"a=candidate:1 1 udp 1 127.0.0.1 5000 type host\r\n",
		"a=candidate:1 1 udp 1 127.0.0.1\r\n",
		"a=candidate:\r\n",
	), uint8(8), uint8(0))
	f.Add(candidateOffer(
		"a=candidate:1 1 udp 1 127.0.0.1 5000 typ host\n",
		"a=candidate:2 1 udp 1 127.0.0.2 5001 typ host\r\r\n",
		"a=candidate:3 1 udp 1 127.0.0.3 5002 typ host",
		"\r\n",
		"\ra=candidate:4 1 udp 1 10.1.2.3 5003 typ host\r\n",
		" a=candidate:5 1 udp 1 10.1.2.4 5004 typ host\r\n",
		"a=candidate:6\t1\tudp\t1\t127.0.0.1\t5005\ttyp\thost\r\n",
		"a=candidate:7 1 udp 1 127.0.0.1  5006 typ host\r\n",
	), uint8(2), uint8(0))
	f.Add(strings.Replace(candidateOffer(), "webrtc-datachannel\r\n", "webrtc-datachannel\ra=candidate:1 1 udp 1 10.1.2.3 53 typ host\r\n", 1), uint8(8), uint8(4))
	f.Add(strings.Replace(candidateOffer(), "c=IN IP4 0.0.0.0\r\n", "c=IN IP4 0.0.0.0\r\r\ra=candidate:1 1 udp 1 10.1.2.3 53 typ host\r\n", 1), uint8(8), uint8(4))
	for i := range candidatePolicies {
		f.Add("a=candidate:1 1 udp 1 192.0.2.10 5000 typ host\na=candidate:2 1 udp 1 2001:db8::10 5000 typ host\n", uint8(1), uint8(i))
	}
	f.Add("", uint8(0), uint8(0))
	f.Add("\n\n\r\r", uint8(3), uint8(1))
	f.Fuzz(func(t *testing.T, sdp string, max, policy uint8) {
		pol := newCandidatePolicy(candidatePolicies[int(policy)%len(candidatePolicies)], int(max%10))
		out, kept, total := pol.filter(sdp)
		in := strings.SplitAfter(sdp, "\n")
		var lines []string
		wantTotal := 0
		for _, l := range in {
			if isCandidateLine(l) {
				wantTotal++
				t := strings.Trim(l, "\r\n")
				if countCandidates(lines) < pol.max && !strings.ContainsRune(t, '\r') && pol.acceptLine(t) {
					lines = append(lines, l)
				}
				continue
			}
			lines = append(lines, l)
		}
		if want := strings.Join(lines, ""); out != want {
			t.Fatalf("filter kept other lines than the first %d candidates acceptLine accepts:\n got %q\nwant %q", pol.max, out, want)
		}
		if total != wantTotal || kept != countCandidates(lines) || kept > total || kept > pol.max {
			t.Fatalf("kept %d of %d, want %d of %d (at most %d)", kept, total, countCandidates(lines), wantTotal, pol.max)
		}
		again, kept2, total2 := pol.filter(out)
		if again != out || kept2 != kept || total2 != kept {
			t.Fatalf("filtering the output again: %d of %d, %q", kept2, total2, again)
		}
		// What pion finds in the output, if it parses: only kept lines.
		desc := webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: out}
		parsed, err := desc.Unmarshal()
		if err != nil {
			return
		}
		var keptLines []string
		for _, l := range lines {
			if isCandidateLine(l) {
				keptLines = append(keptLines, strings.TrimPrefix(strings.Trim(l, "\r\n"), "a=candidate:"))
			}
		}
		found := 0
		check := func(key, value string) {
			if key != "candidate" {
				return
			}
			found++
			// pion's value is its line with as many octets cut from the
			// end as the line holds CRs.
			for _, k := range keptLines {
				if strings.HasPrefix(k, value) {
					return
				}
			}
			t.Fatalf("pion reads candidate %q, which is no line the filter kept, from %q", value, out)
		}
		for _, a := range parsed.Attributes {
			check(a.Key, a.Value)
		}
		for _, md := range parsed.MediaDescriptions {
			for _, a := range md.Attributes {
				check(a.Key, a.Value)
			}
		}
		if found > kept {
			t.Fatalf("pion reads %d candidates from an output that keeps %d: %q", found, kept, out)
		}
	})
}

// isCandidateLine reports whether l, one line of SDP up to a LF, may be
// read as a candidate attribute (RFC 8839 §5.1) by an SDP parser that
// skips the CRs between lines and ends some lines at a CR (RFC 8866 §5
// asks parsers to be tolerant of line ends; pion's does both), or takes
// an attribute "candidate" without a value for one (pion's does).
func isCandidateLine(l string) bool {
	t := strings.Trim(l, "\r\n")
	return strings.HasPrefix(t, "a=candidate") || strings.Contains(t, "\ra=candidate")
}

func countCandidates(lines []string) int {
	n := 0
	for _, l := range lines {
		if isCandidateLine(l) {
			n++
		}
	}
	return n
}

// TestCandidateFilterCost: an offer of a MiB of candidates, none of them
// acceptable (the read limit of a signaling message), is filtered in a
// few milliseconds, not a second: this host's addresses are looked up
// once per offer, not once per candidate.
func TestCandidateFilterCost(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "a=candidate:%d 1 udp 1 10.%d.%d.%d 5000 typ host\r\n", i, i>>16&255, i>>8&255, i&255)
	}
	pol := newCandidatePolicy(net.IPv4(127, 0, 0, 1), 8)
	start := time.Now()
	_, kept, total := pol.filter(b.String())
	took := time.Since(start)
	t.Logf("%d of %d candidates kept in %v", kept, total, took)
	if kept != 0 || took > time.Second {
		t.Fatalf("%d of %d candidates kept in %v", kept, total, took)
	}
}

// TestBindIP checks where the Go peer's ICE socket binds when the demo
// is served on loopback: on loopback if the page offers a loopback
// candidate or none of this host's addresses, else on the first of this
// host's addresses the page offers (Firefox offers no loopback candidate
// and ignores the Go peer's).
func TestBindIP(t *testing.T) {
	loop := net.IPv4(127, 0, 0, 1)
	var host net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			host = n.IP
			break
		}
	}
	if host == nil {
		t.Skip("this host has no IPv4 address but loopback")
	}
	cand := func(ip string) string { return "a=candidate:0 1 UDP 2122187007 " + ip + " 57100 typ host\r\n" }
	for _, c := range []struct {
		name   string
		served net.IP
		offer  []string
		want   net.IP
	}{
		{"loopback offered first", loop, []string{cand("127.0.0.1"), cand(host.String())}, loop},
		{"this host's address offered first", loop, []string{cand(host.String()), cand("127.0.0.1")}, host},
		{"only this host's address", loop, []string{cand(host.String())}, host},
		{"an mDNS name", loop, []string{cand("0d2c9a3e-1b2f-4c55-9a43-7f1f0c1d2e3f.local")}, loop},
		{"an address of another host", loop, []string{cand("198.51.100.7")}, loop},
		{"no candidate", loop, nil, loop},
		{"served on an address", host, []string{cand("127.0.0.1")}, host},
	} {
		pol := newCandidatePolicy(c.served, 8)
		offer, _, _ := pol.filter(candidateOffer(c.offer...))
		if got := pol.bindIP(offer); !got.Equal(c.want) {
			t.Errorf("%s: binds to %v, want %v", c.name, got, c.want)
		}
	}
}
