package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/pcapfile"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/term"
)

func init() {
	register("dump", command{
		summary: "decode a pcap or pcapng capture of MPA/TCP or DDP/SCTP traffic",
		run:     runDump,
	})
}

const dumpUsage = `usage: iwarp dump [--json] FILE

Decodes a pcap or pcapng capture of iWARP traffic and prints one line per
MPA startup frame and FPDU (tcp) or per DDP Segment and session control
message (sctp), with the DDP and RDMAP fields and a note in plain words.

TCP: each connection's byte streams are reassembled, the MPA Request and
Reply Frames found (so the capture must hold the connection's start),
Markers stripped and CRCs checked as negotiated. SCTP: DATA chunks with
PPID 16 (DDP Segment) and 17 (DDP Stream Session Control), unencrypted: as
Wireshark exports them after DTLS decryption, or as "iwarp serve --pcap"
and "iwarp perf --pcap" record them, or in the Wireshark Upper PDU
records that Wireshark's "Export PDUs to File" writes.

Examples:
	iwarp dump session.pcap
	iwarp dump --json session.pcapng | jq .note

With --json each line is one JSON object:
	{"n":3,"time":"2026-01-02T15:04:05.000001Z","conn":1,"transport":"tcp",
	 "src":"10.0.0.1:40000","dst":"10.0.0.2:4791","kind":"fpdu",
	 "len":34,"crc":"good"|"bad"|"off",
	 "ddp":{"tagged":false,"last":true,"stag":0,"to":0,"qn":0,"msn":1,"mo":0},
	 "opcode":3,"op":"Send","payload_len":16,
	 "read_request":{...},"terminate":{...},"invalidate_stag":0,
	 "note":"..."}
kind is "mpa_request", "mpa_reply", "fpdu" (tcp), "segment" or
"session_control" (sctp, with "sctp_stream", "ddp_ssn" and "function"),
or "error" for what could not be decoded (the note says why).

Flags:
`

func runDump(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, dumpUsage)
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one capture FILE (try: iwarp dump -h)")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	recs, err := decodeCapture(f)
	if err != nil {
		return fmt.Errorf("%s: %v", fs.Arg(0), err)
	}
	for i := range recs {
		r := &recs[i]
		r.N = i + 1
		if *asJSON {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			stdout.Write(append(b, '\n'))
		} else {
			fmt.Fprintln(stdout, r.text(recs[0].Time))
		}
	}
	return nil
}

// dumpDDP is a DDP header's fields.
type dumpDDP struct {
	Tagged bool   `json:"tagged"`
	Last   bool   `json:"last"`
	STag   uint32 `json:"stag"`
	TO     uint64 `json:"to"`
	QN     uint32 `json:"qn"`
	MSN    uint32 `json:"msn"`
	MO     uint32 `json:"mo"`
}

type dumpReadRequest struct {
	SinkSTag uint32 `json:"sink_stag"`
	SinkTO   uint64 `json:"sink_to"`
	Size     uint32 `json:"size"`
	SrcSTag  uint32 `json:"src_stag"`
	SrcTO    uint64 `json:"src_to"`
}

// dumpAtomic is an Atomic Request's header (RFC 7306 Figure 4). Add or
// Swap Data and Mask are named as its AOpCode uses them.
type dumpAtomic struct {
	AOpCode     uint8   `json:"aopcode"`
	AOp         string  `json:"aop"`
	RequestID   uint32  `json:"request_id"`
	STag        uint32  `json:"stag"`
	TO          uint64  `json:"to"`
	AddData     *uint64 `json:"add_data,omitempty"`
	AddMask     *uint64 `json:"add_mask,omitempty"`
	SwapData    *uint64 `json:"swap_data,omitempty"`
	SwapMask    *uint64 `json:"swap_mask,omitempty"`
	CompareData uint64  `json:"compare_data"`
	CompareMask uint64  `json:"compare_mask"`
}

// dumpAtomicResp is an Atomic Response's header (RFC 7306 Figure 6).
type dumpAtomicResp struct {
	OrigRequestID uint32 `json:"original_request_id"`
	OrigValue     uint64 `json:"original_value"`
}

type dumpTerminate struct {
	Layer     uint8  `json:"layer"`
	EType     uint8  `json:"etype"`
	ECode     uint8  `json:"ecode"`
	LayerName string `json:"layer_name"`
	Name      string `json:"name"`
}

