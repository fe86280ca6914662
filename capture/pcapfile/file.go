package pcapfile

import (
	"os"
	"sync"
	"time"
)

// File is a pcap file being written to disk as packets come, so that it
// can be read while it grows and a process killed while writing it leaves
// it whole up to a recent packet: packets reach the file in whole records,
// FlushDelay after the first one not yet written at the latest, at once
// when FlushSize octets wait.
// Its Writer is not safe for concurrent use; flushing on the timer is.
type File struct {
	*Writer
	s *fileSink
}

// How long a packet waits in a File's buffer at most, and how many octets
// of packets make it write them at once.
const (
	FlushDelay = 50 * time.Millisecond
	FlushSize  = 256 << 10
)

// CreateFile creates (or truncates) the pcap file path for packets of
// link type lt and writes its header.
func CreateFile(path string, lt LinkType) (*File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	s := &fileSink{f: f}
	w, err := NewWriter(s, lt)
	if err == nil {
		err = s.Flush()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{Writer: w, s: s}, nil
}

// Flush writes the packets waiting in the buffer.
func (f *File) Flush() error { return f.s.Flush() }

// Close writes the packets waiting and closes the file.
func (f *File) Close() error { return f.s.Close() }

// fileSink buffers whole records and writes them to the file on a timer.
type fileSink struct {
	mu     sync.Mutex
	f      *os.File
	buf    []byte
	timer  *time.Timer
	armed  bool
	closed bool
	err    error
}

// Write takes the file header.
func (s *fileSink) Write(p []byte) (int, error) {
	if err := s.writeRecord(p, nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeRecord buffers one packet's record, its header and data.
func (s *fileSink) writeRecord(hdr, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return os.ErrClosed
	}
	if s.err != nil {
		return s.err
	}
	s.buf = append(append(s.buf, hdr...), data...)
	if len(s.buf) >= FlushSize {
		return s.flushLocked()
	}
	if !s.armed {
		s.armed = true
		if s.timer == nil {
			s.timer = time.AfterFunc(FlushDelay, s.timed)
		} else {
			s.timer.Reset(FlushDelay)
		}
	}
	return nil
}

func (s *fileSink) timed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	if !s.closed {
		s.flushLocked()
	}
}

func (s *fileSink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return os.ErrClosed
	}
	return s.flushLocked()
}

// flushLocked writes the buffer in one call: the records in it are whole.
func (s *fileSink) flushLocked() error {
	if s.err != nil || len(s.buf) == 0 {
		return s.err
	}
	_, s.err = s.f.Write(s.buf)
	s.buf = s.buf[:0]
	if cap(s.buf) > 4*FlushSize {
		s.buf = nil // a burst of large packets: do not keep its memory
	}
	return s.err
}

func (s *fileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return os.ErrClosed
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	err := s.flushLocked()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
