package mpa

// WriteNow implements ddp.LLP: on a plain TCP connection (Linux), the
// segment becomes one FPDU written with a single non-blocking gather
// write, if the socket takes any of it at once. When it takes only part,
// the rest is copied and leaves on a goroutine of its own that holds the
// Writer until it has (the sending goroutine then waits for it, as it
// would for the socket); the caller, RDMAP's receive side, goes back to
// reading at once. It reports false, writing nothing, on other
// connections, before a Responder has received its first FPDU (RFC 5044
// §7.1.2 rule 4), before the Initiator's first-FPDU delay, while another
// write is under way, and while more of the stream has been read than the
// FPDU being delivered: a burst of Requests is being answered, and the
// send goroutine gathers their answers into one write, where one write
// each would cost a system call and a TCP segment per answer. It runs on
// the goroutine that holds the receive token (poll.go), in the delivery
// of an FPDU, which is where ddp.LLP calls it.
func (c *Conn) WriteNow(hdr []byte, payload [][]byte) (bool, error) {
	if c.isClosed() || c.r.Buffered() > 0 {
		return false, nil
	}
	select {
	case <-c.firstRx:
	default:
		return false, nil
	}
	if !c.wmu.TryLock() {
		return false, nil
	}
	if c.tryNow == nil || c.delay > 0 {
		c.wmu.Unlock()
		return false, nil
	}
	ok, err := c.w.WriteNow(hdr, payload, c.tryNow)
	if ok && c.w.Pending() {
		// Counted in wg, which the receive goroutine keeps above zero:
		// it lives while the receive side delivers (this call's caller).
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.w.Flush() // an error stays with the Writer: the next write returns it
			c.wmu.Unlock()
		}()
		return true, nil
	}
	c.wmu.Unlock()
	return ok, err
}
