package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/api"
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
				b, err := readInput(cmd.Context(), from, a.io.In)
				if err != nil {
					return err
				}
				if len(b) == 0 {
					// What a failed `terraform state pull > FILE` leaves:
					// adopting it would start a new, empty state.
					return engine.Errorf(engine.ErrInvalid, "reading state file %s: it is empty, not a Terraform state (kl state init NAME without --from creates an empty state)", inputName(from))
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

// maxInputBytes bounds a document kl reads from a file or stdin (a state,
// a plan's JSON, a report's): 4 GiB, the largest body kl serve may be set
// to take (api.MaxBodyMiB), so any state the backend can take kl can too.
const maxInputBytes = api.MaxBodyMiB << 20

// readInput reads the JSON document in a file, or on stdin for "-". The
// read is bounded: it stops at the first byte that is not JSON (a device
// such as /dev/zero never ends) and returns what it read, for the caller's
// parser to refuse; input over maxInputBytes is refused; and the read stops when ctx is done (an interrupt while stdin
// sends nothing). Errors name the input; ctx's error is returned as it is.
func readInput(ctx context.Context, path string, stdin io.Reader) ([]byte, error) {
	name, r := inputName(path), stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		defer f.Close()
		r = f
	}
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := readJSON(name, r, maxInputBytes)
		done <- read{b, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case got := <-done:
		return got.b, got.err
	}
}

// inputName is how errors name the input path ("-" is stdin).
func inputName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// readJSON reads r to its end, checking as it reads that it starts with
// one JSON value (a json.Decoder scans as it reads, so garbage is refused
// at once) and that it holds at most limit bytes. The bytes are returned
// as they were read.
func readJSON(name string, r io.Reader, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	lr := &io.LimitedReader{R: r, N: limit + 1}
	dec := json.NewDecoder(io.TeeReader(lr, &buf))
	var skip json.RawMessage
	if err := dec.Decode(&skip); err != nil {
		if lr.N <= 0 {
			return nil, fmt.Errorf("reading %s: over %s, the largest document kl reads", name, sizeWords(limit))
		}
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			// Not JSON: what was read is returned, and the caller's
			// parser refuses it in its own words (a prefix holding a
			// syntax error is not JSON whatever follows it).
			return buf.Bytes(), nil
		}
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if _, err := io.Copy(&buf, lr); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("reading %s: over %s, the largest document kl reads", name, sizeWords(limit))
	}
	return buf.Bytes(), nil
}

// sizeWords is n bytes in MiB when whole, else in bytes.
func sizeWords(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
