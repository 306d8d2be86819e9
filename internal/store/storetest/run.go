package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// fullRun returns a run with every field set, for round trips.
func fullRun(state string) engine.Run {
	ts := now()
	fin := ts.Add(3 * time.Second)
	pr := &engine.PullRequest{Repo: "acme/infra", Number: 7, HeadSHA: "deadbeef", URL: "https://github.com/acme/infra/pull/7"}
	return engine.Run{
		ID:         newID(),
		Kind:       engine.KindPlan,
		State:      state,
		Actor:      "octocat",
		Holder:     engine.Holder{Host: "runner-1", PID: 99},
		Status:     engine.StatusPlanned,
		End:        &engine.End{Cause: engine.CauseWaiting, Blockers: []engine.Blocker{{Run: "01OTHER", Addresses: engine.AddressSet{"terraform_data.a"}}}},
		PR:         pr,
		CreatedAt:  ts,
		UpdatedAt:  ts.Add(time.Second),
		FinishedAt: &fin,
		LeaseUntil: ts.Add(time.Minute),
		Envelope: &engine.Envelope{
			Actor:        "octocat",
			Holder:       engine.Holder{Host: "runner-1", PID: 99},
			StartedAt:    ts,
			FinishedAt:   fin,
			State:        state,
			Lineage:      lineageOf(state),
			SourceSerial: 12,
			Scope: engine.Scope{
				Dir: "infra/prod", Targets: []string{"module.app"}, ChangedFiles: []string{"app.tf"},
				Workspace: "default", VarFiles: []string{"prod.tfvars"},
			},
			Footprint: engine.Footprint{
				Write: engine.NewAddressSet("module.app.terraform_data.web", "output.url"),
				Read:  engine.NewAddressSet("module.net.*", "data.terraform_remote_state.net"),
				Widened: []engine.Widening{{
					Address: "module.net.*", From: "local.subnets in module.net", Reason: "dynamic reference",
				}},
			},
			Reservations: []engine.Reservation{
				{Address: "module.app.terraform_data.web", Mode: engine.ModeWrite},
				{Address: "module.net.*", Mode: engine.ModeRead},
			},
			Lane:             engine.LaneNative,
			Slice:            &engine.Slice{Roots: engine.NewAddressSet("module.app.terraform_data.web"), Closure: engine.NewAddressSet("module.net.*"), Proved: true},
			PlanDigest:       "sha256:abcdef",
			Summary:          engine.PlanSummary{Add: 1, Change: 2, Destroy: 3, Replace: 4, Move: 5, Read: 6, Outputs: 1, Targets: true},
			TerraformVersion: "1.5.7",
			PR:               pr,
			CommitSHA:        "deadbeef",
		},
		ApplyRun:        "01APPLY",
		ReplanOf:        "01REVIEWED",
		PlanRun:         "01PLAN",
		CommittedSerial: 13,
		AllowedBecause: []engine.Fact{{
			Kind: engine.FactDisjointWrites, Run: "01OTHER", PR: pr,
			Addresses: engine.NewAddressSet("terraform_data.a"), Serials: []int64{13, 14},
			SourceSerial: 12, HeadSerial: 14,
			OtherWrite: engine.NewAddressSet("terraform_data.b"), OwnWrite: engine.NewAddressSet("terraform_data.c"),
		}},
		SincePlan: &engine.SincePlan{
			PlanRun: "01PLAN", SourceSerial: 12, HeadSerial: 13,
			Entries: []engine.SincePlanEntry{{
				Serial: 13, Class: engine.ClassReadChanged, Addresses: engine.NewAddressSet("module.net.terraform_data.x"),
				Changed: engine.NewAddressSet("module.net.terraform_data.x"), Run: "01R", PlanRun: "01P", Actor: "bob",
				PR: pr, CommittedAt: ts, Mode: engine.CommitSnapshotMerge,
			}},
		},
	}
}

