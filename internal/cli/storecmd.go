package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store"
)

// storeCommand is `kl store`: operations on the store itself.
func (a *app) storeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Operate on the store itself (encryption at rest, per-resource storage)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.storeResealCommand(), a.storeBackfillCommand())
	return cmd
}

// storeResealCommand is `kl store reseal` (ADR 0066).
func (a *app) storeResealCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reseal",
		Short: "Seal every artifact and state version with the first key of KL_ENCRYPTION_KEY",
		Long: `reseal re-seals every stored artifact (saved plans, configuration archives, -var values, apply states,
intents, diffs, apply logs) and every state version with the first key of KL_ENCRYPTION_KEY: the clear ones
(stored before a key was configured) and those sealed with another of its keys. It works in short transactions
of ` + fmt.Sprint(store.ResealBatch) + ` rows, beside running plans and applies, and can be run again after an interruption. When it is done
it retires every other key the store has recorded: nothing is sealed with them any more, so they can be removed
from KL_ENCRYPTION_KEY (and KLBOT_ENCRYPTION_KEY), and a kl or klbot whose first key is a retired one is refused.

To rotate: put the new key first everywhere (KL_ENCRYPTION_KEY=new:…,old:…, in every kl and every klbot
replica), run kl store reseal, then remove the old key (docs/operating.md, "Encryption at rest").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !a.cfg.keys.Enabled() {
				return fmt.Errorf("kl store reseal: KL_ENCRYPTION_KEY is not set: it re-seals with the first key of KL_ENCRYPTION_KEY")
			}
			e, err := a.engineToWrite(cmd.Context(), false)
			if err != nil {
				return err
			}
			rs, ok := e.Store.(store.Resealer)
			if !ok {
				return fmt.Errorf("kl store reseal: the store %T does not re-seal", e.Store)
			}
			res, err := rs.Reseal(cmd.Context())
			if err != nil {
				return err
			}
			return report.Reseal(a.io.Out, res, a.reportOptions())
		},
	}
}
