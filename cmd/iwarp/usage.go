package main

import _ "embed"

// The commands' usage texts, printed by "iwarp CMD -h" and on a usage
// error, kept as text in usage/.
var (
	//go:embed usage/dump.txt
	dumpUsage string
	//go:embed usage/perf.txt
	perfUsage string
	//go:embed usage/perftest.txt
	perftestUsage string
	//go:embed usage/replay.txt
	replayUsage string
	//go:embed usage/rping.txt
	rpingUsage string
	//go:embed usage/serve.txt
	serveUsage string
)