func testRuns(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := fullRun("s")
		if err := f.s.CreateRun(f.ctx, r); err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		diff(t, "GetRun", f.getRun(r.ID), r)
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		before := time.Now().Add(-time.Second)
		r := engine.Run{ID: newID(), Kind: engine.KindApply, State: "s", Status: engine.StatusWaiting}
		if err := f.s.CreateRun(f.ctx, r); err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		got := f.getRun(r.ID)
		if got.CreatedAt.Before(before) || !got.UpdatedAt.Equal(got.CreatedAt) || got.CreatedAt.Location() != time.UTC {
			t.Fatalf("CreatedAt %v, UpdatedAt %v; want now, equal, UTC", got.CreatedAt, got.UpdatedAt)
		}
	})

	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindPlan, engine.StatusPlanned)
		err := f.s.CreateRun(f.ctx, r)
		wantErr(t, "CreateRun twice", err, engine.ErrConflict)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		tests := map[string]engine.Run{
			"no id":     {Kind: engine.KindPlan, State: "s", Status: engine.StatusPlanned},
			"bad kind":  {ID: newID(), Kind: "deploy", State: "s", Status: engine.StatusPlanned},
			"no state":  {ID: newID(), Kind: engine.KindPlan, Status: engine.StatusPlanned},
			"no status": {ID: newID(), Kind: engine.KindPlan, State: "s"},
		}
		for name, r := range tests {
			t.Run(name, func(t *testing.T) {
				wantErr(t, "CreateRun", f.s.CreateRun(f.ctx, r), engine.ErrInvalid)
			})
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		_, err := f.s.GetRun(f.ctx, "nope")
		wantErr(t, "GetRun", err, engine.ErrNotFound)
		err = f.s.CreateRun(f.ctx, engine.Run{ID: newID(), Kind: engine.KindPlan, State: "nope", Status: engine.StatusPlanning})
		wantErr(t, "CreateRun on an unknown state", err, engine.ErrNotFound)
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		p1 := f.run("a", engine.KindPlan, engine.StatusPlanned).ID
		p2 := f.run("a", engine.KindPlan, engine.StatusApplied).ID
		a1 := f.run("a", engine.KindApply, engine.StatusApplying).ID
		p3 := f.run("b", engine.KindPlan, engine.StatusPlanned).ID
		a2 := f.run("b", engine.KindApply, engine.StatusFailed).ID
		p4 := f.run("a", engine.KindPlan, engine.StatusStale).ID
		tests := map[string]struct {
			q    engine.RunQuery
			want []string
		}{
			"all newest first":   {engine.RunQuery{}, []string{p4, a2, p3, a1, p2, p1}},
			"state":              {engine.RunQuery{State: "a"}, []string{p4, a1, p2, p1}},
			"kind":               {engine.RunQuery{Kind: engine.KindApply}, []string{a2, a1}},
			"statuses":           {engine.RunQuery{Statuses: []engine.RunStatus{engine.StatusPlanned, engine.StatusStale}}, []string{p4, p3, p1}},
			"all filters":        {engine.RunQuery{State: "a", Kind: engine.KindPlan, Statuses: []engine.RunStatus{engine.StatusPlanned}}, []string{p1}},
			"limit":              {engine.RunQuery{Limit: 2}, []string{p4, a2}},
			"before":             {engine.RunQuery{Before: a2, Limit: 2}, []string{p3, a1}},
			"before with filter": {engine.RunQuery{State: "a", Before: a1}, []string{p2, p1}},
			"nothing matches":    {engine.RunQuery{State: "c"}, nil},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rs, err := f.s.ListRuns(f.ctx, tc.q)
				if err != nil {
					t.Fatalf("ListRuns: %v", err)
				}
				var got []string
				for _, r := range rs {
					got = append(got, r.ID)
				}
				diff(t, "ListRuns", got, tc.want)
			})
		}
		t.Run("paging", func(t *testing.T) {
			t.Parallel()
			var got []string
			q := engine.RunQuery{Limit: 4}
			for range 3 {
				rs, err := f.s.ListRuns(f.ctx, q)
				if err != nil {
					t.Fatalf("ListRuns: %v", err)
				}
				for _, r := range rs {
					got = append(got, r.ID)
				}
				if len(rs) < q.Limit {
					break
				}
				q.Before = rs[len(rs)-1].ID
			}
			diff(t, "pages", got, []string{p4, a2, p3, a1, p2, p1})
		})
		t.Run("negative limit", func(t *testing.T) {
			t.Parallel()
			_, err := f.s.ListRuns(f.ctx, engine.RunQuery{Limit: -1})
			wantErr(t, "ListRuns", err, engine.ErrInvalid)
		})
	})

	t.Run("ListDefaultLimit", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		for range 53 {
			f.run("s", engine.KindPlan, engine.StatusPlanned)
		}
		rs, err := f.s.ListRuns(f.ctx, engine.RunQuery{})
		if err != nil || len(rs) != 50 {
			t.Fatalf("ListRuns default page: %d runs, %v; want 50", len(rs), err)
		}
	})

	t.Run("UpdateRunStatusCheck", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		tests := map[string]struct {
			status   engine.RunStatus
			applyRun string
			from     []engine.RunStatus
			wantErr  *engine.StatusError
		}{
			"allowed": {status: engine.StatusPlanned, from: []engine.RunStatus{engine.StatusPlanned}},
			"one of two": {status: engine.StatusStale,
				from: []engine.RunStatus{engine.StatusPlanned, engine.StatusStale}},
			"any status":  {status: engine.StatusApplied},
			"not allowed": {status: engine.StatusApplying, applyRun: "01WINNER", from: []engine.RunStatus{engine.StatusPlanned}},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := f.run("s", engine.KindPlan, tc.status, func(r *engine.Run) { r.ApplyRun = tc.applyRun })
				got, err := f.s.UpdateRun(f.ctx, r.ID, tc.from, func(r *engine.Run) error {
					r.End = &engine.End{Cause: engine.CauseFailed, Step: engine.StepCommit, Err: "updated"}
					return nil
				}, engine.Marker{Kind: engine.MarkerReserved})
				if name == "not allowed" {
					var se *engine.StatusError
					if !errors.As(err, &se) {
						t.Fatalf("UpdateRun: %v; want a *engine.StatusError", err)
					}
					diff(t, "StatusError", *se, engine.StatusError{
						Run: r.ID, Kind: engine.KindPlan, Status: engine.StatusApplying,
						Want: []engine.RunStatus{engine.StatusPlanned}, By: "01WINNER",
					})
					wantErr(t, "UpdateRun", err, engine.ErrConflict)
					if f.getRun(r.ID).End != nil || len(f.markers(r.ID)) != 0 {
						t.Fatal("a refused UpdateRun changed the run or added markers")
					}
					return
				}
				if err != nil {
					t.Fatalf("UpdateRun: %v", err)
				}
				if got.End == nil || got.End.Err != "updated" || got.UpdatedAt.Before(r.UpdatedAt) {
					t.Fatalf("UpdateRun returned %+v", got)
				}
				diff(t, "stored run", f.getRun(r.ID), got)
				if ms := f.markers(r.ID); len(ms) != 1 || ms[0].Kind != engine.MarkerReserved {
					t.Fatalf("markers = %v; want one reserved", kinds(ms))
				}
			})
		}
	})

	t.Run("UpdateRunCallbackError", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindPlan, engine.StatusPlanned)
		boom := errors.New("boom")
		_, err := f.s.UpdateRun(f.ctx, r.ID, nil, func(r *engine.Run) error {
			r.Status = engine.StatusFailed
			return boom
		}, engine.Marker{Kind: engine.MarkerFailed})
		wantErr(t, "UpdateRun", err, boom)
		diff(t, "run after a failed update", f.getRun(r.ID), r)
		if ms := f.markers(r.ID); len(ms) != 0 {
			t.Fatalf("markers = %v; want none", kinds(ms))
		}
	})

	t.Run("UpdateRunKeepsID", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindPlan, engine.StatusPlanned)
		_, err := f.s.UpdateRun(f.ctx, r.ID, nil, func(r *engine.Run) error { r.ID = "other"; return nil })
		wantErr(t, "UpdateRun changing the id", err, engine.ErrInvalid)
		_, err = f.s.UpdateRun(f.ctx, "nope", nil, func(*engine.Run) error { return nil })
		wantErr(t, "UpdateRun of an unknown run", err, engine.ErrNotFound)
	})

	t.Run("ConcurrentClaimers", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		plan := f.run("s", engine.KindPlan, engine.StatusPlanned)
		const n = 8
		appliers := make([]string, n)
		for i := range appliers {
			appliers[i] = newID()
		}
		start := make(chan struct{})
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range appliers {
			wg.Go(func() {
				<-start
				_, errs[i] = f.s.UpdateRun(f.ctx, plan.ID, []engine.RunStatus{engine.StatusPlanned}, func(r *engine.Run) error {
					r.Status, r.ApplyRun = engine.StatusApplying, appliers[i]
					return nil
				}, engine.Marker{Kind: engine.MarkerReserved, Other: appliers[i]})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("appliers %d and %d both claimed the plan", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("no applier claimed the plan: %v", errs)
		}
		for i, err := range errs {
			if i == winner {
				continue
			}
			var se *engine.StatusError
			if !errors.As(err, &se) || se.By != appliers[winner] || se.Status != engine.StatusApplying {
				t.Fatalf("loser %d: %v; want a *StatusError by %s", i, err, appliers[winner])
			}
		}
		if got := f.getRun(plan.ID); got.ApplyRun != appliers[winner] {
			t.Fatalf("plan ApplyRun = %s; want the winner %s", got.ApplyRun, appliers[winner])
		}
		if ms := f.markers(plan.ID); len(ms) != 1 || ms[0].Other != appliers[winner] {
			t.Fatalf("markers = %+v; want only the winner's", ms)
		}
	})
}
