// Command klnotices writes THIRD_PARTY_NOTICES: the licence and notice
// files of every Go module linked into kl and klbot on the release
// platforms (internal/license). The release runs it (.goreleaser.yaml):
//
//	go run ./internal/license/cmd/klnotices -o bin/release/THIRD_PARTY_NOTICES
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilolock/kilolock/internal/license"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "klnotices:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("klnotices", flag.ContinueOnError)
	out := fs.String("o", "", "file to write (required)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "GOOS/GOARCH pairs, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: klnotices -o FILE [-platforms linux/amd64,…]")
	}
	mods, err := license.Collect(context.Background(), "go", ".", strings.Split(*platforms, ","),
		[]string{"./cmd/kl", "./cmd/klbot"})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := license.Write(&b, "kl and klbot", mods); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, b.Bytes(), 0o644)
}
