package capture

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/term"
)

// decodeMPA finds MPA connections in the TCP streams and decodes them.
func decodeMPA(streams []*pcapfile.Stream) []Record {
	var recs []Record
	conn := 0
	for _, s := range streams {
		if !bytes.HasPrefix(s.Data, []byte(mpa.RequestKey)) {
			continue
		}
		conn++
		rep := pcapfile.Lookup(streams, s.Flow.Reverse())
		recs = decodeMPAConn(recs, conn, s, rep)
	}
	return recs
}

// tcpRecord is a record of conn at offset off of stream s.
func tcpRecord(conn int, s *pcapfile.Stream, off int) Record {
	return Record{Time: s.TimeAt(off), Conn: conn, Transport: "tcp", Src: s.Flow.Src.String(), Dst: s.Flow.Dst.String(), order: off}
}

// decodeMPAConn appends the records of one connection to recs.
func decodeMPAConn(recs []Record, conn int, reqS, repS *pcapfile.Stream) []Record {
	fail := func(s *pcapfile.Stream, off int, note string) {
		r := tcpRecord(conn, s, off)
		r.Kind, r.Note = KindError, note
		recs = append(recs, r)
	}
	req, n, err := mpa.ParseFrame(reqS.Data)
	if err != nil {
		fail(reqS, 0, fmt.Sprintf("MPA Request Frame unreadable: %v", err))
		return recs
	}
	r := tcpRecord(conn, reqS, 0)
	r.Kind, r.Len, r.Raw = KindMPARequest, n, reqS.Data[:n]
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
	r = tcpRecord(conn, repS, 0)
	r.Kind, r.Len, r.Raw = KindMPAReply, m, repS.Data[:m]
	r.Note = "the responder answers: " + frameWords(&rep)
	recs = append(recs, r)
	if rep.Reject {
		return recs
	}
	fromInit, fromResp := mpa.Negotiate(&req, &rep)
	recs = decodeFPDUs(recs, conn, reqS, n, fromInit)
	return decodeFPDUs(recs, conn, repS, m, fromResp)
}

func frameWords(f *mpa.Frame) string {
	var w []string
	w = append(w, fmt.Sprintf("revision %d", f.Rev))
	if f.Reply && f.Reject {
		w = append(w, "REJECTED")
	}
	w = append(w, "CRC "+onOff(f.CRC), "Markers "+onOff(f.Markers))
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

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// decodeFPDUs appends the records of the FPDUs of one direction, from
// offset start, to recs.
func decodeFPDUs(recs []Record, conn int, s *pcapfile.Stream, start int, o mpa.Options) []Record {
	data := s.Data[start:]
	src, dst := s.Flow.Src.String(), s.Flow.Dst.String()
	for pos := 0; pos < len(data); {
		off := start + pos
		r := Record{Time: s.TimeAt(off), Conn: conn, Transport: "tcp", Src: src, Dst: dst, order: off}
		u, n, err := mpa.ParseFPDU(nil, data[pos:], uint64(pos), o)
		crc := CRCGood
		if errors.Is(err, term.MPACRCError) {
			// Decode what the FPDU claims all the same, marked as bad.
			lax := o
			lax.CRC = false
			crc = CRCBad
			u, n, err = mpa.ParseFPDU(nil, data[pos:], uint64(pos), lax)
		}
		if !o.CRC {
			crc = CRCOff
		}
		if err != nil {
			r.Kind = KindError
			r.Note = fmt.Sprintf("FPDU at stream offset %d: %v", start+pos, err)
			if errors.Is(err, mpa.ErrShortFPDU) {
				r.Note = fmt.Sprintf("the capture ends inside an FPDU at stream offset %d", start+pos)
			}
			recs = append(recs, r)
			break
		}
		// The FPDU reaches MPA when TCP can deliver its last octet: after
		// every earlier octet, however early its own segments came.
		r.Time = s.InOrderAt(off + n - 1)
		r.Kind, r.Len, r.CRC = KindFPDU, n, crc
		describeSegment(&r, u)
		if crc == CRCBad {
			r.Note = "BAD CRC32c: the receiver must treat this FPDU as invalid (RFC 5044 §4.4). " + r.Note
		}
		recs = append(recs, r)
		pos += n
	}
	return appendGap(recs, conn, s)
}

// appendGap reports octets missing from the capture of a stream.
func appendGap(recs []Record, conn int, s *pcapfile.Stream) []Record {
	var gap *pcapfile.GapError
	if errors.As(s.Err, &gap) {
		r := tcpRecord(conn, s, len(s.Data)-1)
		r.Kind, r.order = KindError, len(s.Data)
		r.Note = fmt.Sprintf("the capture misses %d bytes at stream offset %d: decoding of this direction stops there", gap.Missing, gap.Offset)
		recs = append(recs, r)
	}
	return recs
}
