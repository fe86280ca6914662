package rping

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// FuzzParseInfo: ParseInfo takes exactly InfoLen octets and refuses any
// other length with rping's words and the length; what it takes it reads
// as struct rping_rdma_info in network byte order (a reference decode of
// the three fields), and Append gives back the same octets.
func FuzzParseInfo(f *testing.F) {
	f.Add(Info{Buf: rdmaTO, RKey: 0x11223344, Size: DefaultSize}.Append(nil))
	f.Add(Info{Buf: 0xffffffffffffffff, RKey: 0xffffffff, Size: MaxSize}.Append(nil))
	f.Add(Info{Size: 1 << 31}.Append(nil))
	f.Add(Info{Size: 0xffffffff}.Append(nil))
	f.Add([]byte{})
	f.Add(make([]byte, InfoLen-1))
	f.Add(make([]byte, InfoLen+1))
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		i, err := ParseInfo(b)
		if len(b) != InfoLen {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bogus data, size %d ", len(b))) || i != (Info{}) {
				t.Fatalf("%d octets: %+v, %v", len(b), i, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("% x: %v", b, err)
		}
		var buf uint64
		for _, c := range b[:8] {
			buf = buf<<8 | uint64(c)
		}
		want := Info{Buf: buf, RKey: uint32(b[8])<<24 | uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11]),
			Size: uint32(b[12])<<24 | uint32(b[13])<<16 | uint32(b[14])<<8 | uint32(b[15])}
		if i != want {
			t.Fatalf("% x: %+v, want %+v", b, i, want)
		}
		enc := i.Append([]byte("prefix"))
		if !bytes.Equal(enc[6:], b) || string(enc[:6]) != "prefix" {
			t.Fatalf("Append(ParseInfo(% x)) = % x", b, enc)
		}
		if j, err := ParseInfo(enc[6:]); err != nil || j != i {
			t.Fatalf("round trip: %+v, %v", j, err)
		}
	})
}

// TestRpingServerRefusesHugeSize: a client that advertises a source of
// 2^31 octets or more, which an int of 32 bits holds as negative, is
// refused like any client larger than the server's -S.
func TestRpingServerRefusesHugeSize(t *testing.T) {
	for _, size := range []uint32{1 << 31, 0xffffffff} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			cep, err := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
			if err != nil {
				t.Fatal(err)
			}
			sep, err := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewServer(sep, Config{Size: DefaultSize})
			if err != nil {
				t.Fatal(err)
			}
			if err := mpaConnect(&mpa.Config{ClientServer: true}, nil)(t, ctx, cep.QP, sep.QP); err != nil {
				t.Fatal(err)
			}
			defer cep.QP.Close(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			info := binary.BigEndian.AppendUint64(nil, startTO)
			info = binary.BigEndian.AppendUint32(info, 0x1234)
			info = binary.BigEndian.AppendUint32(info, size)
			mr, err := cep.PD.RegisterMemory(info, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := cep.QP.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: mr, Length: InfoLen}}, Inline: true}); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if want := fmt.Sprintf("%d octets, larger than this server's %d", size, DefaultSize); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("server: %v, want %q", err, want)
			}
		})
	}
}
