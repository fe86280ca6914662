package capture

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
)

// ErrNotIWARP says a capture holds no iWARP traffic.
var ErrNotIWARP = errors.New("no iWARP traffic: no TCP stream starts with an MPA Request Frame and no SCTP DATA chunk has PPID 16 or 17")

// Decode reads a pcap or pcapng capture and decodes its iWARP traffic:
// the records of every MPA connection and SCTP association, in the order
// of their times (a connection's records at one instant in stream
// order), numbered from 1. A capture that ends inside a packet gives an
// error saying it is truncated; one that holds no iWARP traffic,
// ErrNotIWARP. What cannot be decoded inside a connection is a record of
// KindError.
func Decode(r io.Reader) ([]Record, error) {
	recs, err := DecodePrefix(r)
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// DecodePrefix is Decode for a capture that may be cut short or damaged
// part way: when reading stops at a truncated or malformed packet, it
// still returns the records of the packets before it, together with the
// error that stopped it. A file that is no capture at all, or one with
// no iWARP traffic before the error, gives no records.
func DecodePrefix(r io.Reader) ([]Record, error) {
	pr, err := pcapfile.NewReader(r)
	if err != nil {
		return nil, describeCaptureErr(err)
	}
	asm := pcapfile.NewAssembler()
	sc := newSCTPDecoder()
	var readErr error
	for {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = describeCaptureErr(err)
			break
		}
		seg, err := pcapfile.DecodeTCP(p.LinkType, p.Data)
		if err == nil {
			seg.Time = p.Time
			asm.Add(seg)
			continue
		}
		sc.packet(p)
	}
	streams, _ := asm.Streams() // gaps are reported per FPDU
	recs := decodeMPA(streams)
	recs = append(recs, sc.recs...)
	if len(recs) == 0 {
		if readErr != nil {
			return nil, readErr
		}
		return nil, ErrNotIWARP
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
	for i := range recs {
		recs[i].N = i + 1
	}
	return recs, readErr
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