// dumpRecord is one line of output.
type dumpRecord struct {
	N          int              `json:"n"`
	Time       time.Time        `json:"time"`
	Conn       int              `json:"conn"`
	Transport  string           `json:"transport"`
	Src        string           `json:"src"`
	Dst        string           `json:"dst"`
	Kind       string           `json:"kind"`
	Len        int              `json:"len"`
	CRC        string           `json:"crc,omitempty"`
	SCTPStream *uint16          `json:"sctp_stream,omitempty"`
	DDPSSN     *uint16          `json:"ddp_ssn,omitempty"`
	Function   string           `json:"function,omitempty"`
	DDP        *dumpDDP         `json:"ddp,omitempty"`
	Opcode     *uint8           `json:"opcode,omitempty"`
	Op         string           `json:"op,omitempty"`
	PayloadLen *int             `json:"payload_len,omitempty"`
	ReadReq    *dumpReadRequest `json:"read_request,omitempty"`
	Terminate  *dumpTerminate   `json:"terminate,omitempty"`
	Atomic     *dumpAtomic      `json:"atomic,omitempty"`
	AtomicResp *dumpAtomicResp  `json:"atomic_response,omitempty"`
	Immediate  *uint64          `json:"immediate_data,omitempty"`
	InvSTag    *uint32          `json:"invalidate_stag,omitempty"`
	Note       string           `json:"note"`

	order int // tie-break within one instant: stream position
}

func (r *dumpRecord) text(t0 time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%4d %10.6f c%d %s > %s ", r.N, r.Time.Sub(t0).Seconds(), r.Conn, r.Src, r.Dst)
	switch r.Kind {
	case "mpa_request", "mpa_reply":
		fmt.Fprintf(&b, "%s len %d", strings.ToUpper(r.Kind[:3])+" "+r.Kind[4:], r.Len)
	case "fpdu":
		fmt.Fprintf(&b, "FPDU len %d CRC %s", r.Len, r.CRC)
	case "segment":
		fmt.Fprintf(&b, "SCTP stream %d DDP-SSN %d len %d", *r.SCTPStream, *r.DDPSSN, r.Len)
	case "session_control":
		fmt.Fprintf(&b, "SCTP stream %d DDP-SSN %d %s", *r.SCTPStream, *r.DDPSSN, r.Function)
	case "error":
		b.WriteString("ERROR")
	}
	if d := r.DDP; d != nil {
		flags := "T=0"
		if d.Tagged {
			flags = "T=1"
		}
		if d.Last {
			flags += " L=1"
		} else {
			flags += " L=0"
		}
		if d.Tagged {
			fmt.Fprintf(&b, " | DDP %s STag %#08x TO %#x", flags, d.STag, d.TO)
		} else {
			fmt.Fprintf(&b, " | DDP %s QN %d MSN %d MO %d", flags, d.QN, d.MSN, d.MO)
		}
	}
	if r.Op != "" {
		fmt.Fprintf(&b, " | RDMAP %s", r.Op)
		if r.PayloadLen != nil {
			fmt.Fprintf(&b, " payload %d", *r.PayloadLen)
		}
	}
	b.WriteString("\n       ")
	b.WriteString(r.Note)
	return b.String()
}

// errNotIWARP says a capture holds no iWARP traffic.
var errNotIWARP = errors.New("no iWARP traffic: no TCP stream starts with an MPA Request Frame and no SCTP DATA chunk has PPID 16 or 17")

// decodeCapture reads a capture and decodes its iWARP traffic.
func decodeCapture(r io.Reader) ([]dumpRecord, error) {
	pr, err := pcapfile.NewReader(r)
	if err != nil {
		return nil, describeCaptureErr(err)
	}
	asm := pcapfile.NewAssembler()
	sc := newSCTPDecoder()
	for {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, describeCaptureErr(err)
		}
		seg, err := pcapfile.DecodeTCP(p.LinkType, p.Data)
		if err == nil {
			seg.Time = p.Time
			asm.Add(seg)
			continue
		}
		sc.packet(p)
	}
	streams, _ := asm.Streams() // gaps are reported per FPDU below
	recs := decodeMPA(streams)
	recs = append(recs, sc.recs...)
	if len(recs) == 0 {
		return nil, errNotIWARP
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].Time.Equal(recs[j].Time) {
			return recs[i].Time.Before(recs[j].Time)
		}
		if recs[i].Conn != recs[j].Conn {
			return recs[i].Conn < recs[j].Conn
		}
		return recs[i].order < recs[j].order
	})
	return recs, nil
}

func describeCaptureErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "EOF") {
		return fmt.Errorf("truncated capture: %v", err)
	}
	if errors.Is(err, pcapfile.ErrFormat) {
		return fmt.Errorf("not a valid pcap or pcapng file: %v", err)
	}
	return err
}

// decodeMPA finds MPA connections in the TCP streams and decodes them.
func decodeMPA(streams []*pcapfile.Stream) []dumpRecord {
	var recs []dumpRecord
	conn := 0
	for _, s := range streams {
		if !bytes.HasPrefix(s.Data, []byte(mpa.RequestKey)) {
			continue
		}
		conn++
		rep := pcapfile.Lookup(streams, s.Flow.Reverse())
		recs = append(recs, decodeMPAConn(conn, s, rep)...)
	}
	return recs
}

func decodeMPAConn(conn int, reqS, repS *pcapfile.Stream) []dumpRecord {
	var recs []dumpRecord
	base := func(s *pcapfile.Stream, off int) dumpRecord {
		return dumpRecord{Time: s.TimeAt(off), Conn: conn, Transport: "tcp", Src: s.Flow.Src.String(), Dst: s.Flow.Dst.String(), order: off}
	}
	fail := func(s *pcapfile.Stream, off int, note string) {
		r := base(s, off)
		r.Kind, r.Note = "error", note
		recs = append(recs, r)
	}
	req, n, err := mpa.ParseFrame(reqS.Data)
	if err != nil {
		fail(reqS, 0, fmt.Sprintf("MPA Request Frame unreadable: %v", err))
		return recs
	}
	r := base(reqS, 0)
	r.Kind, r.Len = "mpa_request", n
	r.Note = "the initiator asks to start MPA: " + frameWords(&req)
	recs = append(recs, r)
	if repS == nil {
		fail(reqS, n, "the capture holds no data from the responder: no MPA Reply Frame")
		return recs
	}
	rep, m, err := mpa.ParseFrame(repS.Data)
	if err != nil {
		fail(repS, 0, fmt.Sprintf("MPA Reply Frame unreadable: %v", err))
		return recs
	}
	r = base(repS, 0)
	r.Kind, r.Len = "mpa_reply", m
	r.Note = "the responder answers: " + frameWords(&rep)
	recs = append(recs, r)
	if rep.Reject {
		return recs
	}
	fromInit, fromResp := mpa.Negotiate(&req, &rep)
	recs = append(recs, decodeFPDUs(conn, reqS, n, fromInit)...)
	recs = append(recs, decodeFPDUs(conn, repS, m, fromResp)...)
	return recs
}

func frameWords(f *mpa.Frame) string {
	var w []string
	w = append(w, fmt.Sprintf("revision %d", f.Rev))
	if f.Reply && f.Reject {
		w = append(w, "REJECTED")
	}
	w = append(w, "CRC "+yesNo(f.CRC), "Markers "+yesNo(f.Markers))
	if e, ulp, ok := f.Enhancement(); ok {
		w = append(w, fmt.Sprintf("IRD %d ORD %d", e.IRD, e.ORD))
		if e.PeerToPeer {
			w = append(w, "peer-to-peer")
		}
		w = append(w, fmt.Sprintf("%d bytes of private data", len(ulp)))
	} else {
		w = append(w, fmt.Sprintf("%d bytes of private data", len(f.PrivateData)))
	}
	return strings.Join(w, ", ")
}

