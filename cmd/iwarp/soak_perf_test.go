//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perf"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// soakPerfHello: 8 workers from 127.0.0.2 connect to "iwarp perf
// --listen tcp://" one after the other and send hellos asking for 8 GiB
// (1024 receive buffers of 8 MiB) and 2 GiB (256 of 8 MiB, with the raw
// comparison); meanwhile real "iwarp perf" runs (write, read, send) go on
// from 127.0.0.1.
func soakPerfHello(t *testing.T, hold time.Duration) *soakRow {
	p := startProc(t, "perf", "perf", "--listen", "tcp://127.0.0.1:0")
	var url string
	if !waitfor.Until(15*time.Second, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.lines {
			if u, ok := strings.CutPrefix(l, "listening on "); ok {
				url = u
			}
		}
		return url != ""
	}) {
		t.Fatalf("perf printed no address:\n%s", p.stderrTail())
	}
	time.Sleep(500 * time.Millisecond)
	row := &soakRow{attack: "perf hellos asking 8 GiB / 2 GiB (tcp://)", limit: 1 << 30, before: p.rss(), good: &peerStats{}}
	addr := strings.TrimPrefix(url, "tcp://")
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()

	// Real perf runs, one after the other.
	goodDone := make(chan struct{})
	go func() {
		defer close(goodDone)
		ops := []string{"write", "read", "send"}
		for i := 0; ctx.Err() == nil; i++ {
			start := time.Now()
			err := perfRun(url, ops[i%len(ops)])
			row.good.add(time.Since(start), err)
		}
	}()

	var hellos, granted atomic.Int64
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				hello := perf.Ctl{Type: perf.CtlHello, Op: perf.OpSend, Size: 8 << 20, N: 1024, BufLen: 8 << 20}
				if (w+i)%2 == 1 {
					hello = perf.Ctl{Type: perf.CtlHello, Op: perf.OpSend, Size: 8 << 20, N: 256, BufLen: 8 << 20, Flags: perf.FlagRaw}
				}
				why, err := perfHello(addr, hello)
				mu.Lock()
				if err != nil {
					codes[shortErr(err)]++
				} else {
					codes[why]++
				}
				mu.Unlock()
				hellos.Add(1)
				if why == "granted" {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	<-goodDone
	var reasons []string
	for k, v := range codes {
		reasons = append(reasons, fmt.Sprintf("%d %s", v, k))
	}
	t.Logf("perf hellos: %d sent; answers: %s", hellos.Load(), strings.Join(reasons, "; "))
	if granted.Load() > 0 {
		t.Errorf("%d hellos asking for gigabytes were granted", granted.Load())
	}
	row.scale = fmt.Sprintf("%d hellos, 8 at a time from one address: %d refused for 8 GiB, %d for 2 GiB, %d per-peer",
		hellos.Load(), codes[fmt.Sprintf("refused: code %d", perf.RefusedBadHello)], codes[fmt.Sprintf("refused: code %d", perf.RefusedConnBudget)], codes[fmt.Sprintf("refused: code %d", perf.RefusedPeerConns)])
	row.good.check(t, row.attack)
	p.row(row)
	p.stop()
	return row
}

// perfRun runs "iwarp perf --connect url --op op --json" and checks its
// result.
func perfRun(url, op string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, iwarpBin, "perf", "--connect", url, "--op", op, "--size", "65536", "--iters", "2000", "--json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("perf --op %s: %v: %s", op, err, strings.TrimSpace(stderr.String()))
	}
	var r struct {
		Results []struct {
			Iterations int     `json:"iterations"`
			BWAvg      float64 `json:"bw_avg_mbs"`
		} `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || len(r.Results) != 1 || r.Results[0].Iterations != 2000 || r.Results[0].BWAvg <= 0 {
		return fmt.Errorf("perf --op %s: %q", op, stdout.String())
	}
	return nil
}

// perfHello connects to a perf server from 127.0.0.2, sends hello and
// says what came back: "refused: code N", "granted", or "rejected" (the
// MPA Reply's R bit).
func perfHello(addr string, hello perf.Ctl) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(16)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq, IRD: 8, ORD: 8})
	if err != nil {
		return "", err
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		qp.Close(cctx)
		ccancel()
	}()
	ctl, _ := pd.RegisterMemory(make([]byte, perf.CtlLen), 0, 0)
	bufs := make([]*rdmap.MemoryRegion, 4)
	for i := range bufs {
		bufs[i], _ = pd.RegisterMemory(make([]byte, perf.CtlLen), 0, rdmap.LocalWrite)
		qp.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: bufs[i], Length: perf.CtlLen}}})
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	if _, err := mpa.Client(ctx, nc, qp, nil); err != nil {
		nc.Close()
		var re *ddp.RejectedError
		if errors.As(err, &re) {
			return "rejected (MPA R=1)", nil
		}
		return "", err
	}
	hello.Append(ctl.Bytes()[:0])
	if err := qp.PostSend(rdmap.SendWR{ID: 9, SGL: []rdmap.SGE{{MR: ctl, Length: perf.CtlLen}}}); err != nil {
		return "", err
	}
	for {
		cp, err := cq.Wait(ctx)
		if err != nil {
			return "", fmt.Errorf("no answer: %v", err)
		}
		if cp.Status != rdmap.StatusSuccess {
			return "", fmt.Errorf("%v: %v", cp.Status, cp.Err)
		}
		if cp.Op != rdmap.WorkRecv {
			continue
		}
		m, _, err := perf.ParseCtl(bufs[cp.WRID].Bytes()[:cp.ByteLen])
		if err != nil {
			return "", err
		}
		if m.Type != perf.CtlRefuse {
			return "granted", nil
		}
		// The server closes the connection after its refusal.
		select {
		case <-qp.Terminated():
		case <-ctx.Done():
			return "", errors.New("the refused connection stays open")
		}
		return fmt.Sprintf("refused: code %d", m.Code), nil
	}
}
