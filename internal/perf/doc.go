// Package perf is the engine of `iwarp perf`.
package perf
