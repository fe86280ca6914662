//go:build race

package main

// raceEnabled: the race detector slows the Go peer several times over.
const raceEnabled = true
