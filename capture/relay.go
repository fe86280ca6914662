package capture

import (
	"context"
	"net"
	"sync"
)

// Relay accepts TCP connections on ln and joins each to a new connection
// to target, so that what crosses can be recorded where the library
// cannot be asked to: between two peers of other implementations. For
// each joined pair, accepted is told the client's connection and the relay's own to
// target, and returns where the octets go (fromClient is true for what
// the client sent; it is called on one goroutine per direction, in
// order) and what to call once both directions have ended (may be nil).
//
// Relay returns when ln is closed, after the joined connections have
// ended. When ctx is done, it closes the connections still open. A
// connection is closed only once both directions have ended (or ctx is
// done): closing earlier, with octets unread, would reset it and lose
// what the other end had not read yet.
func Relay(ctx context.Context, ln net.Listener, target string, accepted func(client, inner net.Conn) (trace func(fromClient bool, b []byte), done func())) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		trace, done := accepted(c, d)
		var half sync.WaitGroup
		pipe := func(dst, src net.Conn, fromClient bool) {
			defer half.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					trace(fromClient, buf[:n])
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
		}
		half.Add(2)
		go pipe(d, c, true)
		go pipe(c, d, false)
		stop := context.AfterFunc(ctx, func() { c.Close(); d.Close() })
		wg.Go(func() {
			half.Wait()
			stop()
			c.Close()
			d.Close()
			if done != nil {
				done()
			}
		})
	}
}
