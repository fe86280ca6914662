package replay

import (
	"encoding/json"
	"strings"
)

// summary is the page's first view of a model.
type summary struct {
	*Model
	Events  int    `json:"events"`
	Warning string `json:"warning,omitempty"`
}

// SummaryJSON is the model without its events: connections, streams,
// buffers and counts, with a warning to show.
func (m *Model) SummaryJSON(warning string) []byte {
	b, err := json.Marshal(summary{m, len(m.Events), warning})
	if err != nil {
		return errorJSON(err)
	}
	return b
}

// pageEvent is an event with the octets of its payload that land in the
// part of its buffer the model keeps.
type pageEvent struct {
	*Event
	Data []byte `json:"data,omitempty"`
}

// EventsJSON returns events [from, from+n) (clipped to those there are)
// as a JSON array.
func (m *Model) EventsJSON(from, n int) []byte {
	from = max(0, min(from, len(m.Events)))
	to := max(from, min(len(m.Events), from+max(n, 0)))
	out := make([]pageEvent, 0, to-from)
	for i := from; i < to; i++ {
		e := &m.Events[i]
		out = append(out, pageEvent{e, m.Shown(e)})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return errorJSON(err)
	}
	return b
}

// Shown returns the octets of a segment's payload that land in the part
// of its buffer the model keeps (the first Buffer.Shown octets).
func (m *Model) Shown(e *Event) []byte {
	if e.Buffer == 0 {
		return nil
	}
	sh := uint64(m.Buffers[e.Buffer-1].Shown)
	if e.Offset >= sh {
		return nil
	}
	return e.payload[:min(uint64(len(e.payload)), sh-e.Offset)]
}

// Cell states in a Snapshot.
const (
	CellEmpty     = '.'
	CellPlaced    = 'p'
	CellDelivered = 'd'
)

// BufferState is a buffer's kept octets and the state of each after some
// events: CellEmpty, CellPlaced or CellDelivered.
type BufferState struct {
	ID    int    `json:"id"`
	Data  []byte `json:"data"`
	Cells string `json:"cells"`
}

// Snapshot returns the state of the given buffers after events [0, n):
// what the picture shows when playback jumps there.
func (m *Model) Snapshot(n int, ids []int) []BufferState {
	n = max(0, min(n, len(m.Events)))
	idx := map[int]int{}
	out := make([]BufferState, 0, len(ids))
	cells := make([][]byte, 0, len(ids))
	for _, id := range ids {
		if id < 1 || id > len(m.Buffers) {
			continue
		}
		if _, dup := idx[id]; dup {
			continue
		}
		sh := m.Buffers[id-1].Shown
		idx[id] = len(out)
		out = append(out, BufferState{ID: id, Data: make([]byte, sh)})
		cells = append(cells, []byte(strings.Repeat(string(rune(CellEmpty)), sh)))
	}
	mark := func(e *Event, c byte) {
		k, ok := idx[e.Buffer]
		if !ok {
			return
		}
		d := m.Shown(e)
		if len(d) == 0 {
			return
		}
		if c == CellPlaced {
			copy(out[k].Data[e.Offset:], d)
		}
		for i := range d {
			cells[k][e.Offset+uint64(i)] = c
		}
	}
	for i := 0; i < n; i++ {
		e := &m.Events[i]
		if e.Buffer != 0 {
			mark(e, CellPlaced)
		}
		for _, j := range e.Delivered {
			mark(&m.Events[j], CellDelivered)
		}
	}
	for k := range out {
		out[k].Cells = string(cells[k])
	}
	return out
}

// SnapshotJSON is Snapshot as JSON.
func (m *Model) SnapshotJSON(n int, ids []int) []byte {
	b, err := json.Marshal(m.Snapshot(n, ids))
	if err != nil {
		return errorJSON(err)
	}
	return b
}

func errorJSON(err error) []byte {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return b
}
