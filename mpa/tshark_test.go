package mpa

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/internal/tshark"
)

// tshark (Wireshark's dissectors) is the independent check of the wire
// format: it must find every FPDU, show the fields sent, and find every
// CRC good.

func needTshark(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not on PATH")
	}
	return p
}

// The DDP/RDMAP segments of the test session, hand-made.
type wantFPDU struct {
	fromClient bool
	tagged     bool
	opcode     int
	stag       uint32
	to         uint64
	qn, msn    uint32
	payload    int
}

var tsharkSession = []wantFPDU{
	{fromClient: true, tagged: true, opcode: 0, stag: 0x1234_5678, to: 0x1000, payload: 100},
	{fromClient: true, tagged: true, opcode: 0, stag: 0x1234_5678, to: 0x1064, payload: 3000},
	{fromClient: true, opcode: 3, qn: 0, msn: 1, payload: 45},
	{fromClient: true, opcode: 3, qn: 0, msn: 2, payload: 1200},
	// With Markers this one ends at stream octet 4608, so the next starts
	// with a Marker between FPDUs (FPDUPTR 0) and, 506 octets of ULPDU
	// later, has a Marker just before its CRC (FPDUPTR 508).
	{fromClient: true, opcode: 3, qn: 0, msn: 3, payload: 112},
	{fromClient: true, tagged: true, opcode: 0, stag: 0x1234_5678, to: 0x2000, payload: 492},
	{fromClient: false, opcode: 3, qn: 0, msn: 1, payload: 10},
	{fromClient: false, opcode: 3, qn: 0, msn: 2, payload: 700},
}

// header returns the DDP header, with the RDMAP control field in it, of
// a segment: tagged T=1 L=1 DV=1 (0xC1) with RDMAP RV=1 opcode 0 (0x40),
// or untagged T=0 L=1 DV=1 (0x41) with RV=1 opcode 3 (0x43), MO 0.
func (w wantFPDU) header() []byte {
	if w.tagged {
		h := []byte{0xC1, 0x40 | byte(w.opcode)}
		h = binary.BigEndian.AppendUint32(h, w.stag)
		return binary.BigEndian.AppendUint64(h, w.to)
	}
	h := []byte{0x41, 0x40 | byte(w.opcode), 0, 0, 0, 0}
	h = binary.BigEndian.AppendUint32(h, w.qn)
	h = binary.BigEndian.AppendUint32(h, w.msn)
	return binary.BigEndian.AppendUint32(h, 0)
}

func (w wantFPDU) data() []byte {
	p := make([]byte, w.payload)
	for i := range p {
		p[i] = byte(i*7 + w.payload)
	}
	return p
}

// runMPA runs the session over a connection pair: the client (Initiator)
// sends the MPA Request, the server (Responder) the Reply; then the
// client's FPDUs (the Responder receives one before it sends, RFC 5044
// §7.1.2 rule 4), then the server's. Every FPDU is checked by the Reader
// on the other end, and the sender waits for that before it sends the
// next, so that on a real connection every FPDU travels in a TCP segment
// of its own: Wireshark's Marker handling needs that (it takes a
// segment's length as the FPDU's).
func runMPA(t *testing.T, client, server net.Conn, req, rep Frame) {
	t.Helper()
	toServer := make(chan struct{}) // the server finished an FPDU
	toClient := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			got, err := ReadFrame(server)
			if err != nil {
				return err
			}
			if _, err := server.Write(rep.Append(nil)); err != nil {
				return err
			}
			fromInit, fromResp := Negotiate(&got, &rep)
			r := NewReader(server, fromInit)
			if err := expectFPDUs(r, true, toServer); err != nil {
				return fmt.Errorf("server: %w", err)
			}
			w := NewWriter(server, fromResp)
			return sendFPDUs(w, false, toClient)
		}()
	}()
	if _, err := client.Write(req.Append(nil)); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(client)
	if err != nil {
		t.Fatal(err)
	}
	fromInit, fromResp := Negotiate(&req, &got)
	cerr := make(chan error, 1)
	go func() { cerr <- sendFPDUs(NewWriter(client, fromInit), true, toServer) }()
	if err := expectFPDUs(NewReader(client, fromResp), false, toClient); err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := <-cerr; err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func sendFPDUs(w *Writer, fromClient bool, received <-chan struct{}) error {
	for _, f := range tsharkSession {
		if f.fromClient == fromClient {
			if err := w.WriteFPDU(f.header(), [][]byte{f.data()}); err != nil {
				return err
			}
			<-received
		}
	}
	return nil
}

