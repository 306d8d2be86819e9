package storetest

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// stressPool is the address pool the reservation stress test draws from:
// overlapping resources, a module prefix, an output and the whole state.
var stressPool = []engine.Address{
	"terraform_data.a",
	"terraform_data.b",
	"terraform_data.c",
	"module.app.terraform_data.x",
	"module.app.terraform_data.y",
	"module.app.*",
	"output.url",
	"*",
}

func testConcurrency(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("NoConflictingReservationsHeldAtOnce", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		const workers = 16
		const rounds = 25
		const budget = 3 * time.Second
		runs := make([]engine.Run, workers)
		for i := range runs {
			runs[i] = f.apply("s", nil)
		}
		var acquired, refused, samples atomic.Int64
		deadline := time.Now().Add(budget)
		stop := make(chan struct{})
		var checker sync.WaitGroup
		checker.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rs, err := f.s.Reservations(f.ctx, "s")
				if err != nil {
					t.Errorf("Reservations: %v", err)
					return
				}
				samples.Add(1)
				if a, b, bad := conflictingPair(rs); bad {
					t.Errorf("conflicting reservations held at once: run %s %s %s and run %s %s %s",
						a.Run, a.Mode, a.Address, b.Run, b.Mode, b.Address)
					return
				}
				time.Sleep(200 * time.Microsecond) // leave the CPU to the writers
			}
		})
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), 42))
				for range rounds {
					if time.Now().After(deadline) {
						return
					}
					want := randomSet(rng)
					res, err := f.acquire("s", runs[i].ID, time.Minute, want...)
					var ce *engine.ConflictError
					switch {
					case errors.As(err, &ce):
						refused.Add(1)
						for _, bl := range ce.Blockers {
							if bl.Run == runs[i].ID || len(bl.Addresses) == 0 {
								t.Errorf("worker %d: bad blocker %+v", i, bl)
							}
						}
						continue
					case err != nil:
						t.Errorf("worker %d: Acquire: %v", i, err)
						return
					}
					acquired.Add(1)
					if a, b, bad := conflictingPair(append(append([]engine.Reservation{}, res.Held...), res.Others...)); bad {
						t.Errorf("worker %d acquired %s %s beside run %s's %s %s", i, a.Mode, a.Address, b.Run, b.Mode, b.Address)
					}
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					if err := f.s.Release(f.ctx, runs[i].ID); err != nil {
						t.Errorf("worker %d: Release: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		checker.Wait()
		t.Logf("%d acquired, %d refused, %d samples checked", acquired.Load(), refused.Load(), samples.Load())
		if acquired.Load() == 0 || refused.Load() == 0 || samples.Load() == 0 {
			t.Fatalf("the stress test did not exercise both outcomes: %d acquired, %d refused, %d samples",
				acquired.Load(), refused.Load(), samples.Load())
		}
	})
}

// randomSet draws 1–3 addresses of stressPool with random modes; the whole
// state "*" comes up rarely so that other sets get a chance.
func randomSet(rng *rand.Rand) []engine.Reservation {
	n := 1 + rng.IntN(3)
	out := make([]engine.Reservation, 0, n)
	for range n {
		a := stressPool[rng.IntN(len(stressPool))]
		if a == engine.AllAddresses && rng.IntN(4) != 0 {
			a = stressPool[rng.IntN(len(stressPool)-1)]
		}
		mode := engine.ModeRead
		if rng.IntN(2) == 0 {
			mode = engine.ModeWrite
		}
		out = append(out, engine.Reservation{Address: a, Mode: mode})
	}
	return out
}

// conflictingPair returns two reservations of different runs that conflict.
func conflictingPair(rs []engine.Reservation) (engine.Reservation, engine.Reservation, bool) {
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if rs[i].Run != rs[j].Run && rs[i].ConflictsWith(rs[j]) {
				return rs[i], rs[j], true
			}
		}
	}
	return engine.Reservation{}, engine.Reservation{}, false
}
