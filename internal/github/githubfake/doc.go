// Package githubfake is a GitHub REST API fake for tests: an
// httptest.Server that enforces the published API description and keeps
// the state a check-run/comment bot needs.
//
// It routes by the OpenAPI subset in testdata/openapi (from @octokit/openapi
// 23.0.2, MIT) and rejects like GitHub: an unknown route or method → 404;
// a request body that violates the operation's schema (missing required
// field, string over maxLength, value outside enum, more items than
// maxItems, wrong JSON type, no anyOf branch matched, bad date-time) →
// 422 {"message":"Validation Failed","errors":[…],"documentation_url":…};
// unparsable JSON → 400 "Problems parsing JSON". On top of the description
// it enforces GitHub rules the description does not carry
// (docs/github.md): comment bodies ≤ 65536 characters, no conclusion
// "stale", status "completed" needs a conclusion, a check run's head_sha
// must be a 40-hex commit SHA ("No commit found for SHA").
//
// Authentication is real: POST /app/installations/{id}/access_tokens takes
// an RS256 app JWT signed with a key registered by NewAppKey (iss = app
// id, exp ≤ 10 minutes ahead) and issues an hour-long token; every other
// call needs "Authorization: token T" or "Bearer T" with a live token (401
// otherwise). Answers are the description's example bodies with the fake's
// state filled in (ids, bodies, timestamps, URLs on the fake).
//
// Stateful: check runs (create, get, update, list for a ref), issue
// comments (create, update, delete, list with Link pagination), reactions,
// pull requests (get, list, files), reviews, collaborator permission,
// tarballs (302 to a link valid 5 minutes), file contents (SetFile; without
// ref, the default branch "main"), commit comparisons (SetCompare: a pull
// request's head is up to date with its base unless a test says how far
// behind it is), commits (AddCommit, SetBranch: get a commit by SHA or
// branch, and the pull requests associated with a commit) and commit
// statuses. Faults:
// FailNext / Fail (status, headers, optionally after the request took
// effect) and ExpireTokens. Every request is logged (Requests).
//
// Webhook payloads from @octokit/webhooks-examples 7.6.1 (MIT) are
// embedded: Webhook, Patch, MergedPullRequest, IssueCommentOnPR,
// MergeGroupEvent, Sign.
package githubfake
