// Package github is Kilolock's adapter to the GitHub REST API, on
// go-github v62 and ghinstallation v2.11.0: check runs, one sticky comment
// per pull request, reactions, collaborator permissions, pull requests,
// reviews and tarballs — what klbot and `kl report github` need.
//
// Two ways in: NewApp (a GitHub App; App.Installation hands out one cached
// Client per installation, whose token ghinstallation obtains with an
// RS256 JWT and renews) and NewTokenClient (GITHUB_TOKEN in Actions).
// Options.BaseURL points both at GitHub Enterprise Server or at
// githubfake.
//
// Faults follow docs/github.md "Tokens and rate limits": 5xx and network
// errors are retried with bounded exponential backoff (idempotent requests
// in the transport; creates by the operation, which first checks whether
// the failed attempt took effect, so no duplicate comment or check run);
// 403/429 rate limits wait retry-after, or until x-ratelimit-reset, or at
// least a minute doubling, all bounded and cancelled with ctx; an
// installation token GitHub refuses (401) is replaced once, never in a
// loop; a 422 is returned at once with GitHub's message. Limits GitHub
// would refuse (action label ≤ 20 characters …) are checked before
// sending (*ValidationError). Tokens and the private key are never logged.
//
// The bot's own interfaces live with the bot; this package offers
// concrete types.
package github