func yesNo(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// decodeFPDUs decodes the FPDUs of one direction, from offset start.
func decodeFPDUs(conn int, s *pcapfile.Stream, start int, o mpa.Options) []dumpRecord {
	var recs []dumpRecord
	data := s.Data[start:]
	for pos := 0; pos < len(data); {
		r := dumpRecord{Time: s.TimeAt(start + pos), Conn: conn, Transport: "tcp", Src: s.Flow.Src.String(), Dst: s.Flow.Dst.String(), order: start + pos}
		u, n, err := mpa.ParseFPDU(nil, data[pos:], uint64(pos), o)
		crc := "good"
		if errors.Is(err, term.MPACRCError) {
			// Decode what the FPDU claims all the same, marked as bad.
			lax := o
			lax.CRC = false
			crc = "bad"
			u, n, err = mpa.ParseFPDU(nil, data[pos:], uint64(pos), lax)
		}
		if !o.CRC {
			crc = "off"
		}
		if err != nil {
			r.Kind = "error"
			r.Note = fmt.Sprintf("FPDU at stream offset %d: %v", start+pos, err)
			if errors.Is(err, mpa.ErrShortFPDU) {
				r.Note = fmt.Sprintf("the capture ends inside an FPDU at stream offset %d", start+pos)
			}
			recs = append(recs, r)
			break
		}
		r.Kind, r.Len, r.CRC = "fpdu", n, crc
		describeSegment(&r, u)
		if crc == "bad" {
			r.Note = "BAD CRC32c: the receiver must treat this FPDU as invalid (RFC 5044 §4.4). " + r.Note
		}
		recs = append(recs, r)
		pos += n
	}
	return appendGap(recs, conn, s)
}

// appendGap reports octets missing from the capture of a stream.
func appendGap(recs []dumpRecord, conn int, s *pcapfile.Stream) []dumpRecord {
	var gap *pcapfile.GapError
	if errors.As(s.Err, &gap) {
		recs = append(recs, dumpRecord{Time: s.TimeAt(len(s.Data) - 1), Conn: conn, Transport: "tcp", Src: s.Flow.Src.String(), Dst: s.Flow.Dst.String(),
			Kind: "error", order: len(s.Data),
			Note: fmt.Sprintf("the capture misses %d bytes at stream offset %d: decoding of this direction stops there", gap.Missing, gap.Offset)})
	}
	return recs
}

// describeSegment fills in a DDP Segment's DDP and RDMAP fields and note.
func describeSegment(r *dumpRecord, seg []byte) {
	h, hl, err := ddp.ParseHeader(seg)
	if err != nil {
		r.Note = fmt.Sprintf("DDP header unreadable: %v", err)
		return
	}
	r.DDP = &dumpDDP{Tagged: h.Tagged, Last: h.Last, STag: h.STag, TO: h.TO, QN: h.QN, MSN: h.MSN, MO: h.MO}
	payload := seg[hl:]
	op := rdmap.Control(h.RsvdULP[0]).Opcode()
	opv := uint8(op)
	r.Opcode, r.Op = &opv, op.String()
	pl := len(payload)
	r.PayloadLen = &pl
	last := ""
	if h.Last {
		last = " This is the message's last segment: it is complete."
	}
	switch {
	case h.DV != ddp.Version:
		r.Note = fmt.Sprintf("DDP version %d: not one this decoder knows.", h.DV)
	case op == rdmap.OpWrite:
		r.Note = fmt.Sprintf("RDMA Write: %d bytes were placed straight into the peer's memory, STag %#08x at TO %#x, with no receive buffer involved.%s", pl, h.STag, h.TO, last)
	case op == rdmap.OpReadResponse:
		r.Note = fmt.Sprintf("RDMA Read Response: %d bytes read from the peer were placed into STag %#08x at TO %#x.%s", pl, h.STag, h.TO, last)
	case op == rdmap.OpReadRequest:
		rr, _, err := rdmap.ParseReadRequest(payload)
		if err != nil {
			r.Note = fmt.Sprintf("RDMA Read Request, unreadable: %v", err)
			break
		}
		r.ReadReq = &dumpReadRequest{SinkSTag: rr.SinkSTag, SinkTO: rr.SinkTO, Size: rr.RDMARDSZ, SrcSTag: rr.SrcSTag, SrcTO: rr.SrcTO}
		r.Note = fmt.Sprintf("RDMA Read Request (queue 1, MSN %d): asks the peer for %d bytes from its STag %#08x at TO %#x, to be placed here into STag %#08x at TO %#x.", h.MSN, rr.RDMARDSZ, rr.SrcSTag, rr.SrcTO, rr.SinkSTag, rr.SinkTO)
	case op == rdmap.OpTerminate:
		t, _, err := rdmap.ParseTerminate(payload)
		if err != nil {
			r.Note = fmt.Sprintf("Terminate, unreadable: %v", err)
			break
		}
		e := t.Err()
		r.Terminate = &dumpTerminate{Layer: uint8(t.Layer), EType: t.EType, ECode: t.Code, LayerName: t.Layer.String(), Name: e.Name()}
		r.Note = fmt.Sprintf("Terminate: the sender stopped the stream because of a %s error: %s (layer %d, type %d, code %#02x). Nothing more is placed on this stream.", t.Layer, e.Name(), t.Layer, t.EType, t.Code)
		r.Note += siwTerminateNote(payload)
	case op.IsSend():
		if op.Invalidates() {
			inv := uint32(h.RsvdULP[1])<<24 | uint32(h.RsvdULP[2])<<16 | uint32(h.RsvdULP[3])<<8 | uint32(h.RsvdULP[4])
			r.InvSTag = &inv
		}
		r.Note = fmt.Sprintf("%s: %d bytes go into the peer's next posted receive buffer (queue %d, message MSN %d, at offset MO %d).", op, pl, h.QN, h.MSN, h.MO)
		if h.Last {
			r.Note += " This is the last segment: the message is delivered and its receive completes."
			if r.InvSTag != nil {
				r.Note += fmt.Sprintf(" It also invalidates the peer's STag %#08x.", *r.InvSTag)
			}
		}
	case op.Valid() && op > rdmap.OpTerminate:
		describeRFC7306(r, &h, op, payload)
	default:
		r.Note = fmt.Sprintf("RDMAP opcode %d is reserved: the receiver must terminate the stream.", op)
	}
}

// describeRFC7306 fills in the fields and note of RFC 7306's messages:
// the Atomic Request and Atomic Response, and Immediate Data with and
// without Solicited Event.
func describeRFC7306(r *dumpRecord, h *ddp.Header, op rdmap.Opcode, payload []byte) {
	switch op {
	case rdmap.OpAtomicRequest:
		a, _, err := rdmap.ParseAtomicRequest(payload)
		if err != nil || len(payload) != rdmap.AtomicRequestLen {
			r.Note = fmt.Sprintf("Atomic Request of %d bytes, not 52: the responder must terminate the stream.", len(payload))
			return
		}
		da := &dumpAtomic{AOpCode: uint8(a.Op), AOp: a.Op.String(), RequestID: a.ReqID, STag: a.STag, TO: a.TO,
			CompareData: a.CompareData, CompareMask: a.CompareMask}
		r.Atomic = da
		switch a.Op {
		case rdmap.FetchAdd:
			da.AddData, da.AddMask = &a.AddSwapData, &a.AddSwapMask
			r.Note = fmt.Sprintf("Atomic Request (queue 1, MSN %d, Request Identifier %d): FetchAdd adds %#x to the peer's 64-bit word at STag %#08x, TO %#x", h.MSN, a.ReqID, a.AddSwapData, a.STag, a.TO)
			if a.AddSwapMask != 0 {
				r.Note += fmt.Sprintf(", field by field (Add Mask %#x marks each field's top bit, whose carry is dropped)", a.AddSwapMask)
			}
			r.Note += "; the peer answers with the word's value before."
		case rdmap.CmpSwap:
			da.SwapData, da.SwapMask = &a.AddSwapData, &a.AddSwapMask
			r.Note = fmt.Sprintf("Atomic Request (queue 1, MSN %d, Request Identifier %d): CmpSwap: if the peer's 64-bit word at STag %#08x, TO %#x equals %#x (in the bits of Compare Mask %#x), its bits of Swap Mask %#x become those of %#x; the peer answers with the word's value before.",
				h.MSN, a.ReqID, a.STag, a.TO, a.CompareData, a.CompareMask, a.AddSwapMask, a.AddSwapData)
		default:
			r.Note = fmt.Sprintf("Atomic Request with AOpCode %d, which RFC 7306 does not define: the responder must refuse it.", a.Op)
			return
		}
		if a.TO%8 != 0 {
			r.Note += " Its TO is not a multiple of 8: unless the region's memory starts off an 8-byte boundary, the responder refuses it (RFC 7306 §8.2: Terminate 0x0/0x2/0x07)."
		}
	case rdmap.OpAtomicResponse:
		a, _, err := rdmap.ParseAtomicResponse(payload)
		if err != nil || len(payload) != rdmap.AtomicResponseLen {
			r.Note = fmt.Sprintf("Atomic Response of %d bytes, not 12: the requester must terminate the stream.", len(payload))
			return
		}
		r.AtomicResp = &dumpAtomicResp{OrigRequestID: a.OrigReqID, OrigValue: a.OrigValue}
		r.Note = fmt.Sprintf("Atomic Response (queue 3, MSN %d): answers the Atomic Request with Request Identifier %d; the word held %#x before it. The requester's atomic completes now.", h.MSN, a.OrigReqID, a.OrigValue)
	case rdmap.OpImmediate, rdmap.OpImmediateSE:
		d, _, err := rdmap.ParseImmediateData(payload)
		if err != nil || len(payload) != rdmap.ImmediateDataLen || h.MO != 0 {
			r.Note = fmt.Sprintf("%s of %d bytes at MO %d: it must be exactly 8 bytes (RFC 7306 §6.3); the receiver terminates the stream.", op, len(payload), h.MO)
			return
		}
		r.Immediate = &d.Data
		r.Note = fmt.Sprintf("%s: 8 bytes, %#016x, go into the peer's next posted receive buffer (queue 0, MSN %d), whose completion reports them", op, d.Data, h.MSN)
		if op == rdmap.OpImmediateSE {
			r.Note += " and asks for a Solicited Event"
		}
		r.Note += ". If an RDMA Write came just before, this is RDMA Write with Immediate Data: the receive completes once that Write is placed."
	}
}

// sctpDecoder collects the DDP traffic of SCTP packets.
type sctpDecoder struct {
	recs  []dumpRecord
	conns map[string]int // association (its two ends, sorted) -> conn number, from 1
	frags map[string][]byte
	order int
}

func newSCTPDecoder() *sctpDecoder {
	return &sctpDecoder{conns: map[string]int{}, frags: map[string][]byte{}}
}

// packet decodes one captured packet if it is SCTP.
func (d *sctpDecoder) packet(p pcapfile.Packet) {
	var src, dst string
	var sctp []byte
	var ok bool
	if p.LinkType == linkUpperPDU {
		src, dst, sctp, ok = upperPDU(p.Data)
	} else {
		src, dst, sctp, ok = ipPayload(p.LinkType, p.Data, 132)
	}
	if !ok || len(sctp) < 12 {
		return
	}
	sport := uint16(sctp[0])<<8 | uint16(sctp[1])
	dport := uint16(sctp[2])<<8 | uint16(sctp[3])
	from := fmt.Sprintf("%s:%d", src, sport)
	to := fmt.Sprintf("%s:%d", dst, dport)
	if strings.Contains(src, ":") {
		from, to = fmt.Sprintf("[%s]:%d", src, sport), fmt.Sprintf("[%s]:%d", dst, dport)
	}
	key := from + " " + to
	if to < from {
		key = to + " " + from
	}
	chunks := sctp[12:]
	for len(chunks) >= 4 {
		typ, flags := chunks[0], chunks[1]
		cl := int(chunks[2])<<8 | int(chunks[3])
		if cl < 4 || cl > len(chunks) {
			return
		}
		if typ == 0 && cl >= 16 { // DATA (RFC 4960 §3.3.1)
			stream := uint16(chunks[8])<<8 | uint16(chunks[9])
			ppid := sctpddp.PPID(uint32(chunks[12])<<24 | uint32(chunks[13])<<16 | uint32(chunks[14])<<8 | uint32(chunks[15]))
			data := chunks[16:cl]
			if ppid == sctpddp.PPIDSegment || ppid == sctpddp.PPIDSessionControl {
				fk := fmt.Sprintf("%s>%s/%d", from, to, stream)
				begin, end := flags&2 != 0, flags&1 != 0
				switch {
				case begin && end:
					d.message(p.Time, key, from, to, stream, ppid, data)
				case begin:
					d.frags[fk] = append([]byte(nil), data...)
				default:
					if prev, ok := d.frags[fk]; ok {
						prev = append(prev, data...)
						if end {
							delete(d.frags, fk)
							d.message(p.Time, key, from, to, stream, ppid, prev)
						} else {
							d.frags[fk] = prev
						}
					}
				}
			}
		}
		chunks = chunks[min((cl+3)&^3, len(chunks)):]
	}
}

func (d *sctpDecoder) message(t time.Time, key, from, to string, stream uint16, ppid sctpddp.PPID, msg []byte) {
	c, ok := d.conns[key]
	if !ok {
		c = len(d.conns) + 1
		d.conns[key] = c
	}
	d.order++
	r := dumpRecord{Time: t, Conn: c, Transport: "sctp", Src: from, Dst: to, Len: len(msg), order: d.order}
	st := stream
	r.SCTPStream = &st
	if ppid == sctpddp.PPIDSessionControl {
		m, _, err := sctpddp.ParseSessionControl(msg)
		if err != nil {
			r.Kind, r.Note = "error", fmt.Sprintf("DDP Stream Session Control message unreadable: %v", err)
			d.recs = append(d.recs, r)
			return
		}
		ssn := uint16(m.SSN)
		r.Kind, r.DDPSSN, r.Function = "session_control", &ssn, m.Function.String()
		r.Note = fmt.Sprintf("%s on DDP stream %d", m.Function, stream)
		if m.Function.Enhanced() && m.Function != sctpddp.FunctionTerminate {
			r.Note += fmt.Sprintf(" (RFC 6581: IRD %d, ORD %d)", m.Enhanced.IRD, m.Enhanced.ORD)
		}
		r.Note += fmt.Sprintf(", %d bytes of private data.", len(m.PrivateData))
		switch m.Function {
		case sctpddp.FunctionInitiate, sctpddp.FunctionEnhancedInitiate:
			r.Note += " The active side asks to start a DDP Stream Session."
		case sctpddp.FunctionAccept, sctpddp.FunctionEnhancedAccept:
			r.Note += " The passive side accepts: DDP Segments may flow."
		case sctpddp.FunctionReject, sctpddp.FunctionEnhancedReject:
			r.Note += " The passive side refuses the session."
		case sctpddp.FunctionTerminate:
			r.Note += " The session ends."
		}
		d.recs = append(d.recs, r)
		return
	}
	sc, _, err := sctpddp.ParseSegmentChunk(msg)
	if err != nil {
		r.Kind, r.Note = "error", fmt.Sprintf("DDP Segment chunk unreadable: %v", err)
		d.recs = append(d.recs, r)
		return
	}
	ssn := uint16(sc.SSN)
	r.Kind, r.DDPSSN = "segment", &ssn
	describeSegment(&r, sc.Segment)
	d.recs = append(d.recs, r)
}

// ipPayload returns the source and destination addresses and the payload
// of an IPv4 or IPv6 packet of protocol proto inside a link-layer frame.
func ipPayload(lt pcapfile.LinkType, b []byte, proto uint8) (string, string, []byte, bool) {
	var ethType uint16
	switch lt {
	case pcapfile.LinkEthernet:
		if len(b) < 14 {
			return "", "", nil, false
		}
		ethType, b = uint16(b[12])<<8|uint16(b[13]), b[14:]
		for (ethType == 0x8100 || ethType == 0x88a8) && len(b) >= 4 {
			ethType, b = uint16(b[2])<<8|uint16(b[3]), b[4:]
		}
	case pcapfile.LinkSLL:
		if len(b) < 16 {
			return "", "", nil, false
		}
		ethType, b = uint16(b[14])<<8|uint16(b[15]), b[16:]
	case pcapfile.LinkSLL2:
		if len(b) < 20 {
			return "", "", nil, false
		}
		ethType, b = uint16(b[0])<<8|uint16(b[1]), b[20:]
	case pcapfile.LinkNull, pcapfile.LinkLoop:
		if len(b) < 4 {
			return "", "", nil, false
		}
		b = b[4:]
	case pcapfile.LinkRaw, pcapfile.LinkIPv4, pcapfile.LinkIPv6:
	default:
		return "", "", nil, false
	}
	if ethType != 0 && ethType != 0x0800 && ethType != 0x86dd {
		return "", "", nil, false
	}
	if len(b) < 1 {
		return "", "", nil, false
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return "", "", nil, false
		}
		ihl := int(b[0]&0x0f) * 4
		total := int(b[2])<<8 | int(b[3])
		if ihl < 20 || total < ihl || total > len(b) || b[9] != proto {
			return "", "", nil, false
		}
		if b[6]&0x20 != 0 || (int(b[6]&0x1f)<<8|int(b[7])) != 0 { // fragment
			return "", "", nil, false
		}
		src := fmt.Sprintf("%d.%d.%d.%d", b[12], b[13], b[14], b[15])
		dst := fmt.Sprintf("%d.%d.%d.%d", b[16], b[17], b[18], b[19])
		return src, dst, b[ihl:total], true
	case 6:
		if len(b) < 40 {
			return "", "", nil, false
		}
		pl := int(b[4])<<8 | int(b[5])
		if 40+pl > len(b) || b[6] != proto {
			return "", "", nil, false
		}
		src, dst := ipv6String(b[8:24]), ipv6String(b[24:40])
		return src, dst, b[40 : 40+pl], true
	}
	return "", "", nil, false
}

