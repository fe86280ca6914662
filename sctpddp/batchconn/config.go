package batchconn

// Config tunes a Conn. The zero value (or a nil *Config) gives the
// defaults, which suit a DTLS connection of pion/dtls.
type Config struct {
	// ReadBatch is the most messages one receive system call takes:
	// datagrams, or with GRO, super-datagrams of up to 64 KiB each
	// (default 32, or 8 with GRO).
	ReadBatch int

	// MaxDatagram is the longest datagram a receive slot holds without
	// GRO; a longer one is truncated to it, as a plain ReadFrom into a
	// buffer of that length would truncate it. It is also the longest
	// datagram WriteTo holds between Cork and Flush; a longer one is
	// sent at once, after those held. Default 8192, the buffer
	// pion/dtls reads into.
	MaxDatagram int

	// WriteBatch is the most datagrams held between Cork and Flush;
	// WriteTo sends them when it would hold more (default 64).
	WriteBatch int

	// DisableGSO stops Flush from handing the kernel runs of datagrams
	// to segment (UDP_SEGMENT); DisableGRO leaves the socket's UDP_GRO
	// option off, so that the kernel delivers datagrams one by one.
	DisableGSO, DisableGRO bool
}

const (
	defaultReadBatch    = 32
	defaultGROReadBatch = 8
	defaultMaxDatagram  = 8192
	defaultWriteBatch   = 64
)

// withDefaults returns a copy of c with zero fields given their defaults.
func (c *Config) withDefaults() Config {
	var s Config
	if c != nil {
		s = *c
	}
	if s.MaxDatagram <= 0 {
		s.MaxDatagram = defaultMaxDatagram
	}
	if s.WriteBatch <= 0 {
		s.WriteBatch = defaultWriteBatch
	}
	return s
}

// Features says which kernel facilities a Conn uses.
type Features struct {
	// Batch: reads take several datagrams per system call (recvmmsg),
	// and Flush sends what Cork held in one (sendmmsg).
	Batch bool
	// GSO: Flush sends runs of equal-sized datagrams to one address as
	// one message the kernel segments (UDP_SEGMENT). It turns off for
	// good if the kernel refuses such a message.
	GSO bool
	// GRO: the kernel delivers datagrams it coalesced as one, which
	// ReadFrom splits again (UDP_GRO).
	GRO bool
}

// Stats counts a Conn's system calls and the datagrams they moved.
type Stats struct {
	RecvCalls     uint64 // receive system calls that returned datagrams
	RecvMessages  uint64 // messages they returned (a GRO super-datagram is one)
	RecvDatagrams uint64 // datagrams ReadFrom handed out
	SendCalls     uint64 // send system calls that sent messages
	SendMessages  uint64 // messages sent (a GSO run is one)
	SendDatagrams uint64 // datagrams sent
}
