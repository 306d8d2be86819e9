package storebench

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// commitResources is the size of the state BenchmarkCommit10k commits to.
const commitResources = 10_000

// BenchmarkCommit10k measures a terraform-lane commit of a one-resource
// change into a 10,000-resource state stored as a manifest (ADR 0068), as
// the engine makes it: "tx" is the store's Commit alone (the transaction:
// read the head, snapshot-merge, write the version), "commit" adds parsing
// Terraform's result against the plan's base (tfstate.ParseWithBase, as
// the engine's apply does: the base was parsed before Terraform ran) and
// choosing the merge's reads — everything after Terraform returns;
// "commit-parse" is the same with the result parsed alone (tfstate.Parse,
// no base). "slice" reads only the merge's resources of the head
// (CommitRequest.MergeReads, ADR 0068 decision 6); "whole" reads the whole
// head, as every commit did before — the baseline. Each on SQLite and
// PostgreSQL; compare the lines side by side (ns/op, B/op). cpu-ns/op is
// the process's CPU time over the timed parts (user + system, every
// thread: the garbage collector's included, PostgreSQL's server not),
// steadier than ns/op on a shared machine.
func BenchmarkCommit10k(b *testing.B) {
	for _, be := range []struct {
		name string
		open func(b *testing.B) engine.Store
	}{
		{"sqlite", func(b *testing.B) engine.Store {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "commit.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"postgres", func(b *testing.B) engine.Store {
			s, err := postgres.Open(b.Context(), pgtest.DSN(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		for _, mode := range []string{"slice", "whole"} {
			for _, part := range []string{"tx", "commit", "commit-parse"} {
				b.Run(be.name+"/"+mode+"/"+part, func(b *testing.B) {
					benchCommit(b, be.open(b), mode == "slice", part)
				})
			}
		}
	}
}

// benchCommit commits b.N one-resource changes to a fresh 10,000-resource
// state of s, timing the commit (part "commit": and the result's parse
// against its base; "commit-parse": and its parse alone).
func benchCommit(b *testing.B, s engine.Store, slice bool, part string) {
	ctx := b.Context()
	cur := tfstate.SynthesizeTerraformData(commitResources, 10, "lineage-commit", 1)
	doc, err := cur.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateState(ctx, engine.NewState{Name: "commit", Lineage: "lineage-commit", Serial: 1, Snapshot: doc, Resources: commitResources, Actor: "bench", Origin: "bench"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var cpu time.Duration // CPU time of the timed parts: the process's, all threads, GC included
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		serial := int64(i + 2)
		result, written := changeOne(b, cur, i, serial)
		out, err := result.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprintf("01BENCH%019d", i)
		if err := s.CreateRun(ctx, engine.Run{ID: id, Kind: engine.KindApply, State: "commit", Actor: "bench", Status: engine.StatusApplying}); err != nil {
			b.Fatal(err)
		}
		// The plan's base as the engine holds it: parsed from the document
		// Terraform applies to, before Terraform runs.
		base, err := tfstate.Parse(doc)
		if err != nil {
			b.Fatal(err)
		}
		// "tx" gets the result as the engine's parse gives it (its
		// unchanged entries the base's), untimed.
		res, err := tfstate.ParseWithBase(out, base)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0 := cpuTime(b)
		switch part {
		case "commit":
			res, err = tfstate.ParseWithBase(out, base)
		case "commit-parse":
			res, err = tfstate.Parse(out)
		}
		if err != nil {
			b.Fatal(err)
		}
		var reads []engine.Address
		if slice {
			rs, err := tfstate.MergeReads(base, res, written)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				reads = append(reads, engine.Address(r))
			}
		}
		v, err := s.Commit(ctx, engine.CommitRequest{State: "commit", Run: id, MergeReads: reads,
			Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
				h, err := tfstate.Parse(snap)
				if err != nil {
					return engine.CommitResult{}, err
				}
				m, rep, err := tfstate.MergeWith(tfstate.MergeInput{Head: h, Base: base, Result: res, Written: written, Serial: head.Serial + 1})
				if err != nil {
					return engine.CommitResult{}, err
				}
				d, err := m.Marshal()
				changed := make([]engine.Address, len(rep.Changed))
				for j, a := range rep.Changed {
					changed[j] = engine.Address(a)
				}
				return engine.CommitResult{Snapshot: d, Changed: engine.NewAddressSet(changed...), Resources: m.ResourceCount(),
					Provenance: engine.Provenance{Mode: engine.CommitSnapshotMerge}}, err
			}})
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime(b) - cpu0
		b.StopTimer()
		if v.Serial != serial || v.Resources != commitResources {
			b.Fatalf("committed version %d of %d resources; want %d of %d", v.Serial, v.Resources, serial, commitResources)
		}
		cur, doc = result, out
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time (user + system) the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// changeOne is s at serial with resource i%n's value changed, and the
// write set that names it.
func changeOne(b *testing.B, s *tfstate.State, i int, serial int64) (*tfstate.State, []string) {
	b.Helper()
	k := (i * 7919) % len(s.Resources)
	raw := bytes.Replace(s.Resources[k].Raw, []byte(`"value":"`), []byte(`"value":"`+strconv.Itoa(i)+`-`), 1)
	es, err := tfstate.ParseEntries([][]byte{raw})
	if err != nil {
		b.Fatal(err)
	}
	out := *s
	out.Serial = serial
	out.Resources = append([]tfstate.Resource{}, s.Resources...)
	out.Resources[k] = es[0]
	return &out, []string{es[0].Address()}
}
