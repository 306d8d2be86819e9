// Command kl is Kilolock's CLI: concurrent Terraform plan/apply on one
// shared state with resource-level reservations, and the causal history of
// every run. See README.md and `kl --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kilolock/kilolock/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-finished: // stop() after a normal end, not a signal
			default:
				// A second Ctrl-C exits at once: Terraform is killed with kl,
				// and the reservations expire with their lease (KL_LEASE).
				stop()
				fmt.Fprintln(os.Stderr, "\nkl: interrupted: stopping Terraform; an apply commits what Terraform wrote and releases its reservations (Ctrl-C again to exit at once)…")
			}
		case <-finished:
		}
	}()
	err := cli.Run(ctx, os.Args[1:], os.Environ(), cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	close(finished)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kl:", err)
		var ee *cli.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.Code)
		}
		os.Exit(1)
	}
}
