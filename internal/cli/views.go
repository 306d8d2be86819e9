package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/oklog/ulid/v2"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

func (a *app) historyCommand() *cobra.Command {
	var state, sincePlan string
	var q engine.HistoryQuery
	cmd := &cobra.Command{
		Use:   "history (--state NAME | --since-plan RUN)",
		Short: "Versions of a state with their producing runs, or what changed since a plan",
		Long: `With --state, history lists the versions of a state newest first, each with its producing
run, why it was allowed, any re-plan, its commit mode and whether it matched the plan exactly.

With --since-plan RUN, it lists every version committed after the plan's source serial with
its class against the plan's footprint — independent, plan input changed (read set), or
planned target changed (write set) — and its producing run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case state == "" && sincePlan == "":
				return fmt.Errorf("history needs exactly one of --state NAME or --since-plan RUN; neither was given")
			case state != "" && sincePlan != "":
				return fmt.Errorf("history needs exactly one of --state NAME or --since-plan RUN; both were given")
			case q.Limit < 1:
				return fmt.Errorf("--limit %d: want at least 1 (versions per page)", q.Limit)
			case q.Before < 0:
				return fmt.Errorf("--before %d: want a serial, or 0 for a page from the head", q.Before)
			}
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			if sincePlan != "" {
				sp, err := e.SincePlan(cmd.Context(), sincePlan)
				if err != nil {
					return err
				}
				story, err := e.RunStory(cmd.Context(), sincePlan)
				if err != nil {
					return err
				}
				return report.SincePlan(a.io.Out, sp, *story.Plan, a.reportOptions())
			}
			hs, err := e.History(cmd.Context(), state, q)
			if err != nil {
				return err
			}
			// The head, which the page may not show.
			st, err := e.State(cmd.Context(), state)
			if err != nil {
				return err
			}
			return report.History(a.io.Out, st, hs, a.reportOptions())
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "state whose versions to list")
	cmd.Flags().StringVar(&sincePlan, "since-plan", "", "plan (or apply) run whose since-plan versions to classify")
	cmd.Flags().IntVar(&q.Limit, "limit", 50, "at most this many versions (at least 1)")
	cmd.Flags().Int64Var(&q.Before, "before", 0, "only versions with a serial below this, for paging (0: from the head)")
	return cmd
}

func (a *app) runsCommand() *cobra.Command {
	var q engine.RunQuery
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Recent runs: who, what, which state, outcome",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if q.Limit < 1 {
				return fmt.Errorf("--limit %d: want at least 1 (runs per page)", q.Limit)
			}
			if q.Before != "" {
				id, err := parseRunID("--before", q.Before)
				if err != nil {
					return err
				}
				q.Before = id
			}
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			if err := knownState(cmd.Context(), e, q.State); err != nil {
				return err
			}
			// One more than shown tells whether there is a next page.
			page := q
			page.Limit++
			rs, err := e.Runs(cmd.Context(), page)
			if err != nil {
				return err
			}
			more := len(rs) > q.Limit
			if more {
				rs = rs[:q.Limit]
			}
			return report.Runs(a.io.Out, rs, report.RunsPage{State: q.State, More: more}, a.reportOptions())
		},
	}
	cmd.Flags().StringVar(&q.State, "state", "", "only runs of this state")
	cmd.Flags().IntVar(&q.Limit, "limit", 20, "at most this many runs (at least 1)")
	cmd.Flags().StringVar(&q.Before, "before", "", "only runs older than this run id, for paging (empty: the newest)")
	return cmd
}

func (a *app) runCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "run", Short: "Inspect one run, discard an open plan, recover what a stopped apply's Terraform wrote, or lift its fence"}
	var reason string
	discard := &cobra.Command{
		Use:   "discard RUN",
		Short: "Close an open plan that will not be applied (it stops being listed as an overlap)",
		Long: `Discard closes an open plan run — one that will never be applied, such as the plan of a
pull request that was closed or replaced — so that it is no longer listed among the open plans
that overlap newer ones. Its status becomes superseded with the reason ("discarded by ACTOR",
and --reason), recorded as a marker. A run that is not an open plan — an apply run, a plan
being applied or no longer open — is left as it is (exit status 3).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkWords("--reason", reason, MaxReason); reason != "" && err != nil {
				return err
			}
			e, err := a.engineToWrite(cmd.Context(), false)
			if err != nil {
				return err
			}
			// An apply run is not a plan to close (an unknown run is the
			// engine's to name): not applicable, a refusal like a plan
			// that is not open.
			if r, err := e.Run(cmd.Context(), runArg(args)); err == nil && r.Kind == engine.KindApply {
				return &ExitError{Code: 3, Err: fmt.Errorf("run %s is an apply run: only plan runs can be discarded (its plan is %s)", r.ID, r.PlanRun)}
			}
			if err := e.Discard(cmd.Context(), runArg(args), a.actor(), reason); err != nil {
				if errors.Is(err, engine.ErrConflict) {
					return &ExitError{Code: 3, Err: err}
				}
				return err
			}
			s, err := e.RunStory(cmd.Context(), runArg(args))
			if err != nil {
				return err
			}
			return report.RunStory(a.io.Out, s, a.reportOptions())
		},
	}
	discard.Flags().StringVar(&reason, "reason", "", "why the plan is discarded (recorded on the run)")
	cmd.AddCommand(discard, a.recoverCommand(), a.unfenceCommand())
	cmd.AddCommand(&cobra.Command{
		Use:   "show RUN",
		Short: "The run's story: envelope, markers in time order, allowed-because, since-plan, provenance, and the plan's diff",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			s, err := e.RunStory(cmd.Context(), runArg(args))
			if err != nil {
				return err
			}
			if s.Plan != nil {
				// The whole diff: what klbot's Markdown cuts to GitHub's
				// limits points here (ADR 0044). A plan that failed, or
				// one an older kl made, has none.
				if s.Diff, err = e.PlanDiff(cmd.Context(), s.Plan.ID); err != nil && !errors.Is(err, engine.ErrNotFound) {
					return err
				}
			}
			return report.RunStory(a.io.Out, s, a.reportOptions())
		},
	})
	return cmd
}

