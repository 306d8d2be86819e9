package testprovider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// errNotFound: the API holds no object of that id (deleted outside
// Terraform, or never created).
var errNotFound = errors.New("object not found")

// object is one object of the fake cloud API, as the API stores and returns
// it: one JSON file <api dir>/<id>.json. Nil pointers and maps are null
// values (a configuration that left the attribute out).
type object struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Delay    *string   `json:"delay"`
	Secret   *string   `json:"secret"`
	Settings *settings `json:"settings"`
	Rules    []rule    `json:"rules"`
	// CreatedAt is when the API created the object, to the second.
	CreatedAt time.Time `json:"created_at"`
}

// settings is the settings object; a nil Labels is null, an empty one {}.
type settings struct {
	Size   *int64            `json:"size"`
	Labels map[string]string `json:"labels"`
}

// rule is one rule block.
type rule struct {
	Port int64  `json:"port"`
	CIDR string `json:"cidr"`
}

// api is the fake cloud API: a directory of object files. Every call waits
// delay first (a cloud API's latency), returning early with ctx's error when
// ctx ends — unless ignoreStop (EnvIgnoreStop): then it waits the whole
// delay, as a call without a deadline does. Writes are atomic (a temp file renamed into place), so
// concurrent calls for different objects — Terraform's parallelism — never
// see a half-written file.
type api struct {
	dir        string
	ignoreStop bool
}

// idPattern is what an id the API hands out looks like (and what Get and
// Delete accept: an import of "../x" reads no other file).
var idPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// wait sleeps d, or until ctx ends (its error) unless the API ignores
// Terraform's stop.
func (a api) wait(ctx context.Context, d time.Duration) error {
	if a.ignoreStop {
		ctx = context.WithoutCancel(ctx)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// create stores o under a new id and returns it with ID and CreatedAt set.
func (a api) create(ctx context.Context, o object, delay time.Duration) (object, error) {
	if err := a.wait(ctx, delay); err != nil {
		return object{}, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return object{}, fmt.Errorf("making an object id: %w", err)
	}
	o.ID = hex.EncodeToString(b[:])
	o.CreatedAt = time.Now().UTC().Truncate(time.Second)
	return o, a.put(o)
}

// update replaces the object o.ID with o, keeping its CreatedAt.
func (a api) update(ctx context.Context, o object, delay time.Duration) (object, error) {
	old, err := a.get(ctx, o.ID, delay)
	if err != nil {
		return object{}, err
	}
	o.CreatedAt = old.CreatedAt
	return o, a.put(o)
}

// get reads the object id; errNotFound when there is none.
func (a api) get(ctx context.Context, id string, delay time.Duration) (object, error) {
	if err := a.wait(ctx, delay); err != nil {
		return object{}, err
	}
	if !idPattern.MatchString(id) {
		return object{}, fmt.Errorf("%w: %q is not an object id (16 hex digits)", errNotFound, id)
	}
	b, err := os.ReadFile(a.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return object{}, fmt.Errorf("%w: %s", errNotFound, id)
	}
	if err != nil {
		return object{}, fmt.Errorf("reading object %s: %w", id, err)
	}
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		return object{}, fmt.Errorf("reading object %s: %s: %w", id, a.path(id), err)
	}
	return o, nil
}

// delete removes the object id; one already gone is no error (a delete is
// idempotent, as most cloud APIs make it).
func (a api) delete(ctx context.Context, id string, delay time.Duration) error {
	if err := a.wait(ctx, delay); err != nil {
		return err
	}
	if !idPattern.MatchString(id) {
		return fmt.Errorf("deleting object: %q is not an object id (16 hex digits)", id)
	}
	if err := os.Remove(a.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting object %s: %w", id, err)
	}
	return nil
}

func (a api) path(id string) string { return filepath.Join(a.dir, id+".json") }

// put writes o atomically.
func (a api) put(o object) error {
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding object %s: %w", o.ID, err)
	}
	f, err := os.CreateTemp(a.dir, ".tmp-"+o.ID+"-*")
	if err != nil {
		return fmt.Errorf("writing object %s: %w", o.ID, err)
	}
	_, werr := f.Write(append(b, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), a.path(o.ID))
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("writing object %s: %w", o.ID, werr)
	}
	return nil
}
