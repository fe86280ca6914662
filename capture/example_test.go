package capture_test

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/iwarpgo/iwarp/capture"
)

// Decode a capture of Linux siw's rping ending in a Terminate and print
// what each MPA/TCP record is.
func ExampleDecode() {
	f, err := os.Open("../cmd/iwarp/testdata/siw-terminate.pcap")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	recs, err := capture.Decode(f)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs[:4] {
		fmt.Println(strings.TrimSpace(fmt.Sprint(r.N, " ", r.Transport, " ", r.Kind, " ", r.Op)))
	}
	// Output:
	// 1 tcp mpa_request
	// 2 tcp mpa_reply
	// 3 tcp fpdu Send
	// 4 tcp fpdu RDMA Read Request
}
