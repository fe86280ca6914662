package ddp

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/term"
)

// syncULP is a fakeULP safe for the pipe's delivery goroutine, which
// signals every delivery.
type syncULP struct {
	mu sync.Mutex
	fakeULP
	got chan Delivery
}

func (u *syncULP) TaggedBuffer(h *Header) (TaggedBuffer, *term.Error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.fakeULP.TaggedBuffer(h)
}
func (u *syncULP) Deliver(d *Delivery) { u.got <- *d }
func (u *syncULP) Fault(f *Fault)      { u.got <- Delivery{Len: ^uint32(0)} }

// Random messages, segmented with a random MULPDU and carried through the
// reordering pipe, arrive with identical bytes and are delivered in the
// order they were sent.
func TestPropertyReorderedDelivery(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		const msgs = 150
		mulpdu := UntaggedHeaderLen + 1 + rng.IntN(3000)
		a, b := ddptest.New(ddptest.Options{MULPDU: mulpdu, Reorder: 2 + rng.IntN(30), Seed: seed, Depth: 64})
		region := newGuarded(msgs * 4096)
		u := &syncULP{fakeULP: fakeULP{regions: map[uint32]TaggedBuffer{0x77: {Mem: region.mem, Base: 1 << 40}}}, got: make(chan Delivery, 1024)}
		s, err := NewStream(Config{Queues: 3, QueueDepth: msgs, Window: 64, ULP: u})
		if err != nil {
			t.Fatal(err)
		}
		type sent struct{ buf *guarded }
		var want []sent
		for i := 0; i < msgs; i++ {
			buf := newGuarded(4000)
			s.Post(0, Buffer{SGL: [][]byte{buf.mem[:1000], buf.mem[1000:1001], buf.mem[1001:]}, ID: uint64(i)})
			want = append(want, sent{buf: buf})
		}
		b.Attach(s)
		tx := NewSender(a, 3, 0, nil)
		// Decide every message before sending, so the checks below read
		// nothing the sending goroutine writes.
		type msg struct {
			tagged bool
			data   []byte
			to     uint64
			cut    int
		}
		var plan, tagged, untaggedMsgs []msg
		for i := range want {
			n := rng.IntN(4001)
			m := msg{data: make([]byte, n), cut: rng.IntN(n + 1)}
			for j := range m.data {
				m.data[j] = byte(rng.Uint32())
			}
			if rng.IntN(3) == 0 && n > 0 {
				// Each write has its own 4 KiB: overlapping writes may land
				// in any order (RFC 5040 §5.5 rule 3).
				m.tagged, m.to = true, uint64(i*4096+rng.IntN(4096-n+1))
				tagged = append(tagged, m)
			} else {
				untaggedMsgs = append(untaggedMsgs, m)
			}
			plan = append(plan, m)
		}
		go func() {
			for _, m := range plan {
				var err error
				if m.tagged {
					// Split the source into a two-entry scatter list.
					err = tx.SendTagged(0x40, 0x77, 1<<40+m.to, [][]byte{m.data[:m.cut], m.data[m.cut:]})
				} else {
					_, err = tx.SendUntagged([5]byte{0x43}, 0, [][]byte{m.data})
				}
				if err != nil {
					t.Error(err)
				}
			}
		}()
		var gotOrder []int
		ntag := 0
		for done := 0; done < msgs; done++ {
			select {
			case d := <-u.got:
				if d.Len == ^uint32(0) {
					t.Fatalf("seed %d: stream fault", seed)
				}
				if d.Header.Tagged {
					ntag++
					continue
				}
				k := len(gotOrder)
				gotOrder = append(gotOrder, int(d.Buffer.ID))
				if int(d.Len) != len(untaggedMsgs[k].data) {
					t.Fatalf("seed %d: message %d delivered with length %d, sent %d", seed, k, d.Len, len(untaggedMsgs[k].data))
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("seed %d: %d of %d delivered", seed, done, msgs)
			}
		}
		a.Close()
		// Untagged messages consumed buffers in posting order, each whole.
		for k, id := range gotOrder {
			if id != k {
				t.Fatalf("seed %d: delivery %d went to buffer %d", seed, k, id)
			}
			w := untaggedMsgs[k]
			if !bytes.Equal(want[id].buf.mem[:len(w.data)], w.data) {
				t.Fatalf("seed %d: message %d's bytes differ", seed, k)
			}
			want[id].buf.intact(t)
		}
		if ntag != len(tagged) {
			t.Fatalf("seed %d: %d tagged delivered, %d sent", seed, ntag, len(tagged))
		}
		// Replay the tagged writes on a model.
		model := make([]byte, len(region.mem))
		for _, w := range tagged {
			copy(model[w.to:], w.data)
		}
		if !bytes.Equal(model, region.mem) {
			t.Fatalf("seed %d: tagged memory differs from the model", seed)
		}
		region.intact(t)
	}
}

// FuzzStream feeds a stream arbitrary segments at arbitrary sequence
// numbers: it must never panic, never write outside registered memory or
// posted buffers, and never deliver after a fault.
func FuzzStream(f *testing.F) {
	f.Add(seg(tagged(0x100, 0x10000, true), pattern(20)), uint8(0), seg(untagged(0, 1, 0, true), pattern(20)), uint8(1))
	f.Add(seg(untagged(0, 1, 990, false), pattern(20)), uint8(1), seg(untagged(0, 1, 0, true), pattern(20)), uint8(0))
	f.Add([]byte{0x81}, uint8(0), []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, s1 []byte, q1 uint8, s2 []byte, q2 uint8) {
		ts := newTestStream(t, 4)
		ts.Receive(uint32(q1%8), s1)
		ts.Receive(uint32(q2%8), s2)
		ts.Receive(uint32(q1%8), s2)
		ts.region.intact(t)
		for _, b := range ts.bufs {
			b.intact(t)
		}
		if len(ts.ulp.faults) > 1 {
			t.Fatal("more than one fault")
		}
	})
}
