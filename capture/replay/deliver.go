package replay

// deliver delivers every message of e's stream that e's placement
// completes, and lists their segments in e.Delivered.
func (b *builder) deliver(e *Event) {
	if e.Stream == 0 {
		return
	}
	m := b.m
	st := b.states[e.Stream-1]
	for {
		j, ok := st.placed[st.scan]
		if !ok {
			return
		}
		st.scan++
		ev := &m.Events[j]
		if ev.Kind != EventSegment || ev.Rec.DDP == nil || !ev.Rec.DDP.Last {
			continue
		}
		first := -1
		for s := st.next; s < st.scan; s++ {
			k := st.placed[s]
			delete(st.placed, s)
			if m.Events[k].Kind != EventSegment {
				continue
			}
			if first < 0 {
				first = k
			}
			m.Events[k].Message = first
			e.Delivered = append(e.Delivered, k)
		}
		st.next = st.scan
		st.any = true
		m.Streams[st.id-1].Messages++
		m.Delivered++
	}
}
