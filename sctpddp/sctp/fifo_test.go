package sctp

import "testing"

func TestFIFO(t *testing.T) {
	var q fifo[int]
	next, want := 0, 0
	for round := range 50 {
		for range round % 7 {
			q.push(next)
			next++
		}
		for range round % 5 {
			if q.len() == 0 {
				break
			}
			if q.peek() != want {
				t.Fatalf("peek %d, want %d", q.peek(), want)
			}
			if v := q.pop(); v != want {
				t.Fatalf("pop %d, want %d", v, want)
			}
			want++
		}
		if q.len() != next-want || len(q.all()) != q.len() {
			t.Fatalf("len %d, want %d", q.len(), next-want)
		}
	}
	// Filling and draining again reuses the array.
	for q.len() > 0 {
		q.pop()
	}
	if n := testing.AllocsPerRun(100, func() {
		for i := range 8 {
			q.push(i)
		}
		for q.len() > 0 {
			q.pop()
		}
	}); n != 0 {
		t.Fatalf("%v allocations per fill and drain", n)
	}
}
