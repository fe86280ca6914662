package chunk

import "testing"

// The examples of RFC 5061 §4.2.1, §4.2.2 and §4.2.4: requests about the
// IPv4 address 192.0.2.1.
func TestAddressRequests(t *testing.T) {
	addr := IPv4Address{Addr: [4]byte{192, 0, 2, 1}}.Append(nil)
	for _, c := range []struct {
		golden string
		want   AddressRequest
	}{
		{"c0010010 01023474 00050008 c0000201", AddressRequest{Type: ParamAddIPAddress, CorrelationID: 0x01023474, Address: addr}},
		{"c0020010 01023476 00050008 c0000201", AddressRequest{Type: ParamDeleteIPAddress, CorrelationID: 0x01023476, Address: addr}},
		{"c0040010 01023479 00050008 c0000201", AddressRequest{Type: ParamSetPrimaryAddress, CorrelationID: 0x01023479, Address: addr}},
	} {
		checkParamCodec(t, hexBytes(t, c.golden), c.want, ParseAddressRequest, 16)
	}
	for name, b := range map[string]string{
		"wrapped Host Name":         "c0010010 00000001 000b0008 61626300",
		"wrapped address too short": "c0010010 00000001 00050004 00000000",
		"bytes after the address":   "c0010014 00000001 00050008 c0000201 00000000",
	} {
		_, _, err := ParseAddressRequest(hexBytes(t, b))
		wantErr(t, name, err, ErrLength)
	}
}

func TestASCONF(t *testing.T) {
	golden := hexBytes(t, `
		c1 00 00 20 # Type 0xC1, Length 32
		00 00 00 01 # Sequence Number 1
		00 05 00 08 c0 00 02 02 # Address Parameter: 192.0.2.2, the sender's
		c0 01 00 10 01 02 34 74 00 05 00 08 c0 00 02 01 # Add IP Address 192.0.2.1
	`)
	checkChunk(t, golden, ASCONF{SequenceNumber: 1, Params: golden[8:]}, ParseASCONF)
	_, _, err := ParseASCONF(hexBytes(t, "c1000018 00000001 c0010010 01023474 00050008 c0000201"))
	wantErr(t, "ASCONF without Address Parameter", err, ErrParamCount)
}

func TestASCONFAck(t *testing.T) {
	// RFC 5061 §4.3.1's example: "a failed delete in an Error Cause TLV
	// would look as follows in the response ASCONF-ACK message".
	golden := hexBytes(t, `
		80 00 00 24 # Type 0x80, Length 36
		00 00 00 01 # Sequence Number 1
		c0 03 00 1c # Error Cause Indication, Length 28
		01 02 34 76 # C-ID
		00 a0 00 14 # Cause 0x00A0 (Request to Delete Last Remaining IP Address), Length 20
		c0 02 00 10 01 02 34 76 00 05 00 08 c0 00 02 01 # the Delete IP Address TLV
	`)
	checkChunk(t, golden, ASCONFAck{SequenceNumber: 1, Params: golden[8:]}, ParseASCONFAck)
	checkParamCodec(t, golden[8:], ErrorCauseIndication{CorrelationID: 0x01023476, Causes: golden[16:]}, ParseErrorCauseIndication, 28)
	c, _, err := ParseRawCause(golden[16:])
	if err != nil || c.Code != CauseDeleteLastRemainingIPAddress {
		t.Errorf("cause: %v %v", c, err)
	}
	// "returning only the Chunk Type, Chunk Flags, Chunk Length (set to
	// 8), and the Sequence Number"
	checkChunk(t, hexBytes(t, "80000008 00000002"), ASCONFAck{SequenceNumber: 2}, ParseASCONFAck)
	checkParamCodec(t, hexBytes(t, "c0050008 01023474"), SuccessIndication{CorrelationID: 0x01023474}, ParseSuccessIndication, 8)
}
