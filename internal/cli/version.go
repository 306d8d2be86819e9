package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/version"
)

// versionCommand is `kl version`: this build's version, commit, Go
// release and the store it speaks (internal/version). It reads no store
// and needs no valid environment: it is what one asks when a setup fails.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kl's version, commit, Go release and the store schema and compatibility level it speaks",
		Long: `Print kl's version (semantic versioning: see README "Versions"), the commit it was built from,
the Go release that built it, and the store it speaks: the newest schema version it migrates a
store to, and the store compatibility level it follows. With --json: a kilolock/version/v1
document (docs/json.md). kl --version prints the same text.`,
		Args: cobra.NoArgs,
		// Not the root's: no environment is checked, so that a bad KL_*
		// variable does not hide the version.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.parsed = true
			a.cfg.NoColor, a.cfg.Term = a.getenv("NO_COLOR"), a.getenv("TERM")
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := version.Get()
			if err != nil {
				return err
			}
			return report.Version(a.io.Out, "kl", info, a.reportOptions())
		},
	}
}

// setVersionFlag gives root cobra's --version flag, printing what `kl
// version` prints (without colour). When this build's version facts are
// bad (version.Get fails), --version prints nothing and Run returns the
// error (versionFlagErr).
func (a *app) setVersionFlag(root *cobra.Command) {
	info, err := version.Get()
	if err != nil {
		a.versionErr = err
		root.Version = "invalid"
		root.SetVersionTemplate(`{{""}}`) // prints nothing: Run returns the error
		return
	}
	var b strings.Builder
	if err := report.Version(&b, "kl", info, report.Options{Format: report.Text}); err != nil {
		a.versionErr = err
	}
	root.Version = info.Version
	root.SetVersionTemplate(b.String())
}

// versionFlagErr is the error of a `kl --version` whose version facts
// were bad, nil otherwise.
func (a *app) versionFlagErr(root *cobra.Command) error {
	if a.versionErr == nil {
		return nil
	}
	if set, _ := root.Flags().GetBool("version"); set {
		return a.versionErr
	}
	return nil
}
