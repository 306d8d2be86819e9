package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// Day-2 commands (issue 14 §6, ADR 0055): outputs, rollback, push, rm, mv.

// day2Exit is the exit status part every day-2 writing command's help
// ends with.
const day2Exit = `Each commit is a version like an apply's: it reserves the whole state for write ("*") first,
so it is refused at once (or after --wait) naming the runs that hold reservations, and at once
naming a fenced run; its version names the actor, the operation and --reason in kl history; an
open plan whose write set it changed is refused as stale, naming it.

Exit status: 0 committed (or nothing to commit); 3 refused (reservations held by other runs, a
fence, a serial a push may not take without --force); 1 any other error (bad input: an address
that matches nothing, another lineage, an unknown version or state).`

func (a *app) stateOutputCommand() *cobra.Command {
	var serial int64
	var raw bool
	cmd := &cobra.Command{
		Use:   "output NAME [OUTPUT]",
		Short: "Print the root outputs of state NAME (the head by default), as terraform output does",
		Long: `Print the root outputs of a version of state NAME (the head by default), as terraform output
prints them: "NAME = VALUE" lines, or with OUTPUT that value alone. A sensitive value is printed
as <sensitive> — also for one named output, where terraform output prints it — and --json leaves
it out; only --raw OUTPUT prints it, as terraform output -raw does: a string, number or bool as it
is, with no newline after. --json prints a kilolock/state-output/v1 document whose "outputs" is
terraform output -json's object. Reads only: no run, no reservation.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSerialFlag(cmd, "serial", serial); err != nil {
				return err
			}
			in := engine.OutputsInput{State: args[0], Serial: serial}
			if len(args) == 2 {
				in.Name = args[1]
			}
			switch {
			case raw && a.jsonOut:
				return errors.New("--raw and --json: choose one (as terraform output)")
			case raw && in.Name == "":
				return errors.New("--raw prints one output: name it (kl state output NAME OUTPUT --raw)")
			}
			in.Reveal = raw
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			out, err := e.Outputs(cmd.Context(), in)
			if err != nil {
				return err
			}
			if raw {
				return report.RawOutput(a.io.Out, out.Outputs[0])
			}
			return report.Outputs(a.io.Out, out, in.Name != "", a.reportOptions())
		},
	}
	cmd.Flags().Int64Var(&serial, "serial", -1, "version serial to read (default: the head)")
	cmd.Flags().BoolVar(&raw, "raw", false, "print one output's value as it is (strings, numbers, bools), sensitive or not")
	return cmd
}

// day2Flags adds --reason and --wait to a day-2 command writing in.
func day2Flags(cmd *cobra.Command, in *engine.OperationInput, reasonHelp string) {
	cmd.Flags().StringVar(&in.Reason, "reason", "", reasonHelp)
	cmd.Flags().DurationVar(&in.Wait, "wait", 0, "wait this long for other runs' reservations to be released (e.g. 5m); 0 refuses at once")
}

func (a *app) stateRollbackCommand() *cobra.Command {
	in := engine.OperationInput{Mode: engine.CommitRollback, Serial: -1}
	cmd := &cobra.Command{
		Use:   "rollback NAME --to SERIAL --reason TEXT",
		Short: "Commit an earlier version's content as the new head of state NAME",
		Long: `Commit the content of version SERIAL of state NAME as a new version, head+1, with its lineage:
the versions after SERIAL stay in the history, undone. Nothing changes the real objects: plan
and apply afterwards to bring them to what the state now says. Only a version of the state's
lineage can be restored: a state adopted through the backend (terraform init -migrate-state onto
kl state init's empty version) cannot go back before its adoption, and the refusal names the
serials that can.

` + day2Exit,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("to") {
				return engine.Errorf(engine.ErrInvalid, "--to SERIAL is required: the version whose content becomes the head")
			}
			if err := checkSerialFlag(cmd, "to", in.Serial); err != nil {
				return err
			}
			if in.Reason == "" {
				return engine.Errorf(engine.ErrInvalid, "--reason is required: say why the versions after %d are undone", in.Serial)
			}
			in.State = args[0]
			return a.operate(cmd, in)
		},
	}
	cmd.Flags().Int64Var(&in.Serial, "to", -1, "the version whose content becomes the new head (required)")
	day2Flags(cmd, &in, "why the later versions are undone (required; recorded with the version)")
	return cmd
}

func (a *app) statePushCommand() *cobra.Command {
	in := engine.OperationInput{Mode: engine.CommitPush}
	cmd := &cobra.Command{
		Use:   "push NAME FILE",
		Short: "Commit a whole Terraform state v4 document (of the state's lineage) as the new head of state NAME",
		Long: `Commit FILE ("-" reads stdin), a Terraform state v4 document of state NAME's lineage, as a new
version, head+1 — the serial is Kilolock's: one per commit; the document's is recorded. As
terraform state push: a document whose serial is below the head's, or the head's with other
content, is an older or diverged copy and is refused unless --force. Another lineage is refused,
--force or not: it is another Terraform state (adopt it with kl state init under a new name). A
document the head already holds commits nothing.

` + day2Exit,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := readInput(cmd.Context(), args[1], a.io.In)
			if err != nil {
				return err
			}
			in.State, in.Document = args[0], doc
			return a.operate(cmd, in)
		},
	}
	cmd.Flags().BoolVar(&in.Force, "force", false, "take a document whose serial is not above the head's (never another lineage)")
	day2Flags(cmd, &in, "why (recorded with the version)")
	return cmd
}

func (a *app) stateRmCommand() *cobra.Command {
	in := engine.OperationInput{Mode: engine.CommitStateRm}
	cmd := &cobra.Command{
		Use:   "rm NAME ADDRESS...",
		Short: "Commit state NAME without the resources, instances or modules named (Terraform forgets them)",
		Long: `Commit state NAME without what the addresses name, as terraform state rm does, without
Terraform: a resource (every instance), an instance (terraform_data.a[0], aws_instance.x["k"]),
a module instance and everything in it (module.app[1]; module.app: every instance of the call).
The real objects stay; Terraform no longer manages them. Every address must match something:
else nothing is removed and the error names those that do not (terraform state rm ignores them
when another matches).

` + day2Exit,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.State, in.Addresses = args[0], args[1:]
			return a.operate(cmd, in)
		},
	}
	day2Flags(cmd, &in, "why (recorded with the version)")
	return cmd
}

func (a *app) stateMvCommand() *cobra.Command {
	in := engine.OperationInput{Mode: engine.CommitStateMv}
	cmd := &cobra.Command{
		Use:   "mv NAME FROM TO",
		Short: "Commit state NAME with a resource, instance or module moved to another address",
		Long: `Commit state NAME with FROM moved to TO, as terraform state mv does, without Terraform: a
resource to a resource address of the same type (in any module), an instance to an instance
address, a module instance (with the modules in it) to a module instance address. Nothing may
be at TO yet. A moved block in the configuration does the same through a plan, reviewed.

` + day2Exit,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.State, in.Addresses = args[0], args[1:]
			return a.operate(cmd, in)
		},
	}
	day2Flags(cmd, &in, "why (recorded with the version)")
	return cmd
}

// operate runs one day-2 operation and reports what it did: the version it
// committed, that it had nothing to do, or — when its run was refused or
// failed — its run and why.
func (a *app) operate(cmd *cobra.Command, in engine.OperationInput) error {
	if in.Wait < 0 {
		return fmt.Errorf("--wait %s: negative: use 0 to refuse at once, or how long to wait (e.g. 5m)", in.Wait)
	}
	if in.Reason != "" {
		if err := checkWords("--reason", in.Reason, MaxReason); err != nil {
			return err
		}
	}
	e, err := a.engineToWrite(cmd.Context(), false)
	if err != nil {
		return err
	}
	in.Actor = a.actor()
	p := a.progress()
	in.OnWait = func(bs []engine.Blocker) {
		a.phase.set(phaseApplyWait)
		p.waiting(bs)
	}
	out, err := e.Operate(cmd.Context(), in)
	p.done()
	res := report.OperationResult{State: in.State, Mode: in.Mode}
	id := runOf(err)
	if out != nil {
		res.Head = out.Head
		if out.Run != nil {
			id = out.Run.ID
		}
	}
	if id != "" {
		s, serr := e.RunStory(context.WithoutCancel(cmd.Context()), id)
		if serr != nil {
			return errors.Join(err, serr)
		}
		res.Story = s
	}
	if out != nil || id != "" {
		if rerr := report.Operation(a.io.Out, res, a.reportOptions()); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return refusal(err)
}
