// Package action is the Kilolock GitHub Action: action.yml, a composite
// action that builds kl from this repository at the action's own ref, runs
// `kl plan` or `kl apply`, and reports the run with `kl report github`
// (README.md beside it). The Go package holds only its tests, which run the
// action's steps with bash the way the Actions runner would — against a
// GitHub fake, a temp SQLite store and real Terraform — and keep
// testdata/action-steps.yml, the workflow `make lint-actions` hands to
// actionlint so that the action's own run steps are linted too.
package action
