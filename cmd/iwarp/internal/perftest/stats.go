package perftest

import (
	"math"
	"sort"
	"time"
)

// mb is perftest's MB: 2^20 octets (format_factor 0x100000).
const mb = 1 << 20

// bwReport computes perftest's bandwidth figures (print_report_bw) from
// the times operations were posted and the times their completions were
// polled: tcompleted[j] is set for the operations whose completion was
// asked for (every cqMod-th and the last). Peak is the best rate over any
// run of operations from a post to a polled completion; with noPeak (the
// receiver of ib_send_bw) it is 0 and the average runs from posted[0] to
// completed[0].
func bwReport(size, iters, cqMod int, posted, completed []time.Duration, noPeak bool) BWReport {
	r := BWReport{Size: uint64(size), Iters: uint64(iters)}
	last := iters - 1
	if noPeak {
		last = 0
	}
	total := (completed[last] - posted[0]).Seconds()
	if total <= 0 {
		total = 1e-9
	}
	r.BWAvg = float64(size) * float64(iters) / total / mb
	r.MsgRate = float64(iters) / total / 1e6
	if noPeak {
		return r
	}
	opt := completed[0] - posted[0] // opt_delta starts as tcompleted[0] - tposted[0]
	if completed[0] == 0 {
		opt = completed[last] - posted[0]
	}
	for i := 0; i < iters; i++ {
		first := (i+1+cqMod-1)/cqMod*cqMod - 1 // ROUND_UP(i+1, cq_mod) - 1
		for j := first; j < iters; j += cqMod {
			if t := (completed[j] - posted[i]) / time.Duration(j-i+1); t < opt {
				opt = t
			}
		}
		if iters%cqMod != 0 {
			j := iters - 1
			if t := (completed[j] - posted[i]) / time.Duration(j-i+1); t < opt {
				opt = t
			}
		}
	}
	if opt <= 0 {
		opt = 1
	}
	r.BWPeak = float64(size) / opt.Seconds() / mb
	return r
}

// latStats computes perftest's latency columns (print_report_lat) from
// the times the iterations were posted: the samples are the differences
// of successive posts, halved for the ping-pong tests (rtt_factor 2) and
// whole for RDMA Read; sorted, the two largest are dropped
// (LAT_MEASURE_TAIL), t_max is the largest kept... as perftest prints it:
// delta[measure_cnt], the first one dropped; t_typical is the median of
// the kept ones (get_median), the average and the standard deviation are
// over them, the deviation computed with perftest's integer truncation
// of each term, and the percentiles index delta[ceil(n * p)].
func latStats(posted []time.Duration, halve bool) *LatStats {
	n := len(posted) - 1
	if n < 3 {
		return &LatStats{}
	}
	f := 1.0
	if halve {
		f = 2
	}
	d := make([]float64, n)
	for i := range d {
		d[i] = float64(posted[i+1]-posted[i]) / float64(time.Microsecond) / f
	}
	sort.Float64s(d)
	m := n - 2 // measure_cnt - LAT_MEASURE_TAIL
	var median float64
	if (m-1)%2 != 0 {
		median = (d[m/2] + d[m/2-1]) / 2
	} else {
		median = d[m/2]
	}
	var sum float64
	for _, v := range d[:m] {
		sum += v
	}
	avg := sum / float64(m)
	var sq float64
	for _, v := range d[:m] {
		t := math.Trunc(avg - v) // int temp_var
		sq += math.Trunc(t * t)  // int pow_var
	}
	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	return &LatStats{Min: d[0], Max: d[m], Typical: median, Avg: avg,
		Stdev: math.Sqrt(sq / float64(m)), P99: d[min(i99, n-1)], P999: d[min(i999, n-1)]}
}