func expectFPDUs(r *Reader, fromClient bool, received chan<- struct{}) error {
	for i, f := range tsharkSession {
		if f.fromClient != fromClient {
			continue
		}
		want := append(f.header(), f.data()...)
		got, err := r.Next()
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("FPDU %d differs", i)
		}
		received <- struct{}{}
	}
	return nil
}

// fpduView is what tshark shows of one MPA PDU: for an FPDU its fields
// by name, from the MPA layer and the DDP/RDMAP layer after it; for a
// startup frame just which one it is.
type fpduView struct {
	srcPort, dstPort string
	frame            string // "req" or "rep" for a startup frame, "" for an FPDU
	f                map[string]string
}

type pdmlNode struct {
	Name     string     `xml:"name,attr"`
	Show     string     `xml:"show,attr"`
	Showname string     `xml:"showname,attr"`
	Fields   []pdmlNode `xml:"field"`
	Protos   []pdmlNode `xml:"proto"`
}

// flatten collects the fields under n by name; a repeated field's values
// are joined with commas. "name#" holds the text tshark shows.
func (n *pdmlNode) flatten(m map[string]string) {
	if n.Name != "" {
		if v, dup := m[n.Name]; dup {
			m[n.Name] = v + "," + n.Show
		} else {
			m[n.Name] = n.Show
			m[n.Name+"#"] = n.Showname
		}
	}
	for i := range n.Fields {
		n.Fields[i].flatten(m)
	}
	for i := range n.Protos {
		n.Protos[i].flatten(m)
	}
}

// tsharkArgs are the options of every dissection (internal/tshark).
var tsharkArgs = tshark.Args

// tsharkDissect dissects a capture file with tshark (-T pdml) and returns
// every MPA PDU it found, in order.
func tsharkDissect(t *testing.T, tshark, file string) []fpduView {
	t.Helper()
	out, err := exec.Command(tshark, append([]string{"-r", file, "-T", "pdml"}, tsharkArgs...)...).Output()
	if err != nil {
		t.Fatalf("tshark -T pdml: %v", err)
	}
	var doc struct {
		Packets []struct {
			Protos []pdmlNode `xml:"proto"`
		} `xml:"packet"`
	}
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("PDML: %v", err)
	}
	var views []fpduView
	for _, p := range doc.Packets {
		var src, dst string
		var cur *fpduView
		for i := range p.Protos {
			pr := &p.Protos[i]
			m := map[string]string{}
			switch pr.Name {
			case "tcp":
				pr.flatten(m)
				src, dst = m["tcp.srcport"], m["tcp.dstport"]
			case "iwarp_mpa":
				pr.flatten(m)
				v := fpduView{srcPort: src, dstPort: dst, f: m}
				switch {
				case m["iwarp_mpa.req"] != "" || m["iwarp_mpa.key.req"] != "":
					v.frame = "req"
				case m["iwarp_mpa.rep"] != "" || m["iwarp_mpa.key.rep"] != "":
					v.frame = "rep"
				}
				views = append(views, v)
				cur = nil
				if v.frame == "" {
					cur = &views[len(views)-1]
				}
			case "iwarp_ddp_rdmap":
				if cur != nil {
					pr.flatten(cur.f)
					cur = nil
				}
			}
		}
	}
	return views
}

// tsharkVerbose returns tshark -V's text of a capture, for failure logs.
func tsharkVerbose(tshark, file string) string {
	out, _ := exec.Command(tshark, append([]string{"-r", file, "-V"}, tsharkArgs...)...).CombinedOutput()
	return string(out)
}

