package cli

import (
	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// gcCommand is `kl gc`: delete the artifacts no run needs any more (ADR
// 0063).
func (a *app) gcCommand() *cobra.Command {
	var dry bool
	cmd := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Delete the stored artifacts no run needs any more (KL_RETENTION)",
		Long: `gc deletes what the store keeps only for Terraform: the state artifacts of apply runs that committed
(stores written before Kilolock deleted them at commit), and, once a plan has been closed (applied,
superseded, stale, failed, …) for longer than KL_RETENTION (default 30d; off keeps them), its saved plan,
configuration archive and -var values, and the state artifacts of an apply that never committed and
holds no fence. Nothing an open plan, a run in progress or a fenced run needs is deleted, and every run's
story, diff and apply log stay. klbot runs the same gc every hour (KLBOT_RETENTION).
With --dry-run it lists what it would delete, with sizes, and deletes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			open := a.engineToWrite
			if dry {
				open = a.engine
			}
			e, err := open(cmd.Context(), false)
			if err != nil {
				return err
			}
			res, err := e.GC(cmd.Context(), engine.GCRequest{Retention: a.cfg.retention, DryRun: dry})
			if err != nil {
				return err
			}
			return report.GC(a.io.Out, res, engine.RetentionName(a.cfg.retention), a.reportOptions())
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "list what would be deleted, with sizes, and delete nothing")
	return cmd
}
