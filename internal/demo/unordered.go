package demo

import (
	"context"
	"reflect"
	"time"
	"unsafe"

	"github.com/pion/sctp"
	"github.com/pion/webrtc/v4"
)

// sendUnordered makes a negotiated pion data channel send unordered, as
// it was created to, once it is open; it reports whether it could.
//
// pion/datachannel v1.6.2 applies a channel's reliability parameters
// only when a DCEP exchange completes (commitReliabilityParams, on
// DATA_CHANNEL_ACK or when accepting an OPEN); a negotiated channel has
// no such exchange, so its SCTP stream keeps the default, ordered, and
// every message pion sends on it goes without the U flag, against RFC
// 5043 §10 ("MUST use the Unordered option on all Data Chunks"). The
// browser's own channels are not affected. Until sctpddp or pion fixes
// it, the demo sets the stream's parameters itself, reaching the SCTP
// stream through the two unexported fields that hold it.
func sendUnordered(ctx context.Context, dc *webrtc.DataChannel) bool {
	for dc.ReadyState() != webrtc.DataChannelStateOpen {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
	st := sctpStream(dc)
	if st == nil {
		return false
	}
	st.SetReliabilityParams(true, sctp.ReliabilityTypeReliable, 0)
	return true
}

// sctpStream returns dc.dataChannel.stream, or nil when pion's structs
// are not what this version expects.
func sctpStream(dc *webrtc.DataChannel) (st *sctp.Stream) {
	defer func() {
		if recover() != nil {
			st = nil
		}
	}()
	field := func(v reflect.Value, name string) reflect.Value {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
			return reflect.Value{}
		}
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	inner := field(reflect.ValueOf(dc).Elem(), "dataChannel")
	if !inner.IsValid() {
		return nil
	}
	s := field(inner.Elem(), "stream")
	if !s.IsValid() {
		return nil
	}
	st, _ = s.Interface().(*sctp.Stream)
	return st
}
