package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// normalized returns the file's text with every run of white space
// (line breaks and indentation included) turned into one space, so that
// a sum broken across lines is still found.
func normalized(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// sumRE matches a written sum or difference of integers (decimal or
// hexadecimal) and its result: "1 + 5 + 4 + 4 + 4 = 18", "0x1010 + 50 =
// 0x1042", "8000 - 12 - 16 = 7972".
var sumRE = regexp.MustCompile(`(?:^|[\s(])((?:0x[0-9a-f]+|[0-9]+)(?: [+\-−] (?:0x[0-9a-f]+|[0-9]+))+) = (0x[0-9a-f]+|[0-9]+)\b`)

func parseNumber(s string) (int64, error) {
	return strconv.ParseInt(s, 0, 64)
}

// evalSum evaluates "a + b - c".
func evalSum(expr string) (int64, error) {
	f := strings.Fields(strings.ReplaceAll(expr, "−", "-"))
	v, err := parseNumber(f[0])
	if err != nil {
		return 0, err
	}
	for i := 1; i+1 < len(f); i += 2 {
		n, err := parseNumber(f[i+1])
		if err != nil {
			return 0, err
		}
		if f[i] == "+" {
			v += n
		} else {
			v -= n
		}
	}
	return v, nil
}

// TestLabArithmetic checks every written sum in the labs and their
// answers: the result must be what the terms add up to.
func TestLabArithmetic(t *testing.T) {
	files, _ := filepath.Glob("labs/*.md")
	n := 0
	for _, f := range files {
		for _, m := range sumRE.FindAllStringSubmatch(normalized(t, f), -1) {
			got, err := evalSum(m[1])
			if err != nil {
				t.Errorf("%s: %q: %v", f, m[0], err)
				continue
			}
			want, err := parseNumber(m[2])
			if err != nil {
				t.Errorf("%s: %q: %v", f, m[0], err)
				continue
			}
			if got != want {
				t.Errorf("%s: %q: the terms add up to %d", f, strings.TrimSpace(m[0]), got)
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("only %d sums found in the labs: is the pattern still right?", n)
	}
}

// The SCTP sizes the MULPDU of an sctp:// stream is derived from: the
// common header (RFC 9260 §3.1), a DATA chunk header (§3.3.1) and a SACK
// chunk without gap blocks (§3.3.4).
const (
	sctpCommonHeader = 12
	sctpDataHeader   = 16
	sctpSACK         = 16
)

// TestAnswerFigures checks the header sizes and MULPDUs that answers.md
// quotes against the code's constants: each figure must appear in the
// text as written here, and the written figure is computed from the
// constants.
func TestAnswerFigures(t *testing.T) {
	text := normalized(t, "labs/answers.md")

	// What the code says, checked against the RFC sizes the text uses.
	const loopbackMTU = 8000
	mulpdu := wire.MULPDUForMTU(loopbackMTU)
	if wire.MinMTU != wire.MinMULPDU+wire.SSNLen+sctpSACK+sctpCommonHeader+sctpDataHeader {
		t.Fatalf("wire.MinMTU is %d: the SCTP sizes this test assumes are not the code's", wire.MinMTU)
	}
	user := loopbackMTU - sctpCommonHeader - sctpDataHeader
	user -= user % 4
	if mulpdu != user-wire.SSNLen-sctpSACK {
		t.Fatalf("MULPDUForMTU(%d) = %d, not %d - %d - %d", loopbackMTU, mulpdu, user, wire.SSNLen, sctpSACK)
	}
	payload := mulpdu - ddp.TaggedHeaderLen

	pdu128 := mustFPDU(t, mpa.MinMULPDU, 0, false)
	pdu3014 := mustFPDU(t, 3000+ddp.TaggedHeaderLen, 0, false)
	rtr := mustFPDU(t, ddp.TaggedHeaderLen, 0, false)
	rtrMarked := mustFPDU(t, ddp.TaggedHeaderLen, 0, true) // the Marker at position 0 first

	figures := []string{
		// Lab 1 A1: RFC 5041 Figures 4 and 5.
		fmt.Sprintf("1 + 1 + 4 + 8 = %d octets", ddp.TaggedHeaderLen),
		fmt.Sprintf("1 + 5 + 4 + 4 + 4 = %d octets", ddp.UntaggedHeaderLen),
		// Lab 2 A1.
		fmt.Sprintf("64 - %d = %d", ddp.TaggedHeaderLen, 64-ddp.TaggedHeaderLen),
		fmt.Sprintf("64 - %d = %d octets", ddp.UntaggedHeaderLen, 64-ddp.UntaggedHeaderLen),
		// Lab 2 A3.
		fmt.Sprintf("102 + %d = %d octets", ddp.TaggedHeaderLen, 102+ddp.TaggedHeaderLen),
		// Lab 2 A4: the segment on the wire and the MULPDU.
		fmt.Sprintf("%d + %d + %d = %d", payload, ddp.TaggedHeaderLen, wire.SSNLen, payload+ddp.TaggedHeaderLen+wire.SSNLen),
		fmt.Sprintf("The MULPDU is %d + %d = %d", payload, ddp.TaggedHeaderLen, mulpdu),
		fmt.Sprintf("%d - %d - %d = %d", loopbackMTU, sctpCommonHeader, sctpDataHeader, user),
		fmt.Sprintf("%d - %d = %d would fit", user, wire.SSNLen, user-wire.SSNLen),
		fmt.Sprintf("%d - %d = %d", user-wire.SSNLen, sctpSACK, mulpdu),
		// Lab 2 A7: an FPDU with a ULPDU of MPA's floor.
		fmt.Sprintf("%d + %d + %d + %d = %d", mpa.LengthFieldLen, mpa.MinMULPDU, mpa.PadLen(mpa.MinMULPDU), mpa.CRCLen, len(pdu128)),
		// Lab 2 A9: the RTR, a zero-length RDMA Write, and a Marker.
		fmt.Sprintf("%d + %d + %d + %d = %d octets", mpa.LengthFieldLen, ddp.TaggedHeaderLen, mpa.PadLen(ddp.TaggedHeaderLen), mpa.CRCLen, len(rtr)),
		fmt.Sprintf("%d + %d = %d", len(rtr), mpa.MarkerLen, len(rtrMarked)),
		// Lab 2 A8 and lab 7 A4: MPA's largest MULPDU.
		fmt.Sprintf("MPA allows, %d", mpa.MaxMULPDU),
		fmt.Sprintf("MPA's largest, %d, once the connection's EMSS is %d", mpa.MULPDU(65483, false), 65483),
		// Lab 4 A2: Terminate Header, DDP Segment Length, tagged header.
		fmt.Sprintf("4 + 2 + %d = %d octets", ddp.TaggedHeaderLen, 4+2+ddp.TaggedHeaderLen),
		// Lab 5 A2.
		fmt.Sprintf("3000 + %d = %d", ddp.TaggedHeaderLen, 3000+ddp.TaggedHeaderLen),
		fmt.Sprintf("%d + %d + %d + %d = %d", mpa.LengthFieldLen, 3000+ddp.TaggedHeaderLen, mpa.PadLen(3000+ddp.TaggedHeaderLen), mpa.CRCLen, len(pdu3014)),
		fmt.Sprintf("%d + 6 × %d = %d", len(pdu3014), mpa.MarkerLen, len(pdu3014)+6*mpa.MarkerLen),
		// Lab 6 A5.
		fmt.Sprintf("a %d-octet header", rdmap.ReadRequestLen),
		fmt.Sprintf("%d octets of payload each on loopback", payload),
	}
	for _, f := range figures {
		if !strings.Contains(text, f) {
			t.Errorf("answers.md does not say %q", f)
		}
	}
	// Lab 1's expected output quotes the Atomic messages' headers.
	lab1 := normalized(t, "labs/01-tagged-untagged-demo.md")
	for _, f := range []string{
		fmt.Sprintf("(%d octets of header, in two segments at this MULPDU)", rdmap.AtomicRequestLen),
		fmt.Sprintf("on queue 3 (%d octets)", rdmap.AtomicResponseLen),
	} {
		if !strings.Contains(lab1, f) {
			t.Errorf("lab 1 does not say %q", f)
		}
	}
	if 2*(64-ddp.UntaggedHeaderLen) < rdmap.AtomicRequestLen {
		t.Errorf("an Atomic Request of %d octets is not two untagged segments at a MULPDU of 64", rdmap.AtomicRequestLen)
	}
}

// mustFPDU returns the FPDU of an n-octet ULPDU (a tagged DDP segment)
// at stream position pos.
func mustFPDU(t *testing.T, n int, pos uint64, markers bool) []byte {
	t.Helper()
	ulpdu := make([]byte, n)
	ulpdu[0] = 0x80 | ddp.Version // T=1, DV=1
	b, err := mpa.AppendFPDU(nil, pos, mpa.Options{CRC: true, Markers: markers}, ulpdu)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// linkRE matches a Markdown link's target.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLabsStayInRepository checks that the labs and their answers cite
// nothing outside the repository: no absolute paths, and every relative
// link names a file of the repository.
func TestLabsStayInRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("labs/*.md")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, bad := range []string{"/work/", "/home/", "~/", "file://", "../shared", "shared/rfc"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s names %q, a path outside the repository", f, bad)
			}
		}
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p, err := filepath.Abs(filepath.Join(filepath.Dir(f), target))
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links to %s, outside the repository", f, m[1])
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s: %v", f, m[1], err)
			}
		}
	}
}
