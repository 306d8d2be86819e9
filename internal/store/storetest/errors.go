package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/kilolock/kilolock/internal/engine"
)

func testErrors(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("Mapping", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		holder := f.apply("s", nil)
		f.mustAcquire("s", holder.ID, time.Minute, w("terraform_data.a"))
		tests := map[string]struct {
			call func() error
			want error
		}{
			"GetState unknown":   {func() error { _, err := f.s.GetState(f.ctx, "nope"); return err }, engine.ErrNotFound},
			"GetVersion unknown": {func() error { _, err := f.s.GetVersion(f.ctx, "s", 9); return err }, engine.ErrNotFound},
			"Snapshot unknown":   {func() error { _, err := f.s.Snapshot(f.ctx, "nope", 0); return err }, engine.ErrNotFound},
			"GetRun unknown":     {func() error { _, err := f.s.GetRun(f.ctx, "nope"); return err }, engine.ErrNotFound},
			"UpdateRun unknown": {func() error {
				_, err := f.s.UpdateRun(f.ctx, "nope", nil, func(*engine.Run) error { return nil })
				return err
			}, engine.ErrNotFound},
			"GetArtifact unknown": {func() error { _, err := f.s.GetArtifact(f.ctx, r.ID, "nope"); return err }, engine.ErrNotFound},
			"Markers unknown run": {func() error { _, err := f.s.Markers(f.ctx, "nope"); return err }, engine.ErrNotFound},
			"CreateState existing": {func() error {
				_, err := f.s.CreateState(f.ctx, NewState("s"))
				return err
			}, engine.ErrConflict},
			"CreateState lineage taken": {func() error {
				// One Terraform lineage is one Kilolock state, even when
				// two adoptions race past the engine's check.
				init := NewState("s2")
				doc, _ := json.Marshal(testDoc{Version: 4, Lineage: lineageOf("s"), Resources: []testResource{}})
				init.Lineage, init.Snapshot = lineageOf("s"), doc
				_, err := f.s.CreateState(f.ctx, init)
				if err != nil && !strings.Contains(err.Error(), "another state already has lineage "+lineageOf("s")) {
					return engine.Errorf(engine.ErrInvalid, "error %q does not name the lineage", err)
				}
				return err
			}, engine.ErrConflict},
			"CreateRun existing": {func() error { return f.s.CreateRun(f.ctx, r) }, engine.ErrConflict},
			"UpdateRun status": {func() error {
				_, err := f.s.UpdateRun(f.ctx, r.ID, []engine.RunStatus{engine.StatusPlanned}, func(*engine.Run) error { return nil })
				return err
			}, engine.ErrConflict},
			"Acquire held": {func() error {
				_, err := f.acquire("s", r.ID, time.Minute, rd("terraform_data.a"))
				return err
			}, engine.ErrConflict},
			"Commit without lease": {func() error {
				_, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: r.ID, RequireReservations: true, Merge: Merge("x")})
				return err
			}, engine.ErrLeaseLost},
			"Renew without lease": {func() error { return f.s.Renew(f.ctx, r.ID, time.Minute) }, engine.ErrLeaseLost},
			"RenewRun unknown":    {func() error { return f.s.RenewRun(f.ctx, "nope", time.Minute) }, engine.ErrNotFound},
			"RenewRun finished": {func() error {
				return f.s.RenewRun(f.ctx, f.run("s", engine.KindApply, engine.StatusApplied).ID, time.Minute)
			}, engine.ErrLeaseLost},
			"Acquire finished run": {func() error {
				_, err := f.acquire("s", f.run("s", engine.KindApply, engine.StatusFailed).ID, time.Minute, w("terraform_data.free"))
				return err
			}, engine.ErrConflict},
		}
		sentinels := []error{engine.ErrNotFound, engine.ErrConflict, engine.ErrLeaseLost, engine.ErrInvalid}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				err := tc.call()
				wantErr(t, name, err, tc.want)
				for _, s := range sentinels {
					if s != tc.want && errors.Is(err, s) {
						t.Fatalf("%s: %v is also %v", name, err, s)
					}
				}
				if msg := err.Error(); msg == "" || unicode.IsUpper([]rune(msg)[0]) {
					t.Fatalf("%s: error %q should start lowercase (docs/style.md 7)", name, msg)
				}
			})
		}
	})

	t.Run("Canceled", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		ctx, cancel := context.WithCancel(f.ctx)
		cancel()
		if _, err := f.s.GetState(ctx, "s"); err == nil {
			t.Fatal("GetState with a canceled context succeeded")
		}
		if _, err := f.s.CreateState(ctx, NewState("c")); err == nil {
			t.Fatal("CreateState with a canceled context succeeded")
		}
		if _, err := f.s.GetState(f.ctx, "c"); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a canceled CreateState stored the state: %v", err)
		}
	})
}