// linkUpperPDU is LINKTYPE_WIRESHARK_UPPER_PDU: what Wireshark's "Export
// PDUs to File" writes, for example SCTP packets found inside decrypted
// DTLS.
const linkUpperPDU pcapfile.LinkType = 252

// upperPDU decodes an exported PDU: tags (type and length, big-endian,
// then the value) up to the end-of-options tag, then the PDU. It returns
// an SCTP packet, with the addresses the tags give.
func upperPDU(b []byte) (string, string, []byte, bool) {
	src, dst := "0.0.0.0", "0.0.0.0"
	proto := ""
	for {
		if len(b) < 4 {
			return "", "", nil, false
		}
		tag, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+n {
			return "", "", nil, false
		}
		v := b[4 : 4+n]
		b = b[4+n:]
		switch tag {
		case 0: // EXP_PDU_TAG_END_OF_OPT
			if proto != "" && proto != "sctp" {
				return "", "", nil, false
			}
			return src, dst, b, true
		case 12: // EXP_PDU_TAG_PROTO_NAME
			proto = strings.TrimRight(string(v), "\x00")
		case 20, 21: // EXP_PDU_TAG_IPV4_SRC, _DST
			if n == 4 {
				a := netip.AddrFrom4([4]byte(v)).String()
				if tag == 20 {
					src = a
				} else {
					dst = a
				}
			}
		case 22, 23: // EXP_PDU_TAG_IPV6_SRC, _DST
			if n == 16 {
				a := netip.AddrFrom16([16]byte(v)).String()
				if tag == 22 {
					src = a
				} else {
					dst = a
				}
			}
		}
	}
}

