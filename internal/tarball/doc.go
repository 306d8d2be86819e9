// Package tarball unpacks a GitHub repository tarball — the .tar.gz of
// GET /repos/{owner}/{repo}/tarball/{ref} — into an empty directory, and
// refuses any archive that would put something outside it.
//
// Its one job is Extract; the rules it implements are docs/github.md's
// "Extract tarballs refusing absolute paths, .., links leaving the root,
// and oversize entries": every refusal wraps ErrUnsafe, and Limits caps
// the entries, the size of one file and the size of all. A pull request's
// code is untrusted (anyone can open one from a fork), so the checkout
// holds regular files and directories, and symbolic links that stay
// inside it — nothing else.
package tarball
