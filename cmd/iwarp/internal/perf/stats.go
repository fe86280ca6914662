package perf

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// MB is perftest's MB: 2^20 octets.
const MB = 1 << 20

// Stats is one size's result.
type Stats struct {
	Bytes      int       `json:"bytes"`
	Iterations int       `json:"iterations"`
	Seconds    float64   `json:"seconds"`
	BWPeak     float64   `json:"bw_peak_mbs"`
	BWAvg      float64   `json:"bw_avg_mbs"`
	MsgRate    float64   `json:"msg_rate_mpps"`
	Lat        *LatStats `json:"lat_usec,omitempty"`
	Raw        *RawStats `json:"raw,omitempty"`
	Ratio      *float64  `json:"ratio,omitempty"`
}

// LatStats are perftest's latency columns, in microseconds.
type LatStats struct {
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Typical float64 `json:"typical"`
	Avg     float64 `json:"avg"`
	Stdev   float64 `json:"stdev"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p99_9"`
}

// RawStats is the raw transport's side of a comparison.
type RawStats struct {
	Transport  string  `json:"transport"`
	Bytes      int     `json:"bytes"`
	Iterations int     `json:"iterations"`
	Seconds    float64 `json:"seconds"`
	BWAvg      float64 `json:"bw_avg_mbs"`
	CRC32c     bool    `json:"crc32c,omitempty"`
	Rounds     int     `json:"rounds"`
	// Method says how the raw transport moved the bytes (the baseline's
	// shape: write sizes, gathering, round trips).
	Method string    `json:"method,omitempty"`
	Lat    *LatStats `json:"lat_usec,omitempty"`
}

// Result is a client's run, as `iwarp perf --json` prints it.
type Result struct {
	Transport string  `json:"transport"`
	URL       string  `json:"url"`
	Op        string  `json:"op"`
	Test      string  `json:"test"`
	Results   []Stats `json:"results"`
}

// Latencies summarises samples (in µs): the typical latency is the
// median, the percentiles the samples at or above those fractions.
func Latencies(samples []float64) *LatStats {
	if len(samples) == 0 {
		return &LatStats{}
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	avg := sum / float64(len(s))
	var sq float64
	for _, v := range s {
		sq += (v - avg) * (v - avg)
	}
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return &LatStats{Min: s[0], Max: s[len(s)-1], Typical: s[len(s)/2], Avg: avg,
		Stdev: math.Sqrt(sq / float64(len(s))), P99: pct(0.99), P999: pct(0.999)}
}

// median returns the median of v (0 if empty); it sorts v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// latResult summarises a latency test of len(samples) round trips of size
// octets that took secs.
func latResult(size int, samples []float64, secs float64) Stats {
	st := Stats{Bytes: size, Iterations: len(samples), Seconds: secs, Lat: Latencies(samples)}
	if secs > 0 {
		st.BWAvg = float64(size) * float64(len(samples)) / secs / MB
		st.MsgRate = float64(len(samples)) / secs / 1e6
	}
	st.BWPeak = st.BWAvg
	return st
}

// Rule is the line that frames perftest's output.
var Rule = strings.Repeat("-", 87)

// Column headings, as perftest prints them; the raw columns follow with
// --compare-raw.
const (
	BWHeading     = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	LatHeading    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
	RawBWHeading  = "   raw BW[MB/sec]   ratio"
	RawLatHeading = "   raw t_typical[usec]   ratio"
)

// WriteHeading writes the column headings of a bandwidth or (lat) a
// latency test, with the raw columns when raw is set.
func WriteHeading(w io.Writer, lat, raw bool) {
	h := BWHeading
	if lat {
		h = LatHeading
	}
	if raw {
		if lat {
			h += RawLatHeading
		} else {
			h += RawBWHeading
		}
	}
	fmt.Fprintln(w, h)
}

// WriteLine writes one size's figures in perftest's columns, and the raw
// transport's figure and the ratio when st has them.
func WriteLine(w io.Writer, st *Stats) {
	if l := st.Lat; l != nil {
		line := fmt.Sprintf(" %-7d %-10d %-7.2f        %-7.2f        %-7.2f          %-7.2f        %-7.2f          %-7.2f                %-7.2f",
			st.Bytes, st.Iterations, l.Min, l.Max, l.Typical, l.Avg, l.Stdev, l.P99, l.P999)
		if st.Raw != nil && st.Raw.Lat != nil && st.Ratio != nil {
			line += fmt.Sprintf("                %-7.2f            %.3f", st.Raw.Lat.Typical, *st.Ratio)
		}
		fmt.Fprintln(w, line)
		return
	}
	line := fmt.Sprintf(" %-10d %-10d       %-10.2f         %-10.2f           %-10.6f", st.Bytes, st.Iterations, st.BWPeak, st.BWAvg, st.MsgRate)
	if st.Raw != nil && st.Ratio != nil {
		line += fmt.Sprintf("   %-10.2f       %.3f", st.Raw.BWAvg, *st.Ratio)
	}
	fmt.Fprintln(w, line)
}
