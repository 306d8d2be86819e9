package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/token"
)

// tokenCommand is `kl token`: the API tokens of kl serve (ADR 0054).
func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke the tokens of kl serve's API",
		Long: `A token names an actor, says whether it may write or only read, which states it covers (a glob)
and until when it is valid. kl token create prints it once; the store keeps only its SHA-256.
A client sends it as the password of HTTP Basic auth or as a bearer token. kl serve ignores the username,
but Terraform's http backend sends the password only when username is set: set it to any non-empty name.`,
	}
	cmd.AddCommand(a.tokenCreateCommand(), a.tokenListCommand(), a.tokenRevokeCommand())
	return cmd
}

func (a *app) tokenCreateCommand() *cobra.Command {
	var (
		actor, states, expires string
		readOnly               bool
	)
	cmd := &cobra.Command{
		Use:   "create --actor NAME [--read-only] [--state GLOB] [--expires DURATION]",
		Short: "Make a token and print it (once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := a.newToken(actor, states, expires, readOnly, cmd.Flags().Changed("actor"))
			if err != nil {
				return err
			}
			id, secret, hash, err := token.Generate()
			if err != nil {
				return err
			}
			n.ID, n.Hash = id, hash
			tokens, err := a.tokenStore(cmd.Context(), true)
			if err != nil {
				return err
			}
			t, err := tokens.CreateToken(cmd.Context(), n)
			if err != nil {
				return err
			}
			return report.TokenCreated(a.io.Out, t, secret, a.reportOptions())
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "who acts with the token: run records and history name them (required)")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "the token may read states (GET, terraform_remote_state, a plan's read lock) but not lock or write them")
	cmd.Flags().StringVar(&states, "state", token.AllStates, "the states it covers: a glob, * within a /-separated segment, ** across them (acme/**, acme/*/prod)")
	cmd.Flags().StringVar(&expires, "expires", "", "lifetime: a duration (90m, 720h) or days (30d), at least 1m; default: it does not expire")
	return cmd
}

// newToken checks the flags of kl token create and returns the token to
// store, without its id and hash.
func (a *app) newToken(actor, states, expires string, readOnly, actorSet bool) (token.New, error) {
	if !actorSet {
		return token.New{}, fmt.Errorf("--actor is required: who acts with the token (kl token create --actor NAME)")
	}
	if err := checkWords("--actor", actor, token.MaxActor); err != nil {
		return token.New{}, err
	}
	if err := token.CheckStates(states); err != nil {
		return token.New{}, fmt.Errorf("--state: %w", err)
	}
	ttl, err := parseLifetime(expires)
	if err != nil {
		return token.New{}, err
	}
	return token.New{Actor: actor, ReadOnly: readOnly, States: states, CreatedBy: a.actor(), TTL: ttl}, nil
}

// maxLifetime is the longest --expires: ten years, beyond which an
// expiry means nothing a reader of kl token list could check.
const maxLifetime = 10 * 365 * 24 * time.Hour

// parseLifetime parses --expires: "" (no expiry), a Go duration (90m,
// 720h) or a whole number of days (30d), from token.MinTTL to maxLifetime.
func parseLifetime(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		n, perr := strconv.Atoi(days)
		if perr == nil && n > 0 && n <= int(maxLifetime/(24*time.Hour)) {
			d, err = time.Duration(n)*24*time.Hour, nil
		}
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("--expires %s: not a duration: use e.g. 90m, 720h or 30d", preview(s))
	case d < token.MinTTL:
		return 0, fmt.Errorf("--expires %s: too short: use at least %s (expiry is checked by kl serve's clock, stamped by the store's)",
			preview(s), shortDuration(token.MinTTL))
	case d > maxLifetime:
		return 0, fmt.Errorf("--expires %s: too long: use at most 3650d, or leave --expires out for a token that does not expire", preview(s))
	}
	return d, nil
}

func (a *app) tokenListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets): actor, access, states, status, expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tokens, err := a.tokenStore(cmd.Context(), false)
			if err != nil {
				return err
			}
			list, err := tokens.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			return report.Tokens(a.io.Out, list, a.reportOptions())
		},
	}
}

func (a *app) tokenRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: every request with it is refused from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if id, err := token.ParseID(args[0]); err == nil || strings.HasPrefix(args[0], token.Prefix) {
				// Never echo a token: it holds the secret.
				hint := "kl token list shows the ids"
				if err == nil {
					hint = "its id is " + id + ": kl token revoke " + id
				}
				return fmt.Errorf("that is a token, not a token id: %s", hint)
			}
			id, err := ulid.ParseStrict(args[0])
			if err != nil {
				return fmt.Errorf("token id %s: not a token id (26 characters of Crockford base32, as kl token list shows; not the token itself)", preview(args[0]))
			}
			tokens, err := a.tokenStore(cmd.Context(), true)
			if err != nil {
				return err
			}
			t, err := tokens.RevokeToken(cmd.Context(), id.String(), a.actor())
			if err != nil {
				return err
			}
			return report.TokenRevoked(a.io.Out, t, a.reportOptions())
		},
	}
}

// tokenStore opens the store (for writing: checked first, engineToWrite)
// as a token.Store.
func (a *app) tokenStore(ctx context.Context, write bool) (token.Store, error) {
	open := a.engine
	if write {
		open = a.engineToWrite
	}
	e, err := open(ctx, false)
	if err != nil {
		return nil, err
	}
	tokens, ok := e.Store.(token.Store)
	if !ok {
		return nil, fmt.Errorf("the store %T keeps no tokens", e.Store)
	}
	return tokens, nil
}
