package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perf"
	"github.com/iwarpgo/iwarp/rdmap"
)

// perfClient is "iwarp perf --connect": it wires the engine
// (cmd/iwarp/internal/perf) to the command's transports and prints its results.
func perfClient(ctx context.Context, ep endpoint.URL, o *perfOptions, cfg perf.ClientConfig, stdout, stderr io.Writer) error {
	var rec *endpoint.Recorder
	if o.link.PCAP != "" {
		var err error
		if rec, err = endpoint.NewRecorder(o.link.PCAP, ep.Scheme); err != nil {
			return err
		}
	}
	err := perfClientRun(ctx, ep, o, cfg, rec, stdout, stderr)
	if cerr := rec.Close(); err == nil {
		err = cerr
	}
	return err
}

func perfClientRun(ctx context.Context, ep endpoint.URL, o *perfOptions, cfg perf.ClientConfig, rec *endpoint.Recorder, stdout, stderr io.Writer) error {
	prog := newProgress(stdout)
	cfg.Progress = prog.update
	var last atomic.Pointer[endpoint.Conn] // the data connection, to explain how it ended
	cfg.Connect = func(ctx context.Context, qp *rdmap.QueuePair) (*perf.Link, error) {
		c, err := endpoint.Dial(ctx, ep, &o.link, rec, qp, stderr)
		if err != nil {
			return nil, err
		}
		last.Store(c)
		return &perf.Link{Transport: ep.Scheme, Info: c.Info.String(), CRC: c.Info.CRC != nil && *c.Info.CRC, Close: c.Close}, nil
	}
	host, _, _ := net.SplitHostPort(ep.Addr)
	cfg.DialRaw = func(ctx context.Context, port uint16) (*perf.RawLink, error) {
		addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if ep.Scheme == "tcp" {
			return perf.DialRawTCP(ctx, addr)
		}
		// The iWARP association's configuration: the same tuning.
		scfg, _, _, err := o.link.SCTPConfig(ep.Addr, false, nil)
		if err != nil {
			return nil, err
		}
		return perf.DialRawSCTP(ctx, addr, scfg)
	}
	cl, err := perf.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer cl.Close()

	res := perf.Result{Transport: ep.Scheme, URL: ep.String(), Op: cfg.Op.String(), Test: "bw"}
	if cfg.Lat {
		res.Test = "lat"
	}
	if !o.json {
		kind := "BW"
		if cfg.Lat {
			kind = "Latency"
		}
		fmt.Fprintln(stdout, perf.Rule)
		fmt.Fprintf(stdout, "                    %s %s Test (iwarp %s)\n", cfg.Op.Title(), kind, ep)
		fmt.Fprintf(stdout, " %s\n", cl.Link().Info)
		fmt.Fprintln(stdout, perf.Rule)
		perf.WriteHeading(stdout, cfg.Lat, cfg.CompareRaw)
	}
	for _, size := range o.sizes(cfg.Op) {
		prog.begin()
		st, err := cl.Run(ctx, size)
		prog.end()
		if err != nil {
			return last.Load().Explain(err)
		}
		res.Results = append(res.Results, st)
		if !o.json {
			perf.WriteLine(stdout, &st)
		}
	}
	if o.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		stdout.Write(append(b, '\n'))
	} else {
		fmt.Fprintln(stdout, perf.Rule)
	}
	return nil
}
