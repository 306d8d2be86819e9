// Command kl is Kilolock's CLI: concurrent Terraform plan/apply on one
// shared state with resource-level reservations, and the causal history of
// every run. See README.md and `kl --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kilolock/kilolock/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs kl and returns its exit status: 0, 3 for a refusal, 129, 130 or
// 143 for a command SIGHUP, SIGINT or SIGTERM stopped, 1 for any other
// error.
func run(args []string) int {
	sigs := make(chan os.Signal, 1)
	// SIGHUP too: a closed terminal must not kill an apply mid-way.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	finished := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			// A second Ctrl-C exits at once (the default action): Terraform
			// is killed with kl, and the reservations expire with their
			// lease (KL_LEASE). cli.Run prints what the command does now.
			signal.Stop(sigs)
			sig, _ := s.(syscall.Signal)
			cancel(&cli.Interrupted{Signal: sig})
		case <-finished:
		}
	}()
	err := cli.Run(ctx, args, os.Environ(), cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	close(finished)
	if msg := cli.Message(err); msg != "" {
		fmt.Fprintln(os.Stderr, "kl:", msg)
	}
	return cli.ExitCode(err)
}
