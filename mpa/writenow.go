package mpa

// WriteNow implements ddp.NowWriter: on a plain TCP connection (Linux),
// the segment becomes one FPDU written with a single non-blocking gather
// write, if the socket takes any of it at once; what it does not take is
// copied and left to writeLoop, and the caller, RDMAP's receive side,
// goes back to reading at once. It reports false, writing nothing, on
// other connections, before a Responder has received its first FPDU (RFC
// 5044 §7.1.2 rule 4), before the Initiator's first-FPDU delay, while
// another write is under way (wmu is taken: waiting for it could mean
// waiting for room), and while more of the stream has been read than the
// FPDU being delivered: a burst of Requests is being answered, and the
// send goroutine gathers their answers into one write, where one write
// each would cost a system call and a TCP segment per answer. It runs on
// the goroutine that holds the receive token (poll.go).
func (c *Conn) WriteNow(hdr []byte, payload [][]byte) (bool, error) {
	if c.tryNow == nil || c.isClosed() || c.r.Buffered() > 0 {
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
	defer c.wmu.Unlock()
	if c.delay > 0 {
		return false, nil
	}
	ok, err := c.w.WriteNow(hdr, payload, c.tryNow)
	if ok && c.w.Pending() {
		select {
		case c.left <- struct{}{}:
		default:
		}
	}
	return ok, err
}

// writeLoop writes what WriteNow's write left of an FPDU, woken by
// c.left, so that the receive side never waits for room. It runs while
// the connection is open.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.left:
		case <-c.closed:
			return
		}
		c.wmu.Lock()
		c.w.Flush() // an error stays with the Writer: the next write returns it
		c.wmu.Unlock()
	}
}
