package rdmap

import (
	"context"
	"testing"
)

// Posting and completing allocates nothing once a queue pair is warm:
// send-queue entries are reused, a one-element receive list comes from
// a ring, the outstanding Read and Atomic lists keep their arrays
// (waiting here with one context, as a program's loop would).
func TestPostingAllocatesNothing(t *testing.T) {
	a, b := newPair(t, pairOpts{cfg: QPConfig{SendDepth: 8, RecvDepth: 8}})
	target := b.reg(t, 4096, RemoteWrite|RemoteRead|RemoteAtomic)
	src := a.reg(t, 4096, LocalWrite)
	rbuf := b.reg(t, 4096, LocalWrite)
	ctx := context.Background()
	next := func(cq *CompletionQueue) {
		if c, err := cq.Wait(ctx); err != nil || c.Status != StatusSuccess {
			t.Fatalf("%+v, %v", c, err)
		}
	}
	write := WriteWR{SGL: []SGE{{MR: src, Length: 1024}}, RemoteSTag: target.STag(), RemoteTO: 0}
	read := ReadWR{Local: SGE{MR: src, Length: 1024}, RemoteSTag: target.STag()}
	send := SendWR{SGL: []SGE{{MR: src, Length: 64}}}
	recv := RecvWR{SGL: []SGE{{MR: rbuf, Length: 64}}}
	fetchAdd := AtomicWR{Op: FetchAdd, Add: 1, Local: SGE{MR: src, Length: 8}, RemoteSTag: target.STag(), RemoteTO: 8}
	for name, op := range map[string]func(){
		"RDMA Write": func() { mustPost(t, a.qp.PostWrite(write)); next(a.scq) },
		"RDMA Read":  func() { mustPost(t, a.qp.PostRead(read)); next(a.scq) },
		"Send and its receive": func() {
			mustPost(t, b.qp.PostRecv(recv))
			mustPost(t, a.qp.PostSend(send))
			next(a.scq)
			next(b.rcq)
		},
		"FetchAdd": func() { mustPost(t, a.qp.PostAtomic(fetchAdd)); next(a.scq) },
	} {
		for range 32 {
			op() // warm: the spare entries, the ring, the arrays
		}
		if n := testing.AllocsPerRun(200, op); n != 0 {
			t.Errorf("%s: %.1f allocations per work request", name, n)
		}
	}
}
