//go:build kltest_newer

package store

import "github.com/pressly/goose/v3"

// The kltest_newer build is the next release as far as the store goes, for
// cmd/klbot's rolling-upgrade test (ADR 0048): one more expand migration —
// a table of its own and a nullable column on runs, which the release
// before writes without knowing it. With kltest_raise too, the release
// after: a migration that raises the level to 4 (read level 3), so the
// release before may read the store but not write to it.
func init() {
	expand := SchemaVersion() + 1
	declared = append(declared, Migration{Version: expand, Kind: Expand, Why: "kltest_newer: a table of its own, a nullable column on runs"})
	extraGoMigrations = append(extraGoMigrations, func(Dialect) *goose.Migration {
		return SQLMigration(expand,
			[]string{`CREATE TABLE kl_test_newer (id BIGINT NOT NULL PRIMARY KEY, note TEXT)`, `ALTER TABLE runs ADD COLUMN test_note TEXT`},
			[]string{`ALTER TABLE runs DROP COLUMN test_note`, `DROP TABLE kl_test_newer`})
	})
	if compatLevel == levelThree.Level {
		return
	}
	raise := expand + 1
	to := Level{Level: compatLevel, ReadLevel: levelThree.Level, Why: "kltest_raise: the fence rules changed"}
	declared = append(declared, Migration{Version: raise, Kind: Raise, Level: to, Why: "kltest_raise: raises the level"})
	extraGoMigrations = append(extraGoMigrations, func(d Dialect) *goose.Migration { return LevelMigration(raise, d, to, levelThree) })
}