func (a *app) whyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "why RUN",
		Short: "Why RUN was allowed, waited or was refused, from stored facts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			w, err := e.Why(cmd.Context(), runArg(args))
			if err != nil {
				return err
			}
			return report.Why(a.io.Out, w, a.reportOptions())
		},
	}
}

func (a *app) statusCommand() *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "What is running now, what each run holds, who waits on whom",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.engine(cmd.Context(), false)
			if err != nil {
				return err
			}
			if err := knownState(cmd.Context(), e, state); err != nil {
				return err
			}
			s, err := e.Status(cmd.Context(), state)
			if err != nil {
				return err
			}
			return report.Status(a.io.Out, s, a.reportOptions())
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only this state")
	return cmd
}

func (a *app) recoverCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "recover RUN",
		Short: "Commit what Terraform last wrote for apply run RUN, which stopped without committing",
		Long: `Recover commits what Terraform wrote for an apply run that stopped before its commit: its
kl was killed while Terraform applied (the run ends lease-expired once its lease runs out),
or it failed or was interrupted and its commit did not go through. While Terraform applies,
kl stores the state Terraform writes as a checkpoint (at most every 2 s); recover takes the
last one (or the result Terraform returned, when kl got that far) and commits what changed
against the snapshot Terraform applied to — the same safe rule as a commit whose
reservations lapsed: an address is taken only where the head has not changed it since the
plan and no other live run holds it; elsewhere the head is kept and the deviation says so. The
version is marked partial; the run keeps its status and gains the version; the plan stays
failed: re-plan after recovering.

Without recovering, the next plan would create again what Terraform already created.

An apply whose lease ran out while its Terraform ran leaves its write set fenced: no other
apply may write or read those addresses until it is recovered (recover lifts the fence) or
unfenced (kl run unfence).

Exit status: 0 committed; 3 refused (a plan run, a run that committed already, a run whose
holder may still be running — wait for its lease —, a run that never ran Terraform, or nothing
Terraform wrote to recover); 1 any other error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.engineToWrite(cmd.Context(), false)
			if err != nil {
				return err
			}
			out, err := e.Recover(cmd.Context(), runArg(args))
			var re *engine.RecoverError
			if errors.As(err, &re) {
				return &ExitError{Code: 3, Err: err}
			}
			if err != nil {
				return err
			}
			s, err := e.RunStory(context.WithoutCancel(cmd.Context()), out.Run.ID)
			if err != nil {
				return err
			}
			return report.RunStory(a.io.Out, s, a.reportOptions())
		},
	}
}

func (a *app) unfenceCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "unfence RUN --reason TEXT",
		Short: "Lift the fence a crashed apply left on its write set, without committing anything",
		Long: `When an apply's holder dies (kill -9, a lost machine) after its Terraform started, the
apply's write set stays fenced once its lease runs out: the real objects may have changed in
ways no version records, so every apply that writes or reads those addresses is refused,
naming the fenced run. kl run recover RUN commits what its Terraform last wrote and lifts
the fence. When there is nothing to recover, or you have checked the real objects yourself
(and imported or removed what needs it), unfence lifts the fence without committing:
--reason says what you checked; it is stored with your name and shown in the run's story as
"fence lifted by ACTOR". What the dead run's Terraform did stays in no version.

Exit status: 0 lifted; 3 refused (a plan run, or a run that holds no fence: it is alive,
committed, or was recovered or unfenced already); 1 any other error (no --reason, an unknown run).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return engine.Errorf(engine.ErrInvalid, "--reason is required: say what you checked on the real objects before lifting the fence of run %s", runArg(args))
			}
			if err := checkWords("--reason", reason, MaxReason); err != nil {
				return err
			}
			e, err := a.engineToWrite(cmd.Context(), false)
			if err != nil {
				return err
			}
			if _, err := e.Unfence(cmd.Context(), engine.UnfenceInput{Run: runArg(args), By: a.actor(), Why: reason}); err != nil {
				// A run that exists but holds no fence, or is a plan: a
				// refusal, as kl run recover's (exit 3).
				if errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrInvalid) {
					if _, gerr := e.Run(cmd.Context(), runArg(args)); gerr == nil {
						return &ExitError{Code: 3, Err: err}
					}
				}
				return err
			}
			s, err := e.RunStory(context.WithoutCancel(cmd.Context()), runArg(args))
			if err != nil {
				return err
			}
			return report.RunStory(a.io.Out, s, a.reportOptions())
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "what you checked on the real objects (required; recorded on the run)")
	return cmd
}

// knownState returns an error unless state is "" (every state) or exists:
// Engine.State's, so every command words an unknown state alike.
func knownState(ctx context.Context, e *engine.Engine, state string) error {
	if state == "" {
		return nil
	}
	_, err := e.State(ctx, state)
	return err
}

// runArg is the run id of a command's first argument as Kilolock stores
// it: ULIDs are Crockford base32, which reads lower case as upper case
// (kl runs prints upper case; a pasted id in lower case names the same
// run). Anything else is passed on as given, for the lookup to refuse.
func runArg(args []string) string {
	if id, err := ulid.ParseStrict(args[0]); err == nil {
		return id.String()
	}
	return args[0]
}
