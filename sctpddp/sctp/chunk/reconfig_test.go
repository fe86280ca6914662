package chunk

import "testing"

func TestReconfig(t *testing.T) {
	golden := hexBytes(t, `
		82 00 00 1a # Type 130, Length 26
		00 0d 00 16 # Outgoing SSN Reset Request, Length 22 (16 + 2 * 3)
		00 00 00 05 # Re-configuration Request Sequence Number 5
		00 00 00 04 # Re-configuration Response Sequence Number 4
		00 00 00 63 # Sender's Last Assigned TSN 99
		00 01 00 02 00 03 # Stream Numbers 1, 2, 3
		00 00       # chunk padding
	`)
	req := OutgoingSSNResetRequest{RequestSeq: 5, ResponseSeq: 4, SenderLastTSN: 99,
		Streams: StreamList(nil).AppendStream(1).AppendStream(2).AppendStream(3)}
	checkChunk(t, golden, Reconfig{Params: golden[4:26]}, ParseReconfig)
	checkParamCodec(t, append(golden[4:26:26], 0, 0), req, ParseOutgoingSSNResetRequest, 22)

	two := Reconfig{Params: ReconfigResponse{ResponseSeq: 7, Result: ResultSuccessPerformed}.Append(
		OutgoingSSNResetRequest{RequestSeq: 8, ResponseSeq: 7, SenderLastTSN: 1}.Append(nil))}
	if _, _, err := ParseReconfig(two.Append(nil)); err != nil {
		t.Errorf("two parameters: %v", err)
	}
	three := Reconfig{Params: SSNTSNResetRequest{RequestSeq: 1}.Append(two.Params)}
	_, _, err := ParseReconfig(three.Append(nil))
	wantErr(t, "three parameters", err, ErrParamCount)
	_, _, err = ParseReconfig(hexBytes(t, "82000004"))
	wantErr(t, "no parameter", err, ErrLength)
}

func TestReconfigParams(t *testing.T) {
	checkParamCodec(t, hexBytes(t, `
		00 0e 00 0a # Incoming SSN Reset Request, Length 10 (8 + 2 * 1)
		00 00 00 09 # Re-configuration Request Sequence Number 9
		00 04 00 00 # Stream Number 4, padding
	`), IncomingSSNResetRequest{RequestSeq: 9, Streams: StreamList{0, 4}}, ParseIncomingSSNResetRequest, 10)
	checkParamCodec(t, hexBytes(t, "000e0008 00000009"), IncomingSSNResetRequest{RequestSeq: 9}, ParseIncomingSSNResetRequest, 8)
	checkParamCodec(t, hexBytes(t, "000f0008 0000000a"), SSNTSNResetRequest{RequestSeq: 10}, ParseSSNTSNResetRequest, 8)
	checkParamCodec(t, hexBytes(t, `
		00 10 00 0c # Re-configuration Response, Length 12
		00 00 00 0a # Response Sequence Number 10
		00 00 00 02 # Result: Denied
	`), ReconfigResponse{ResponseSeq: 10, Result: ResultDenied}, ParseReconfigResponse, 12)
	checkParamCodec(t, hexBytes(t, `
		00 10 00 14 # Re-configuration Response, Length 20
		00 00 00 0a # Response Sequence Number 10
		00 00 00 01 # Result: Success - Performed
		00 00 01 00 # Sender's Next TSN
		00 00 02 00 # Receiver's Next TSN
	`), ReconfigResponse{ResponseSeq: 10, Result: ResultSuccessPerformed, HasNextTSNs: true, SenderNextTSN: 256, ReceiverNextTSN: 512},
		ParseReconfigResponse, 20)
	checkParamCodec(t, hexBytes(t, "0011000c 0000000b 00100000"), AddStreamsRequest{RequestSeq: 11, NumNewStreams: 16}, ParseAddStreamsRequest, 12)
	checkParamCodec(t, hexBytes(t, "0012000c 0000000b 00020000"), AddStreamsRequest{Incoming: true, RequestSeq: 11, NumNewStreams: 2}, ParseAddStreamsRequest, 12)

	for name, b := range map[string]string{
		"Outgoing SSN Reset of 17": "000d0011 00000000 00000000 00000000 00",
		"Response of 16":           "00100010 00000000 00000000 00000000",
		"SSN/TSN Reset of 12":      "000f000c 00000000 00000000",
	} {
		_, _, err := ParseParam(hexBytes(t, b))
		wantErr(t, name, err, ErrLength)
	}
	if s := ResultErrorBadSequence.String(); s != "Error - Bad Sequence Number" {
		t.Errorf("Result 5: %q", s)
	}
	if s := ReconfigResult(77).String(); s != "Result 77" {
		t.Errorf("Result 77: %q", s)
	}
}
