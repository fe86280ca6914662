package chunk

// HeartbeatAck is a Heartbeat Acknowledgement (HEARTBEAT ACK) chunk (RFC
// 9260 §3.3.6), laid out as Heartbeat with Type = 5:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 5    |  Chunk Flags  |     Heartbeat Ack Length      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/          Heartbeat Information TLV (Variable-Length)          /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "This field MUST contain the Heartbeat Info parameter (as defined in
// Section 3.3.5) of the Heartbeat Request to which this Heartbeat
// Acknowledgement is responding": HeartbeatAck{Info: hb.Info}.
type HeartbeatAck struct {
	Info []byte // the Sender-Specific Heartbeat Info, echoed
}

// Len returns the bytes Append adds, padding included.
func (h HeartbeatAck) Len() int { return heartbeatLen(h.Info) }

// Append appends the chunk and its padding to b.
func (h HeartbeatAck) Append(b []byte) []byte { return appendHeartbeat(b, TypeHeartbeatAck, h.Info) }

// ParseHeartbeatAck parses the HEARTBEAT ACK chunk at the start of b as
// ParseHeartbeat does.
func ParseHeartbeatAck(b []byte) (HeartbeatAck, int, error) {
	info, n, err := parseHeartbeat(b, TypeHeartbeatAck)
	return HeartbeatAck{Info: info}, n, err
}
