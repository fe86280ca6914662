package rdmap

import (
	"bytes"
	"errors"
	"testing"
)

func TestRemoteBuffer(t *testing.T) {
	rb := RemoteBuffer{STag: 0x01020304, TO: 0x1112131415161718, Len: 0x21222324}
	golden := []byte{1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22, 0x23, 0x24}
	if b := rb.Append(nil); !bytes.Equal(b, golden) {
		t.Fatalf("wire form % x", b)
	}
	got, n, err := ParseRemoteBuffer(append(golden, 9))
	if err != nil || n != RemoteBufferLen || got != rb {
		t.Fatalf("parsed %v, %d, %v", got, n, err)
	}
	for i := range golden {
		if _, _, err := ParseRemoteBuffer(golden[:i]); err != ErrShortRemoteBuffer {
			t.Fatalf("%d octets: %v", i, err)
		}
	}
	dev := NewDevice(DeviceConfig{})
	mr, err := dev.NewProtectionDomain().RegisterMemory(make([]byte, 100), 0x5000, RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	r := mr.Remote()
	if r.STag != mr.STag() || r.TO != 0x5000 || r.Len != 100 {
		t.Fatalf("Remote %v", r)
	}
	if wr, err := r.Write(7, mr, 60, 40); err != nil || wr.RemoteTO != 0x5000+60 || wr.RemoteSTag != mr.STag() {
		t.Fatalf("Write %+v, %v", wr, err)
	}
	if _, err := r.Write(7, mr, 61, 40); !errors.Is(err, ErrRemoteBounds) {
		t.Fatalf("a Write past the buffer's end: %v", err)
	}
	if _, err := r.Read(7, mr, 101, 0); !errors.Is(err, ErrRemoteBounds) {
		t.Fatalf("a Read past the buffer's end: %v", err)
	}
}

func FuzzParseRemoteBuffer(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := ParseRemoteBuffer(b)
		if err != nil {
			return
		}
		if n != 16 || !bytes.Equal(r.Append(nil), b[:16]) {
			t.Fatal("round trip")
		}
	})
}
