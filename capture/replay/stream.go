package replay

// streamState orders one stream's segments as DDP delivers them: a
// message is delivered once every sequence number from the stream's
// first undelivered one up to its last segment's is placed (RFC 5041
// §5.4). Sequence numbers are the FPDUs' order over MPA and the DDP-SSN,
// unwrapped, over SCTP (RFC 5043 §5.1); a DDP Stream Session Control
// message takes a DDP-SSN too.
type streamState struct {
	id      int
	sctp    bool
	n       int64 // MPA: FPDUs seen
	ref     int64 // SCTP: the last DDP-SSN seen, unwrapped
	started bool
	any     bool  // a message was delivered
	next    int64 // the lowest sequence number not yet delivered
	scan    int64 // every number from next up to scan is placed
	placed  map[int64]int
}

// seqOf is the sequence number of a segment: the next FPDU's, or its
// DDP-SSN unwrapped by serial arithmetic (RFC 1982) near the last one.
func (s *streamState) seqOf(ssn *uint16) int64 {
	if !s.sctp || ssn == nil {
		v := s.n
		s.n++
		s.start(v)
		return v
	}
	var v int64
	if !s.started {
		v = int64(*ssn)
	} else {
		v = s.ref + int64(int16(*ssn-uint16(s.ref)))
	}
	s.ref = v
	s.start(v)
	if v < s.next && !s.any {
		// Segments may arrive out of order over SCTP: the stream starts
		// at the lowest number seen before anything is delivered.
		s.next, s.scan = v, v
	}
	return v
}

func (s *streamState) start(v int64) {
	if !s.started {
		s.started, s.next, s.scan = true, v, v
	}
}

// control records a session control message's DDP-SSN and returns its
// place: before any segment it sets where the segments start, after one
// it takes its place in the order.
func (s *streamState) control(ssn uint16, ev int) int64 {
	if !s.started {
		s.ref = int64(ssn)
		s.started, s.next, s.scan = true, int64(ssn)+1, int64(ssn)+1
		return int64(ssn)
	}
	v := s.seqOf(&ssn)
	s.place(v, ev)
	return v
}

// place records sequence number v as placed by event ev; false when it
// was placed or delivered before.
func (s *streamState) place(v int64, ev int) bool {
	if v < s.next {
		return false
	}
	if _, dup := s.placed[v]; dup {
		return false
	}
	s.placed[v] = ev
	return true
}
