//go:build race

package cli_test

// The test binary runs with the race detector: build kl with it too, so
// that `go build` reuses the packages `go test -race` just compiled.
func init() { raceEnabled = true }
