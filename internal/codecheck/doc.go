// Package codecheck holds repository-wide checks of the house rules that no
// compiler enforces (its tests only; it exports nothing): production
// functions stay under 80 lines (docs/style.md 5), and no package outside the
// engine reads a run's or a marker's stored words for meaning — how a run
// ended is typed (engine.End) and internal/report alone writes its English.
package codecheck
