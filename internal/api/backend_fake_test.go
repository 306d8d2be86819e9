package api

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/kilolock/kilolock/internal/engine"
)

// fakeBackend is the engine's backend side as the contract describes it
// (one state at a time, in memory): enough to test the HTTP layer until
// the engine's lands, and to watch what Terraform's client sends. The
// end-to-end tests with the real engine are in internal/cli.
type fakeBackend struct {
	mu     sync.Mutex
	states map[string]*fakeState
	runs   int
	// calls records every call, in order: "lock NAME write|read ID",
	// "write NAME ID", "unlock NAME ID force".
	calls []string
	// refusals records each RecordBackendRefusal input.
	refusals []engine.BackendRefusal
	// unlocks records each UnlockBackend input.
	unlocks []engine.BackendUnlockInput
}

type fakeState struct {
	doc      []byte
	lineage  string
	serial   int64
	versions int
	lock     *engine.BackendLock // nil: unlocked
	write    bool
	pending  []byte // the last checkpoint under the lock
}

var _ Backend = (*fakeBackend)(nil)

// lastUnlock is the last UnlockBackend input, read under the fake's lock
// (the server's goroutines write it).
func (f *fakeBackend) lastUnlock() engine.BackendUnlockInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unlocks[len(f.unlocks)-1]
}

func newFakeBackend() *fakeBackend { return &fakeBackend{states: map[string]*fakeState{}} }

// init makes state name with an empty head of lineage.
func (f *fakeBackend) init(name, lineage string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := fmt.Sprintf(`{"version":4,"terraform_version":"1.11.4","serial":0,"lineage":%q,"outputs":{},"resources":[],"check_results":null}`, lineage)
	f.states[name] = &fakeState{doc: []byte(doc), lineage: lineage}
}

func (f *fakeBackend) state(name string) (*fakeState, error) {
	s, ok := f.states[name]
	if !ok {
		return nil, engine.Errorf(engine.ErrNotFound, "no state %s", name)
	}
	return s, nil
}

func (f *fakeBackend) LockBackend(_ context.Context, in engine.BackendLockInput) (*engine.BackendLock, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mode := map[bool]string{true: "write", false: "read"}[in.Write]
	f.calls = append(f.calls, "lock "+in.State+" "+mode+" "+in.Info.ID)
	s, err := f.state(in.State)
	if err != nil {
		return nil, err
	}
	if s.lock != nil {
		h := s.lock.Info
		h.ID = s.lock.Run.ID
		h.Info = fmt.Sprintf("backend lock run %s by %s (%s)", s.lock.Run.ID, s.lock.Run.Actor, s.lock.Info.Operation)
		return nil, &engine.BackendLockedError{State: in.State, Holder: h}
	}
	f.runs++
	s.lock = &engine.BackendLock{Run: engine.Run{ID: fmt.Sprintf("run-%d", f.runs), State: in.State, Actor: in.Actor}, Info: in.Info}
	s.write, s.pending = in.Write, nil
	return s.lock, nil
}

func (f *fakeBackend) State(_ context.Context, name string) (engine.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.state(name)
	if err != nil {
		return engine.State{}, err
	}
	return engine.State{Name: name, Lineage: s.lineage, HeadSerial: s.serial}, nil
}

func (f *fakeBackend) BackendHead(_ context.Context, state string) ([]byte, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.state(state)
	if err != nil {
		return nil, 0, err
	}
	return s.doc, s.serial, nil
}

func (f *fakeBackend) WriteBackend(_ context.Context, in engine.BackendWriteInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "write "+in.State+" "+in.LockID)
	s, err := f.state(in.State)
	if err != nil {
		return err
	}
	if s.lock == nil || !s.write || (in.LockID != s.lock.Info.ID && in.LockID != s.lock.Run.ID) {
		return engine.Errorf(engine.ErrLocked, "no write lock %s on state %s", in.LockID, in.State)
	}
	var doc struct {
		Lineage string `json:"lineage"`
		Serial  int64  `json:"serial"`
	}
	if err := json.Unmarshal(in.Document, &doc); err != nil {
		return engine.Errorf(engine.ErrInvalid, "not JSON: %v", err)
	}
	if doc.Lineage != s.lineage {
		return engine.Errorf(engine.ErrConflict, "lineage %s is not state %s's lineage %s", doc.Lineage, in.State, s.lineage)
	}
	s.pending = in.Document
	return nil
}

func (f *fakeBackend) UnlockBackend(_ context.Context, in engine.BackendUnlockInput) (*engine.BackendUnlockOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := fmt.Sprintf("unlock %s %s %v", in.State, in.LockID, in.Force)
	if in.ReadOnly {
		call += " read-only"
	}
	f.calls = append(f.calls, call)
	f.unlocks = append(f.unlocks, in)
	s, err := f.state(in.State)
	if err != nil {
		return nil, err
	}
	if s.lock == nil || (!in.Force && in.LockID != s.lock.Info.ID && in.LockID != s.lock.Run.ID) {
		return nil, engine.Errorf(engine.ErrConflict, "state %s is not locked by %s", in.State, in.LockID)
	}
	if in.ReadOnly && (in.Force || s.write || in.LockID != s.lock.Info.ID) {
		return nil, engine.Errorf(engine.ErrForbidden, "a read-only token may release only its own plan's read lock; state %s is held by run %s", in.State, s.lock.Run.ID)
	}
	out := &engine.BackendUnlockOutcome{Run: s.lock.Run}
	if s.pending != nil {
		s.doc, s.versions = s.pending, s.versions+1
		s.serial++
		out.Version = &engine.Version{State: in.State, Serial: s.serial}
	}
	s.lock, s.pending = nil, nil
	return out, nil
}

func (f *fakeBackend) RecordBackendRefusal(_ context.Context, in engine.BackendRefusal) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "refused "+in.State+" "+in.LockID+" "+in.Refusal)
	f.refusals = append(f.refusals, in)
	s, err := f.state(in.State)
	if err != nil {
		return nil, err
	}
	if s.lock == nil || !s.write {
		return nil, nil
	}
	return []string{s.lock.Run.ID}, nil
}

// refused returns the RecordBackendRefusal inputs so far.
func (f *fakeBackend) refused() []engine.BackendRefusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.BackendRefusal(nil), f.refusals...)
}

// log returns the calls so far.
func (f *fakeBackend) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}
