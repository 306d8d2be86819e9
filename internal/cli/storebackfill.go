package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/store"
)

// backfiller is a store that can give its versions stored whole their
// manifests (store.Algorithms.Backfill; both stores).
type backfiller interface {
	Backfill(ctx context.Context, budget int) (store.BackfillResult, error)
}

// storeBackfillCommand is `kl store backfill`: per-resource storage for
// the versions a store kept whole before migration 17 (ADR 0068).
func (a *app) storeBackfillCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "backfill [--limit N]",
		Short: "Store the versions kept whole before per-resource storage as manifests of entries",
		Long: `backfill rewrites the versions a store kept as whole snapshots (every version written before
per-resource storage, ADR 0068) as a header and a manifest of resource entries, each entry stored once
and shared with the versions that have it. Newest versions first, in short transactions beside running
plans and applies; safe to interrupt and to run again (it resumes). A version whose document is not as
Terraform writes it (another indentation, resources out of Terraform's order) stays whole, so that
pulling it still returns its bytes. klbot runs it with its gc. --limit stops after N versions (0: all).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 (all) or a positive number of versions", limit)
			}
			e, err := a.engineToWrite(cmd.Context(), false)
			if err != nil {
				return err
			}
			b, ok := e.Store.(backfiller)
			if !ok {
				return fmt.Errorf("this store cannot backfill")
			}
			res, err := b.Backfill(cmd.Context(), limit)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.io.Out, "Converted %d versions to manifests of entries", res.Converted)
			if res.KeptWhole > 0 {
				fmt.Fprintf(a.io.Out, "; kept %d whole (not as Terraform writes them)", res.KeptWhole)
			}
			fmt.Fprintln(a.io.Out, ".")
			if len(res.Finished) > 0 {
				fmt.Fprintf(a.io.Out, "Finished: %s\n", strings.Join(res.Finished, ", "))
			}
			if len(res.Remaining) > 0 {
				fmt.Fprintf(a.io.Out, "Still to do (run it again): %s\n", strings.Join(res.Remaining, ", "))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "stop after this many versions (0: all)")
	return cmd
}