// sameNumber compares two numbers written in any base strconv knows.
func sameNumber(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 0, 64)
	y, err2 := strconv.ParseUint(b, 0, 64)
	return err1 == nil && err2 == nil && x == y
}

// checkDissection compares tshark's view with what was sent: the FPDUs in
// up (client to server) and down, as octet streams after the startup
// frames.
func checkDissection(t *testing.T, all []fpduView, clientPort uint16, o sessionOpts, up, down []byte) {
	t.Helper()
	// This connection's PDUs.
	cp := fmt.Sprint(clientPort)
	var views []fpduView
	frames := ""
	for _, v := range all {
		if v.srcPort != cp && v.dstPort != cp {
			continue
		}
		if v.frame != "" {
			frames += v.frame + " "
			continue
		}
		views = append(views, v)
	}
	if frames != "req rep " {
		t.Errorf("tshark found startup frames %q, want the Request and the Reply", frames)
	}
	if len(views) != len(tsharkSession) {
		t.Fatalf("tshark found %d FPDUs, want %d", len(views), len(tsharkSession))
	}
	// The CRCs and Markers we sent, in order per direction.
	crcs := map[bool][]uint32{}
	markers := map[bool][]string{}
	for _, dir := range []bool{true, false} {
		b, oo := up, Options{Markers: o.repM, CRC: o.crc}
		if !dir {
			b, oo = down, Options{Markers: o.reqM, CRC: o.crc}
		}
		for pos := 0; pos < len(b); {
			_, n, err := ParseFPDU(nil, b[pos:], uint64(pos), oo)
			if err != nil {
				t.Fatalf("own stream: %v", err)
			}
			// tshark shows the CRC field's octets read as a big-endian
			// number; the CRC32c value is their little-endian reading.
			crcs[dir] = append(crcs[dir], binary.BigEndian.Uint32(b[pos+n-4:]))
			var ptrs []string
			for q := pos; oo.Markers && q < pos+n-4; q++ {
				if q%MarkerInterval == 0 {
					ptrs = append(ptrs, fmt.Sprint(binary.BigEndian.Uint16(b[q+2:])))
				}
			}
			markers[dir] = append(markers[dir], strings.Join(ptrs, ","))
			pos += n
		}
	}
	for i, f := range tsharkSession {
		v := views[i]
		if (v.srcPort == fmt.Sprint(clientPort)) != f.fromClient {
			t.Errorf("FPDU %d from port %s", i, v.srcPort)
		}
		hl := 18
		if f.tagged {
			hl = 14
		}
		want := map[string]string{
			"iwarp_mpa.ulpdulength": fmt.Sprint(hl + f.payload),
			"iwarp_ddp.last_flag":   "1",
			"iwarp_ddp.dv":          "1",
			"iwarp_rdma.version":    "1",
			"iwarp_rdma.opcode":     fmt.Sprint(f.opcode),
		}
		if f.tagged {
			want["iwarp_ddp.tagged_flag"] = "1"
			want["iwarp_ddp.stag"] = fmt.Sprint(f.stag)
			want["iwarp_ddp.tagged_offset"] = fmt.Sprint(f.to)
		} else {
			want["iwarp_ddp.tagged_flag"] = "0"
			want["iwarp_ddp.qn"] = fmt.Sprint(f.qn)
			want["iwarp_ddp.msn"] = fmt.Sprint(f.msn)
			want["iwarp_ddp.mo"] = "0"
		}
		if o.crc {
			c := crcs[f.fromClient][0]
			want["iwarp_mpa.crc_check"] = fmt.Sprint(c)
			// tshark's verdict, e.g. "CRC check: 0x4a69026e (Good CRC32)".
			if s := v.f["iwarp_mpa.crc_check#"]; !strings.HasSuffix(s, "(Good CRC32)") {
				t.Errorf("FPDU %d: tshark says %q", i, s)
			} else if i == 0 {
				t.Logf("FPDU 0: %s", s)
			}
		}
		crcs[f.fromClient] = crcs[f.fromClient][1:]
		m := markers[f.fromClient][0]
		markers[f.fromClient] = markers[f.fromClient][1:]
		if got := strings.ReplaceAll(v.f["iwarp_mpa.marker_fpduptr"], " bytes", ""); got != m {
			t.Errorf("FPDU %d: Markers' FPDUPTRs %q, sent %q", i, got, m)
		}
		if m != "" {
			t.Logf("FPDU %d: Markers with FPDUPTR %s", i, m)
		}
		for k, w := range want {
			if !sameNumber(v.f[k], w) {
				t.Errorf("FPDU %d: %s = %q, sent %s", i, k, v.f[k], w)
			}
		}
	}
}

