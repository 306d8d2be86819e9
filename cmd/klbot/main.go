// Command klbot is Kilolock's GitHub App: it plans Terraform on pull request
// pushes, applies on "/kl apply", the Apply button or merge, and reports
// every run in check runs and one sticky comment per pull request. See
// docs/klbot.md. main only wires the process (signals, exit code) to run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if asked, err := printVersion(os.Args[1:], os.Stdout); asked {
		if err != nil {
			fmt.Fprintln(os.Stderr, "klbot:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Environ())
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "klbot:", err)
		os.Exit(1)
	}
}
