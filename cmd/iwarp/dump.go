package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/iwarpgo/iwarp/capture"
)

func init() {
	register("dump", command{
		summary: "decode a pcap or pcapng capture of MPA/TCP or DDP/SCTP traffic",
		run:     runDump,
	})
}

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
	recs, err := capture.Decode(f)
	if err != nil {
		return fmt.Errorf("%s: %v", fs.Arg(0), err)
	}
	for i := range recs {
		r := &recs[i]
		if *asJSON {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			stdout.Write(append(b, '\n'))
		} else {
			fmt.Fprintln(stdout, dumpText(r, recs[0].Time))
		}
	}
	return nil
}

// dumpText is a record's two lines of text output: times are seconds
// from t0, the first record's.
func dumpText(r *capture.Record, t0 time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%4d %10.6f c%d %s > %s ", r.N, r.Time.Sub(t0).Seconds(), r.Conn, r.Src, r.Dst)
	switch r.Kind {
	case capture.KindMPARequest, capture.KindMPAReply:
		fmt.Fprintf(&b, "%s len %d", strings.ToUpper(r.Kind[:3])+" "+r.Kind[4:], r.Len)
	case capture.KindFPDU:
		fmt.Fprintf(&b, "FPDU len %d CRC %s", r.Len, r.CRC)
	case capture.KindSegment:
		fmt.Fprintf(&b, "SCTP stream %d DDP-SSN %d len %d", *r.SCTPStream, *r.DDPSSN, r.Len)
	case capture.KindSessionControl:
		fmt.Fprintf(&b, "SCTP stream %d DDP-SSN %d %s", *r.SCTPStream, *r.DDPSSN, r.Function)
	case capture.KindError:
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