func ipv6String(b []byte) string {
	var a [16]byte
	copy(a[:], b)
	return netip.AddrFrom16(a).String()
}

// siwTerminateNote says when a Terminate Control (its first three
// octets) looks like Linux siw's on a little-endian machine: siw's struct
// iwarp_terminate uses bitfields, so its Layer and Error Type nibbles go
// out swapped and its M, D and R bits land in the low bits of the third
// octet, which RFC 5040 §4.8 reserves. The note is given when the swapped
// reading is a registered triple (RFC 6580) and either the RFC reading is
// not, or the reserved bits hold what would be siw's M, D, R.
func siwTerminateNote(ctl []byte) string {
	if len(ctl) < 3 {
		return ""
	}
	// term.Known leaves out DDP's Local Catastrophic error, 0x1/0x0/0x00
	// (RFC 6580 §3 registers it).
	known := func(l term.Layer, etype, code uint8) bool {
		return term.Known(l, etype, code) || (l == term.LayerDDP && etype == 0 && code == 0)
	}
	layer, etype, code := term.Layer(ctl[0]>>4), ctl[0]&0xf, ctl[1]
	sl, se := term.Layer(etype), uint8(layer)
	if !known(sl, se, code) || sl == layer {
		return ""
	}
	odd := !known(layer, etype, code)
	siwBits := ctl[2]&0xe0 == 0 && ctl[2]&0x07 != 0
	if !odd && !siwBits {
		return ""
	}
	how := "looks like"
	if !odd {
		how = "may be"
	}
	return fmt.Sprintf(" This %s Linux siw's Terminate header on a little-endian machine, whose Layer and Error Type nibbles are swapped: read swapped it is %s / %s (layer %d, type %d, code %#02x).",
		how, sl, term.New(sl, se, code).Name(), sl, se, code)
}