type sessionOpts struct {
	name       string
	crc        bool
	reqM, repM bool
}

var tsharkSessions = []sessionOpts{
	{name: "crc", crc: true},
	{name: "crc+markers", crc: true, reqM: true, repM: true},
}

func (o sessionOpts) frames() (Frame, Frame) {
	return Frame{Rev: 1, CRC: o.crc, Markers: o.reqM},
		Frame{Reply: true, Rev: 1, CRC: o.crc, Markers: o.repM}
}

// TestTsharkSynthesized records each session's byte streams into a pcap
// with pcapfile.ConnWriter and has tshark dissect it.
func TestTsharkSynthesized(t *testing.T) {
	tshark := needTshark(t)
	for _, o := range tsharkSessions {
		t.Run(o.name, func(t *testing.T) {
			// Record both directions through in-memory pipes.
			c1, s1 := net.Pipe()
			var up, down bytes.Buffer
			client := teeConn{Conn: c1, w: &up}
			server := teeConn{Conn: s1, w: &down}
			req, rep := o.frames()
			runMPA(t, client, server, req, rep)
			c1.Close()
			s1.Close()

			file := filepath.Join(t.TempDir(), "session.pcap")
			if d := os.Getenv("IWARP_KEEP_PCAP"); d != "" {
				file = filepath.Join(d, "synth-"+strings.ReplaceAll(o.name, "+", "-")+".pcap")
			}
			f, err := os.Create(file)
			if err != nil {
				t.Fatal(err)
			}
			pw, _ := pcapfile.NewWriter(f, pcapfile.LinkEthernet)
			cp := netip.MustParseAddrPort("10.1.1.1:40000")
			cw, _ := pcapfile.NewConnWriter(pw, cp, netip.MustParseAddrPort("10.1.1.2:5000"))
			t0 := time.Unix(1700000000, 0)
			cw.Open(t0)
			// The order on the wire: Request, Reply, client FPDUs, server
			// FPDUs, each in a segment of its own.
			cw.MSS = 16384
			n := req.Len()
			cw.Write(t0, true, up.Bytes()[:n])
			cw.Write(t0, false, down.Bytes()[:rep.Len()])
			fi, fr := Negotiate(&req, &rep)
			for _, fpdu := range splitFPDUs(t, up.Bytes()[n:], fi) {
				cw.Write(t0, true, fpdu)
			}
			for _, fpdu := range splitFPDUs(t, down.Bytes()[rep.Len():], fr) {
				cw.Write(t0, false, fpdu)
			}
			cw.Close(t0)
			f.Close()
			views := tsharkDissect(t, tshark, file)
			defer func() {
				if t.Failed() {
					t.Logf("tshark -V:\n%s", tsharkVerbose(tshark, file))
				}
			}()
			checkDissection(t, views, cp.Port(), o, up.Bytes()[n:], down.Bytes()[rep.Len():])
		})
	}
}

// splitFPDUs cuts an FPDU stream into its FPDUs.
func splitFPDUs(t *testing.T, b []byte, o Options) [][]byte {
	t.Helper()
	var out [][]byte
	for pos := 0; pos < len(b); {
		_, n, err := ParseFPDU(nil, b[pos:], uint64(pos), o)
		if err != nil {
			t.Fatalf("own stream at %d: %v", pos, err)
		}
		out = append(out, b[pos:pos+n])
		pos += n
	}
	return out
}

// teeConn copies what is written to w.
type teeConn struct {
	net.Conn
	w io.Writer
}

func (c teeConn) Write(p []byte) (int, error) {
	c.w.Write(p)
	return c.Conn.Write(p)
}
