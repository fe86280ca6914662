// Command perfpairs is lab 7's measuring command: it runs `iwarp perf
// --connect` with two settings, A and B, in pairs (A then B, then B then
// A, and so on, so that neither always runs first), writes each run's
// --json to a file and reads it only after the run has ended (a parser
// running beside the measurement would take a core from it), and prints
// each run, then the medians: of each setting's figure, of its ratio to
// plain TCP when the runs use --compare-raw, and of B/A within each
// pair. Without --b it repeats A.
//
// The figure is the average bandwidth (MB/s, MB = 2^20 bytes) of a
// bandwidth test, or the typical latency (µs) of a --lat test.
//
//	go run ./docs/labs/code/perfpairs --connect tcp://127.0.0.1:19572 --pairs 5 \
//	    --a "--op read --duration 2s --compare-raw" --b "--op read --duration 2s --compare-raw --cq-mod 1"
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// result is the part of `iwarp perf --json` this program reads.
type result struct {
	Test    string `json:"test"`
	Results []struct {
		Bytes    int     `json:"bytes"`
		BWAvgMBs float64 `json:"bw_avg_mbs"`
		Lat      *struct {
			Typical float64 `json:"typical"`
		} `json:"lat_usec"`
		Ratio float64 `json:"ratio"`
	} `json:"results"`
}

// run is one measurement: its figure and, with --compare-raw, its ratio
// to plain TCP (0 without).
type run struct {
	figure, ratio float64
	unit          string
}

func main() {
	iwarp := flag.String("iwarp", "iwarp", "the iwarp command")
	url := flag.String("connect", "", "the perf server's URL (iwarp perf --listen URL)")
	pairs := flag.Int("pairs", 5, "pairs of runs")
	a := flag.String("a", "", "iwarp perf flags of setting A (--op and the rest)")
	b := flag.String("b", "", "iwarp perf flags of setting B; empty: A alone, repeated")
	flag.Parse()
	if *url == "" || *a == "" || *pairs < 1 {
		fmt.Fprintln(os.Stderr, "usage: perfpairs --connect URL --a FLAGS [--b FLAGS] [--pairs N]")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "perfpairs")
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfpairs:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	settings := []string{*a}
	if *b != "" {
		settings = append(settings, *b)
	}
	runs := make([][]run, len(settings))
	for p := range *pairs {
		order := []int{0, 1}[:len(settings)]
		if p%2 == 1 && len(settings) == 2 {
			order = []int{1, 0}
		}
		for _, s := range order {
			r, err := measure(*iwarp, *url, settings[s], filepath.Join(dir, fmt.Sprintf("%d-%d.json", p, s)))
			if err != nil {
				fmt.Fprintln(os.Stderr, "perfpairs:", err)
				os.Exit(1)
			}
			runs[s] = append(runs[s], r)
			fmt.Printf("pair %d %s: %s\n", p+1, name(s), r)
		}
	}
	fmt.Println()
	for s := range settings {
		fmt.Printf("%s (%s): %s\n", name(s), settings[s], summary(runs[s]))
	}
	if len(settings) == 2 {
		var q []float64
		for i := range runs[0] {
			q = append(q, runs[1][i].figure/runs[0][i].figure)
		}
		fmt.Printf("B/A within each pair: %s\n", spread(q, "%.2f"))
	}
}

func name(s int) string { return string(rune('A' + s)) }

// measure runs iwarp perf once with its JSON going to file, and reads
// the file once the run is over.
func measure(iwarp, url, flags, file string) (run, error) {
	out, err := os.Create(file)
	if err != nil {
		return run{}, err
	}
	args := append([]string{"perf", "--connect", url, "--json"}, strings.Fields(flags)...)
	cmd := exec.Command(iwarp, args...)
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	err = cmd.Run()
	out.Close()
	if err != nil {
		return run{}, fmt.Errorf("%s %s: %w", iwarp, strings.Join(args, " "), err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return run{}, err
	}
	var res result
	if err := json.Unmarshal(b, &res); err != nil {
		return run{}, fmt.Errorf("the output of %s: %w", strings.Join(args, " "), err)
	}
	if len(res.Results) != 1 {
		return run{}, errors.New("one size per run, please (no --all)")
	}
	x := res.Results[0]
	if res.Test == "lat" && x.Lat != nil {
		return run{figure: x.Lat.Typical, ratio: x.Ratio, unit: "µs typical"}, nil
	}
	return run{figure: x.BWAvgMBs, ratio: x.Ratio, unit: "MB/s"}, nil
}

func (r run) String() string {
	s := fmt.Sprintf("%.1f %s", r.figure, r.unit)
	if r.ratio > 0 {
		s += fmt.Sprintf(", ratio to plain TCP %.2f", r.ratio)
	}
	return s
}

func summary(rs []run) string {
	var f, q []float64
	for _, r := range rs {
		f = append(f, r.figure)
		if r.ratio > 0 {
			q = append(q, r.ratio)
		}
	}
	s := spread(f, "%.1f") + " " + rs[0].unit
	if len(q) == len(rs) {
		s += "; ratio to plain TCP " + spread(q, "%.2f")
	}
	return s
}

// spread gives the median and the range of v.
func spread(v []float64, format string) string {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	m := v[n/2]
	if n%2 == 0 {
		m = (v[n/2-1] + v[n/2]) / 2
	}
	return fmt.Sprintf("median "+format+" (range "+format+" – "+format+", %d runs)", m, v[0], v[n-1], n)
}
