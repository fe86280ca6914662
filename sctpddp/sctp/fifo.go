package sctp

// fifo is a first-in first-out queue that keeps its backing array: a
// queue that empties and fills again, message after message, allocates
// nothing once it has grown to its largest length.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v T) {
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Full at the back with room at the front: move down.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, v)
}

// peek returns the oldest item; the queue is not empty.
func (q *fifo[T]) peek() T { return q.items[q.head] }

// pop removes and returns the oldest item; the queue is not empty.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}

// all returns the items, oldest first.
func (q *fifo[T]) all() []T { return q.items[q.head:] }

// reset empties the queue and lets go of its array.
func (q *fifo[T]) reset() { q.items, q.head = nil, 0 }
