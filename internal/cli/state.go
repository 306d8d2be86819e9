package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

func (a *app) stateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Create, list, read and edit the Terraform states Kilolock owns",
	}
	cmd.AddCommand(a.stateInitCommand(), a.statePullCommand(), a.stateListCommand(), a.stateOutputCommand(),
		a.stateRollbackCommand(), a.statePushCommand(), a.stateRmCommand(), a.stateMvCommand())
	return cmd
}

func (a *app) stateInitCommand() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Create state NAME: empty, or adopted from a Terraform state v4 file (keeping its lineage and serial)",
		Long: `Create state NAME: empty, or adopted from a Terraform state v4 file (keeping its lineage and serial).

Without --store or KL_STORE the store is the nearest .kl/kl.db from the working directory
upward (not past a directory of another owner, KL_CEILING_DIRECTORIES or $HOME's parent);
where there is none, kl state init creates one in .kl/ of the working directory and says so
on stderr.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := engine.ValidateStateName(args[0]); err != nil {
				return err
			}
			var doc []byte
			if from != "" {
				b, err := readInput(from, a.io.In)
				if err != nil {
					return err
				}
				doc = b
			}
			a.createStore = true // the one command that creates a SQLite store
			e, err := a.engineToWrite(cmd.Context(), false)
			if err != nil {
				return err
			}
			src := from // where the document came from, in words
			if from == "-" {
				src = "stdin"
			}
			st, err := e.InitState(cmd.Context(), args[0], doc, a.actor())
			if from != "" && errors.Is(err, engine.ErrInvalid) {
				// The name is valid (checked above): the document is not.
				return fmt.Errorf("reading state file %s: %w", src, err)
			}
			if err != nil {
				return err
			}
			return report.StateInit(a.io.Out, st, src, a.reportOptions())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "adopt this Terraform state v4 file (\"-\" reads stdin)")
	return cmd
}

func (a *app) statePullCommand() *cobra.Command {
	var serial int64
	var out string
	cmd := &cobra.Command{
		Use:   "pull NAME",
		Short: "Print a version of state NAME as a Terraform state v4 document (the head by default)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSerialFlag(cmd, "serial", serial); err != nil {
				return err
			}
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			doc, _, err := e.Pull(cmd.Context(), args[0], serial)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = a.io.Out.Write(doc)
				return err
			}
			// The state holds secrets: owner-only permissions.
			if err := os.WriteFile(out, doc, 0o600); err != nil {
				return fmt.Errorf("writing %s: %w", out, err)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&serial, "serial", -1, "version serial to pull (default: the head)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "write to this file (mode 0600) instead of stdout")
	return cmd
}

func (a *app) stateListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List states with their lineage and head serial",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			states, err := e.States(cmd.Context())
			if err != nil {
				return err
			}
			return report.States(a.io.Out, states, a.reportOptions())
		},
	}
}

// checkSerialFlag refuses a negative value of the serial flag name once
// it is given (ErrInvalid, exit 1): a version serial is 0 or more, as
// Terraform's state "serial" (`kl history --state NAME` lists them); the
// flags' -1 default only means "not given" (the head), and is never
// accepted spelt out.
func checkSerialFlag(cmd *cobra.Command, name string, v int64) error {
	if cmd.Flags().Changed(name) && v < 0 {
		return engine.Errorf(engine.ErrInvalid, "--%s %d: want a version serial, 0 or more (kl history --state NAME lists them)", name, v)
	}
	return nil
}

// readInput reads a file, or stdin for "-".
func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}
