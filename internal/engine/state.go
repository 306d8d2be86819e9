package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// InitState creates state name with its first version (ADR D5: every
// version has provenance; the first one's mode is "init"). With from == nil
// the state starts empty with a new lineage at serial 0; otherwise from must
// be a Terraform state v4 document, adopted with its own lineage and serial
// so existing saved plans and tooling keep recognising it.
//
// Terraform tells two states apart by lineage, so a lineage belongs to one
// Kilolock state: adopting a document whose lineage another state already
// has would make two diverging copies of one Terraform state, and is
// refused.
//
// Errors: ErrInvalid for a bad name, a document that is not state v4, or a
// serial above tfstate.MaxAdoptSerial (too large to grow);
// ErrConflict when the name exists or another state has the document's
// lineage.
func (e *Engine) InitState(ctx context.Context, name string, from []byte, actor string) (State, error) {
	if err := ValidateStateName(name); err != nil {
		return State{}, err
	}
	var st *tfstate.State
	origin := "file"
	if from == nil {
		origin = "empty"
		st = tfstate.Empty(uuid.NewString(), 0, "1.0.0")
	} else {
		var err error
		st, err = tfstate.Parse(from)
		if err != nil {
			return State{}, Errorf(ErrInvalid, "adopting state %s: %v", name, err)
		}
		if st.Serial > tfstate.MaxAdoptSerial {
			return State{}, Errorf(ErrInvalid, "adopting state %s: serial %d is out of range: want 0 to %d (2^53−1, the largest integer JSON carries exactly; a serial must have room to grow by one per write)", name, st.Serial, int64(tfstate.MaxAdoptSerial))
		}
	}
	if from != nil && st.Lineage != "" {
		if err := e.lineageFree(ctx, name, st.Lineage); err != nil {
			return State{}, err
		}
	}
	doc, err := st.Marshal()
	if err != nil {
		return State{}, fmt.Errorf("encoding state %s: %w", name, err)
	}
	changed, err := parseAddresses(st.Addresses())
	if err != nil {
		return State{}, Errorf(ErrInvalid, "adopting state %s: %v", name, err)
	}
	s, err := e.Store.CreateState(ctx, NewState{
		Name: name, Lineage: st.Lineage, Serial: st.Serial, Snapshot: doc,
		Changed: changed, Resources: st.ResourceCount(), Actor: actor, Origin: origin,
	})
	if errors.Is(err, ErrConflict) {
		return State{}, e.createConflict(ctx, name, st.Lineage, err)
	}
	if err != nil {
		return State{}, err // the store's errors name the state already ("creating state NAME: …")
	}
	return s, nil
}

// createConflict says why CreateState refused name with ErrConflict (err):
// the name exists, or — an adoption racing another past lineageFree —
// another state took the lineage first; then it names that state. When
// neither can be read back, err (the store's own words) stands.
func (e *Engine) createConflict(ctx context.Context, name, lineage string, err error) error {
	if _, gerr := e.Store.GetState(ctx, name); gerr == nil {
		return Errorf(ErrConflict, "creating state %s: a state of that name exists (see `kl state list`)", name)
	}
	if lineage != "" {
		if lerr := e.lineageFree(ctx, name, lineage); errors.Is(lerr, ErrConflict) {
			return lerr
		}
	}
	return err
}

// lineageFree refuses (ErrConflict) when a state other than name already
// has lineage. It lists every state: states are few, and CreateState is
// the check for the name itself. Two adoptions racing past it are caught
// by the store's unique index on lineage (migrations 00003: ErrConflict).
func (e *Engine) lineageFree(ctx context.Context, name, lineage string) error {
	states, err := e.Store.ListStates(ctx)
	if err != nil {
		return fmt.Errorf("creating state %s: listing states to check lineage %s: %w", name, lineage, err)
	}
	for _, o := range states {
		if o.Lineage == lineage && o.Name != name {
			return Errorf(ErrConflict, "creating state %s: state %s already has lineage %s: adopting the same Terraform state twice would fork it; use %s",
				name, o.Name, lineage, o.Name)
		}
	}
	return nil
}

// Pull returns the Terraform state v4 document of a version of state name;
// serial < 0 means the head.
func (e *Engine) Pull(ctx context.Context, name string, serial int64) ([]byte, Version, error) {
	st, err := e.getState(ctx, name)
	if err != nil {
		return nil, Version{}, err
	}
	if serial < 0 {
		serial = st.HeadSerial
	}
	v, err := e.Store.GetVersion(ctx, name, serial)
	if errors.Is(err, ErrNotFound) {
		return nil, Version{}, Errorf(ErrNotFound, "state %s has no version %d (head is %d)", name, serial, st.HeadSerial)
	}
	if err != nil {
		return nil, Version{}, fmt.Errorf("reading version %d of state %s: %w", serial, name, err)
	}
	doc, err := e.Store.Snapshot(ctx, name, serial)
	if err != nil {
		return nil, Version{}, fmt.Errorf("reading snapshot %d of state %s: %w", serial, name, err)
	}
	return doc, v, nil
}

// States lists every state, by name (`kl state list`).
func (e *Engine) States(ctx context.Context) ([]State, error) {
	states, err := e.Store.ListStates(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing states: %w", err)
	}
	return states, nil
}

// State reads one state. Errors: UnknownState's (ErrNotFound naming the
// command that creates it, or ErrInvalid for a name no state can have), or
// the store's.
func (e *Engine) State(ctx context.Context, name string) (State, error) {
	return e.getState(ctx, name)
}

func (e *Engine) getState(ctx context.Context, name string) (State, error) {
	st, err := e.Store.GetState(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return State{}, UnknownState(name)
	}
	if err != nil {
		return State{}, fmt.Errorf("reading state %s: %w", name, err)
	}
	return st, nil
}

// UnknownState is the error for a state name the store does not have: the
// naming rule (ErrInvalid) when name breaks it — no `kl state init` could
// create it — else ErrNotFound with the command that creates it, the name
// quoted for a shell where it needs quoting. (The rule is checked only for
// a missing name: a state stored before the rule was stricter stays usable.)
func UnknownState(name string) error {
	if err := ValidateStateName(name); err != nil {
		return err
	}
	return Errorf(ErrNotFound, "state %q does not exist (create it with `kl state init %s`)", name, ShellQuote(name))
}

// ShellQuote returns s as one POSIX shell word: unchanged when it holds
// only characters no shell treats specially, else in single quotes.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// parseAddresses parses tfstate's address lists (resource-level, or
// instances where a write set names them: ADR 0065) as instance addresses.
func parseAddresses(in []string) (AddressSet, error) {
	out := make([]Address, 0, len(in))
	for _, s := range in {
		a, err := ParseInstanceAddress(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return NewAddressSet(out...), nil
}
