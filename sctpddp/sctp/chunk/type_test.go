package chunk

import "testing"

func TestTypeUnrecognized(t *testing.T) {
	// RFC 9260 §3.2 Table 2, and the extensions' choices: RFC 8260 §5.1
	// puts I-DATA in "the pool of chunks with the upper two bits set to
	// '01'" and I-FORWARD-TSN in '11'; RFC 5061 §4.1.1 says "the upper two
	// bits in the ASCONF Chunk are set to one"; RFC 6525 §3 has the
	// receiver ignore an unknown RE-CONFIG "and continue processing".
	for typ, want := range map[Type]Action{
		TypeData:        ActionStop,
		TypeIData:       ActionStopReport,
		TypeASCONFAck:   ActionSkip,
		TypeReconfig:    ActionSkip,
		TypeForwardTSN:  ActionSkipReport,
		TypeASCONF:      ActionSkipReport,
		TypeIForwardTSN: ActionSkipReport,
		63:              ActionStop,
		127:             ActionStopReport,
		191:             ActionSkip,
		255:             ActionSkipReport,
	} {
		if got := typ.Unrecognized(); got != want {
			t.Errorf("%v: %v, want %v", typ, got, want)
		}
	}
	for a, want := range map[Action][2]bool{
		ActionStop:       {true, false},
		ActionStopReport: {true, true},
		ActionSkip:       {false, false},
		ActionSkipReport: {false, true},
	} {
		if a.Stop() != want[0] || a.Report() != want[1] {
			t.Errorf("%v: Stop %v Report %v", a, a.Stop(), a.Report())
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{TypeShutdownComplete.String(), "SHUTDOWN COMPLETE"},
		{Type(200).String(), "chunk type 200"},
		{ParamAdaptationLayerIndication.String(), "Adaptation Layer Indication"},
		{ParamType(0x1234).String(), "parameter type 0x1234"},
		{CauseProtocolViolation.String(), "Protocol Violation"},
		{CauseCode(99).String(), "cause code 99"},
		{ActionSkipReport.String(), "skip and report"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
