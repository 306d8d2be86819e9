package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/version"
)

// printVersion answers `klbot version`, `klbot version --json` and
// `klbot --version` (args without the program name): it reports whether
// args ask for the version and prints it on w — the same facts and words
// as `kl version` (internal/version, report.Version). It reads no
// configuration. Other arguments after "version" are an error naming them.
func printVersion(args []string, w io.Writer) (bool, error) {
	if len(args) == 0 || !slices.Contains([]string{"version", "--version", "-version"}, args[0]) {
		return false, nil
	}
	o := report.Options{Format: report.Text}
	switch rest := args[1:]; {
	case args[0] == "version" && slices.Equal(rest, []string{"--json"}):
		o.Format = report.JSON
	case len(rest) > 0 && args[0] == "version":
		return true, fmt.Errorf("klbot version: unknown arguments %q (its only flag is --json)", rest)
	case len(rest) > 0:
		return true, fmt.Errorf("klbot %s takes no arguments (got %q)", args[0], rest)
	}
	info, err := version.Get()
	if err != nil {
		return true, err
	}
	return true, report.Version(w, "klbot", info, o)
}
