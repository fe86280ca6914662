package rdmap

import "github.com/iwarpgo/iwarp/ddp"

var _ ddp.Endpoint = (*QueuePair)(nil)
