// Command klbench prints Kilolock's benchmark figures beside their
// baselines (make bench): concurrency (reservations vs one whole-state
// lock), overhead (kl vs bare terraform), commit (snapshot-merge on
// 10,000 resources), store growth and the native lane (against the
// terraform lane on 10,000 resources). It asserts nothing. See package internal/bench.
//
//	klbench [-kl PATH] [-runs N] [-count N] [-only all|concurrency|overhead|provider|commit|growth|native] [-native-resources N]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kilolock/kilolock/internal/bench"
	"github.com/kilolock/kilolock/internal/terraform"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "klbench:", err)
		os.Exit(1)
	}
}

// run parses args, resolves the binaries from env and runs the benchmarks.
func run(ctx context.Context, args, env []string, out io.Writer) error {
	fs := flag.NewFlagSet("klbench", flag.ContinueOnError)
	var opts bench.Options
	fs.StringVar(&opts.KL, "kl", "", "kl binary for the overhead figure (default: build ./cmd/kl into a temp dir)")
	fs.IntVar(&opts.Runs, "runs", 3, "interleaved repetitions of the concurrency and overhead figures")
	fs.IntVar(&opts.Count, "count", 5, "go test -count of the commit benchmarks")
	fs.StringVar(&opts.Only, "only", bench.OnlyAll, "figure to run: all, concurrency, overhead, provider, commit, growth or native")
	fs.StringVar(&opts.Src, "src", ".", "module root (for the commit benchmarks and building kl)")
	fs.StringVar(&opts.TempDir, "tmp", "", "parent of the temporary directories (default: the OS temp dir)")
	fs.IntVar(&opts.NativeResources, "native-resources", bench.DefaultNativeResources, "resources of the native-lane figure's big state (fewer for a smoke run, at least 10)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := bench.CheckOnly(opts.Only); err != nil {
		return err
	}
	if opts.NativeResources < 10 {
		return fmt.Errorf("-native-resources %d: want at least 10", opts.NativeResources)
	}
	src, err := bench.ModuleRoot(opts.Src)
	if err != nil {
		return err
	}
	opts.Src = src
	if opts.Only != bench.OnlyCommit {
		getenv := func(k string) string {
			for _, kv := range env {
				if key, v, ok := strings.Cut(kv, "="); ok && key == k {
					return v
				}
			}
			return ""
		}
		if opts.Terraform, err = terraform.FindBinary(getenv); err != nil {
			return err
		}
	}
	_, err = bench.Run(ctx, out, opts)
	return err
}
