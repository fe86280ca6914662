package perftest

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perf"
)

// titles are perftest's names of its tests.
var titles = map[Test]string{
	WriteBW: "RDMA_Write BW Test", ReadBW: "RDMA_Read BW Test", SendBW: "Send BW Test",
	WriteLat: "RDMA_Write Latency Test", ReadLat: "RDMA_Read Latency Test", SendLat: "Send Latency Test",
}

// ReportJSON is the JSON form of a Result's report (Result.Report).
type ReportJSON struct {
	Test        string      `json:"test"`
	Role        string      `json:"role"`
	URL         string      `json:"url"`
	Peer        string      `json:"peer"`
	PeerVersion string      `json:"peer_version"`
	CRC         bool        `json:"crc"`
	DataIRD     int         `json:"data_ird"`
	DataORD     int         `json:"data_ord"`
	CycleBuffer int         `json:"cycle_buffer"`
	Result      *perf.Stats `json:"result,omitempty"`
	// ReportFrom says whose figures Result holds: "local", or "peer" for
	// the server of write_bw and read_bw, which has the client's report.
	ReportFrom string  `json:"report_from,omitempty"`
	Moved      Moved   `json:"moved"`
	Seconds    float64 `json:"seconds"`
}

// Report writes what the session at url moved in perftest's format, or
// as one line of JSON.
func (r *Result) Report(w io.Writer, url string, asJSON bool) error {
	role, from := "client", "local"
	if !r.Client {
		role = "server"
		if r.Test == WriteBW || r.Test == ReadBW {
			from = "peer"
		}
	}
	var st *perf.Stats
	switch {
	case r.BW != nil:
		st = &perf.Stats{Bytes: r.Size, Iterations: r.Iters, BWPeak: r.BW.BWPeak, BWAvg: r.BW.BWAvg, MsgRate: r.BW.MsgRate}
		if r.BW.BWAvg > 0 {
			st.Seconds = float64(r.Size) * float64(r.Iters) / (r.BW.BWAvg * (1 << 20))
		}
	case r.Lat != nil:
		l := r.Lat
		st = &perf.Stats{Bytes: r.Size, Iterations: r.Iters,
			Lat: &perf.LatStats{Min: l.Min, Max: l.Max, Typical: l.Typical, Avg: l.Avg, Stdev: l.Stdev, P99: l.P99, P999: l.P999}}
	}
	if asJSON {
		j := ReportJSON{Test: r.Test.String(), Role: role, URL: url, Peer: r.ControlPeer, PeerVersion: r.PeerVersion,
			CRC: r.Data.CRC, DataIRD: r.DataIRD, DataORD: r.DataORD, CycleBuffer: r.CycleBuffer, Result: st, Moved: r.Moved,
			Seconds: r.Duration.Seconds()}
		if st != nil {
			j.ReportFrom = from
		}
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	line := perf.Rule
	fmt.Fprintln(w, line)
	fmt.Fprintf(w, "                    %s (perftest -R protocol, iwarp %s)\n", r.Test.Title(), role)
	fmt.Fprintf(w, " Number of qps   : 1\t\tTransport type : IW (MPA revision %d over TCP)\n", r.Data.Revision)
	fmt.Fprintf(w, " Connection type : RC\t\tMPA CRC        : %v\n", onOff(r.Data.CRC))
	fmt.Fprintf(w, " Peer            : %s (perftest %s)\n", r.ControlPeer, r.PeerVersion)
	if r.Test == ReadBW || r.Test == ReadLat {
		fmt.Fprintf(w, " Outstand reads  : IRD %d, ORD %d\n", r.DataIRD, r.DataORD)
	}
	fmt.Fprintf(w, " Cycle buffer    : %d[B] (peer's %d), cache line %d[B]\n", r.CycleBuffer, r.PeerCycleBuffer, r.CacheLine)
	fmt.Fprintf(w, " Mtu             : %d[B] (peer's)\n", MTUBytes(r.PeerMTU))
	fmt.Fprintf(w, " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n")
	fmt.Fprintln(w, line)
	dest := func(side string, d Dest) {
		fmt.Fprintf(w, " %s address: LID %#04x QPN %#06x PSN %#06x", side, d.LID, d.QPN, d.PSN)
		if r.Test == ReadBW || r.Test == ReadLat {
			fmt.Fprintf(w, " OUT %#04x", d.OutReads)
		}
		fmt.Fprintf(w, " RKey %#08x VAddr %#016x\n", d.RKey, d.VAddr)
	}
	dest("local", r.Local)
	dest("remote", r.Peer)
	fmt.Fprintln(w, line)
	if st != nil {
		perf.WriteHeading(w, st.Lat != nil, false)
		perf.WriteLine(w, st)
		if from == "peer" {
			fmt.Fprintln(w, " (the client's report)")
		}
	} else {
		fmt.Fprintf(w, " %d RDMA Reads of %d octets answered\n", r.Moved.ReadsServed, r.Size)
	}
	fmt.Fprintln(w, line)
	return nil
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// Title is perftest's name of the test, as its reports head it.
func (t Test) Title() string { return titles[t] }
