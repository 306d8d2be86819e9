package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/token"
)

// TestBackendForceUnlockOfAFence runs the API over the real engine on
// SQLite: a `terraform apply`'s backend lock whose lease runs out before
// its Terraform unlocks is a fence, and `terraform force-unlock` (an
// empty UNLOCK) is refused — 409, Terraform's "Unexpected HTTP response
// code 409" — with a body and a log record naming the fence and the kl
// command that lifts it, and a mark in the fence's story that kl status
// shows (issue 14 §3: force-unlock lifts only a live backend lock).
func TestBackendForceUnlockOfAFence(t *testing.T) {
	t.Parallel()
	newStore := stores["sqlite"]
	var eng *engine.Engine
	f := setup(t, func(t *testing.T) token.Store {
		st := newStore(t)
		eng = engine.New(st.(engine.Store), nil, slog.New(slog.DiscardHandler))
		eng.BackendLockTTL = time.Second
		return st
	}, Options{Backend: lazyBackend{&eng}})
	if _, err := eng.InitState(t.Context(), "acme/prod", nil, "tester"); err != nil {
		t.Fatal(err)
	}
	writer := "Bearer " + f.mint("ops", nil)
	p := BackendPath + "acme/prod"
	code, body, _ := f.send("LOCK", p, writer, lockInfo("tf-1", engine.OperationTypeApply), nil)
	if code != 200 {
		t.Fatalf("LOCK: %d %s", code, body)
	}
	time.Sleep(1300 * time.Millisecond) // its Terraform died: the lease runs out
	code, body, _ = f.send("UNLOCK", p, writer, "", nil)
	var doc errorDocument
	if err := json.Unmarshal([]byte(body), &doc); err != nil || code != 409 {
		t.Fatalf("force-unlock of a fence: %d %s, want 409", code, body)
	}
	st, err := eng.Status(t.Context(), "acme/prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Fenced) != 1 || st.Fenced[0].ForceUnlockRefused == nil || st.Fenced[0].ForceUnlockRefused.By != "ops" {
		t.Fatalf("kl status after the refused force-unlock: %+v, want the fence with the refusal by ops", st.Fenced)
	}
	run := st.Fenced[0].Run.ID
	for _, want := range []string{
		"force-unlocking state acme/prod: backend lock run " + run + " (terraform apply by ops) is a fence: its lease ran out at",
		"it wrote no checkpoint, so there is nothing to recover: after checking the real objects, `kl run unfence " + run + " --reason TEXT` lifts it",
		"force-unlock lifts only a live backend lock, never a fence",
	} {
		if !strings.Contains(doc.Error, want) {
			t.Errorf("the 409 says %q, want %q", doc.Error, want)
		}
		if !strings.Contains(f.log.String(), want) {
			t.Errorf("the request log does not say %q:\n%s", want, f.log.String())
		}
	}
	if code, body, _ := f.send("LOCK", p, writer, lockInfo("tf-2", engine.OperationTypeApply), nil); code != 423 || !strings.Contains(body, "fences *") {
		t.Errorf("LOCK after the refused force-unlock: %d %s, want 423 naming the fence", code, body)
	}
}

// lazyBackend is the engine *e once setup made it (the engine needs the
// store setup opens).
type lazyBackend struct{ e **engine.Engine }

var _ Backend = lazyBackend{}

func (b lazyBackend) State(ctx context.Context, name string) (engine.State, error) {
	return (*b.e).State(ctx, name)
}

func (b lazyBackend) LockBackend(ctx context.Context, in engine.BackendLockInput) (*engine.BackendLock, error) {
	return (*b.e).LockBackend(ctx, in)
}

func (b lazyBackend) BackendHead(ctx context.Context, state string) ([]byte, int64, error) {
	return (*b.e).BackendHead(ctx, state)
}

func (b lazyBackend) WriteBackend(ctx context.Context, in engine.BackendWriteInput) error {
	return (*b.e).WriteBackend(ctx, in)
}

func (b lazyBackend) RecordBackendRefusal(ctx context.Context, in engine.BackendRefusal) ([]string, error) {
	return (*b.e).RecordBackendRefusal(ctx, in)
}

func (b lazyBackend) UnlockBackend(ctx context.Context, in engine.BackendUnlockInput) (*engine.BackendUnlockOutcome, error) {
	return (*b.e).UnlockBackend(ctx, in)
}
