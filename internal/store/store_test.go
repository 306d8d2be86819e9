package store_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store"
)

func TestCheckSnapshot(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		doc     string
		wantErr bool
	}{
		"empty document":           {"", false},
		"matching":                 {`{"version":4,"serial":3,"lineage":"l","resources":[]}`, false},
		"fields absent":            {`{"version":4}`, false},
		"serial later than data":   {`{"resources":[{"serial":9,"lineage":"x"}],"serial":3,"lineage":"l"}`, false},
		"nested fields ignored":    {`{"outputs":{"serial":{"value":9}},"serial":3}`, false},
		"serial differs":           {`{"serial":4,"lineage":"l"}`, true},
		"lineage differs":          {`{"serial":3,"lineage":"other"}`, true},
		"not json":                 {`serial: 3`, true},
		"not an object":            {`[1,2]`, true},
		"serial of the wrong type": {`{"serial":"3"}`, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := store.CheckSnapshot([]byte(tc.doc), "l", 3)
			if tc.wantErr != (err != nil) {
				t.Fatalf("CheckSnapshot(%s) = %v; want error %v", tc.doc, err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("CheckSnapshot error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestSnapshotCompression(t *testing.T) {
	t.Parallel()
	doc := bytes.Repeat([]byte(`{"type":"terraform_data","name":"x"},`), 10_000)
	z, err := store.CompressSnapshot(doc)
	if err != nil {
		t.Fatalf("CompressSnapshot: %v", err)
	}
	if len(z) >= len(doc)/4 {
		t.Fatalf("compressed %d bytes to %d; want a real reduction", len(doc), len(z))
	}
	got, err := store.DecompressSnapshot(z, int64(len(doc)))
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("DecompressSnapshot = %d bytes, %v; want the %d compressed", len(got), err, len(doc))
	}
	if _, err := store.DecompressSnapshot(z, int64(len(doc))+1); err == nil {
		t.Fatal("DecompressSnapshot accepted a wrong stored size")
	}
	if _, err := store.DecompressSnapshot([]byte("not gzip"), 8); err == nil {
		t.Fatal("DecompressSnapshot accepted garbage")
	}
}

func TestWanted(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC)
	req := engine.AcquireRequest{
		State: "s", Run: "R", Holder: engine.Holder{Host: "h", PID: 1}, Lease: time.Minute,
		Reservations: []engine.Reservation{
			{Address: "terraform_data.a", Mode: engine.ModeWrite},
			{Address: "terraform_data.a", Mode: engine.ModeWrite},
			{Address: "terraform_data.a", Mode: engine.ModeRead},
		},
	}
	got := store.Wanted(req, now)
	if len(got) != 2 {
		t.Fatalf("Wanted kept %d rows; want one per (address, mode): 2", len(got))
	}
	for _, r := range got {
		if r.State != "s" || r.Run != "R" || r.Holder != req.Holder || !r.AcquiredAt.Equal(now) || !r.ExpiresAt.Equal(now.Add(time.Minute)) {
			t.Fatalf("Wanted row %+v lacks state, run, holder or lease", r)
		}
	}
}

func equal(a, b engine.AddressSet) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRunLeaseLapsed(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Second)
	tests := map[string]struct {
		kind   engine.RunKind
		status engine.RunStatus
		until  time.Time
		live   bool
		want   bool
	}{
		"plan planning, lapsed":       {engine.KindPlan, engine.StatusPlanning, past, false, true},
		"apply waiting, lapsed":       {engine.KindApply, engine.StatusWaiting, past, false, true},
		"apply applying, lapsed":      {engine.KindApply, engine.StatusApplying, past, false, true},
		"ends exactly now":            {engine.KindApply, engine.StatusWaiting, now, false, true},
		"live lease":                  {engine.KindApply, engine.StatusWaiting, future, false, false},
		"no lease (older kl)":         {engine.KindApply, engine.StatusWaiting, time.Time{}, false, false},
		"live reservations":           {engine.KindApply, engine.StatusApplying, past, true, false},
		"plan claimed by an apply":    {engine.KindPlan, engine.StatusApplying, past, false, false},
		"plan planned":                {engine.KindPlan, engine.StatusPlanned, past, false, false},
		"apply finished":              {engine.KindApply, engine.StatusFailed, past, false, false},
		"apply expired by a previous": {engine.KindApply, engine.StatusLeaseExpired, past, false, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := engine.Run{ID: "01R", Kind: tc.kind, Status: tc.status, LeaseUntil: tc.until}
			if got := store.RunLeaseLapsed(r, tc.live, now); got != tc.want {
				t.Fatalf("RunLeaseLapsed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReleaseExpiredPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ended := now.Add(-time.Minute)
	apply := engine.Run{ID: "01APPLY", Kind: engine.KindApply, Holder: engine.Holder{Host: "ci-7", PID: 42}, PlanRun: "01PLAN"}
	claimed := engine.Run{Kind: engine.KindPlan, Status: engine.StatusApplying, ApplyRun: "01APPLY"}
	tests := map[string]struct {
		plan              engine.Run
		reserved, started bool
		want              engine.RunStatus // "" = unchanged
		reason            string
	}{
		"never reserved": {plan: claimed, want: engine.StatusPlanned},
		"reserved": {plan: claimed, reserved: true, want: engine.StatusFailed,
			reason: "apply run 01APPLY lost its lease before it committed (holder ci-7:42 stopped renewing; its lease ran out at 2030-01-02T03:03:05Z): Terraform may have changed infrastructure; re-plan"},
		"terraform started": {plan: claimed, reserved: true, started: true, want: engine.StatusFailed,
			reason: "apply run 01APPLY lost its lease before it committed (holder ci-7:42 stopped renewing; its lease ran out at 2030-01-02T03:03:05Z); " +
				"Terraform had started applying: `kl run recover 01APPLY` commits what it last wrote, then re-plan"},
		"claimed by another": {plan: engine.Run{Kind: engine.KindPlan, Status: engine.StatusApplying, ApplyRun: "01OTHER"}, started: true},
		"already planned":    {plan: engine.Run{Kind: engine.KindPlan, Status: engine.StatusPlanned, ApplyRun: "01APPLY"}},
		"already applied":    {plan: engine.Run{Kind: engine.KindPlan, Status: engine.StatusApplied, ApplyRun: "01APPLY"}, reserved: true, started: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := tc.plan
			changed := store.ReleaseExpiredPlan(&p, apply, tc.reserved, tc.started, ended, now)
			if changed != (tc.want != "") {
				t.Fatalf("ReleaseExpiredPlan changed = %v, want %v", changed, tc.want != "")
			}
			if !changed {
				if p.Status != tc.plan.Status || !reflect.DeepEqual(p.End, tc.plan.End) || !p.UpdatedAt.IsZero() {
					t.Fatalf("the plan changed: %+v", p)
				}
				return
			}
			if p.Status != tc.want || p.ApplyRun != "01APPLY" || !p.UpdatedAt.Equal(now) {
				t.Fatalf("plan = status %s, apply %s, updated %v; want %s naming 01APPLY", p.Status, p.ApplyRun, p.UpdatedAt, tc.want)
			}
			if got := report.EndText(p.ID, p.End); got != tc.reason {
				t.Fatalf("end %+v reads %q, want %q", p.End, got, tc.reason)
			}
		})
	}
}

func TestNoteApplyStarted(t *testing.T) {
	t.Parallel()
	hint := "Terraform had started applying: `kl run recover 01APPLY` commits what it last wrote"
	lapsed := func(recoverable bool) *engine.End {
		return &engine.End{Cause: engine.CauseLeaseExpired, Holder: engine.Holder{Host: "ci-7", PID: 42},
			LeaseEnd: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Recoverable: recoverable}
	}
	expired := engine.Run{ID: "01APPLY", Kind: engine.KindApply, Status: engine.StatusLeaseExpired, End: lapsed(false)}
	tests := map[string]struct {
		run  engine.Run
		want string // "" = unchanged
	}{
		"expired":        {run: expired, want: "its holder ci-7:42 stopped renewing: the lease on its reservations ran out at 2030-01-02T03:04:05Z; " + hint},
		"without an end": {run: engine.Run{ID: "01APPLY", Kind: engine.KindApply, Status: engine.StatusLeaseExpired}, want: hint},
		"said already":   {run: engine.Run{ID: "01APPLY", Kind: engine.KindApply, Status: engine.StatusLeaseExpired, End: lapsed(true)}},
		"committed": {run: engine.Run{ID: "01APPLY", Kind: engine.KindApply, Status: engine.StatusLeaseExpired, End: lapsed(false),
			CommittedSerial: 7}},
		"still open": {run: engine.Run{ID: "01APPLY", Kind: engine.KindApply, Status: engine.StatusApplying}},
		"a plan":     {run: engine.Run{ID: "01PLAN", Kind: engine.KindPlan, Status: engine.StatusLeaseExpired}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := tc.run
			if r.End != nil {
				e := *r.End
				r.End = &e
			}
			changed := store.NoteApplyStarted(&r)
			if changed != (tc.want != "") {
				t.Fatalf("NoteApplyStarted changed = %v, want %v", changed, tc.want != "")
			}
			want := tc.want
			if want == "" {
				want = report.EndText(tc.run.ID, tc.run.End)
			}
			if got := report.EndText(r.ID, r.End); got != want || r.Status != tc.run.Status {
				t.Fatalf("run = %s, %q; want %s, %q", r.Status, got, tc.run.Status, want)
			}
		})
	}
}
