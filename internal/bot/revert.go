package bot

import (
	"context"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
)

// onRevert sets the conclusion of check, the "kl plan · PROJECT" check
// run of plan out, by project p's on_revert (kl.yaml, a safety key read
// from the base: ADR 0040, ADR 0046) when the plan would undo an earlier
// version's change (engine.Envelope.Reverts): warn makes a success
// neutral; fail makes it a failure without the Apply button (its summary
// already says why: report.Applying.RevertFail). A plan that undoes
// nothing is left as it is.
func onRevert(check *github.CheckRun, out *engine.PlanOutcome, p klyaml.Project) {
	if out == nil || out.Run.Envelope == nil || len(out.Run.Envelope.Reverts) == 0 {
		return
	}
	if p.OnRevert != klyaml.RevertFail {
		if check.Conclusion == "success" {
			check.Conclusion = "neutral"
		}
		return
	}
	check.Conclusion, check.Actions = "failure", nil
}

// revertHolds checks project r's on_revert at apply (ADR 0046): nil when
// it is warn or the plan undoes nothing, else the refusal naming what the
// plan would undo. r.Config is the project's rules as the apply read them
// again from the base (Bot.applyRules, ADR 0040 decision 5).
func (b *Bot) revertHolds(ctx context.Context, x *applyCtx, r projectRow) (*report.BotRefusal, error) {
	if r.Config.OnRevert != klyaml.RevertFail || r.PlanRun == "" {
		return nil, nil
	}
	run, err := b.eng.Run(ctx, r.PlanRun)
	if err != nil {
		return nil, err
	}
	if run.Envelope == nil || len(run.Envelope.Reverts) == 0 {
		return nil, nil
	}
	no := x.refusal(r)
	no.Rule, no.Problem = report.BotRuleRevert, report.RevertRefusedWhy(r.Project, r.PlanRun, run.Envelope.Reverts)
	return &no, nil
}
