package report

import (
	"fmt"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// One hand-built world for every golden: state acme/infra/prod, whose
// plans and applies are realistic engine view values. Alice's plan
// (PR #42, source serial 12) writes module.app and reads module.net;
// bob, carol, erin and frank work beside her.

const (
	stateName = "acme/infra/prod"
	lineage   = "d3b07384-d9a0-4c6b-9f1e-2f4a8c1b5e77"

	planA    = "01J2ZP0A11CE0000000000PLAN"
	replanA  = "01J2ZP0A11CE00000000REPLAN"
	applyA   = "01J2ZP0A11CE000000000APPLY"
	planB    = "01J2ZP0B0B00000000000PLAN0"
	applyB   = "01J2ZP0B0B0000000000APPLY0"
	planC    = "01J2ZP0CA201000000000PLAN0"
	applyC   = "01J2ZP0CA20100000000APPLY0"
	planE    = "01J2ZP0E41N0000000000PLAN0"
	applyE   = "01J2ZP0E41N000000000APPLY0"
	planF    = "01J2ZP0F4A0C000000000PLAN0"
	applyF   = "01J2ZP0F4A0C00000000APPLY0"
	planDave = "01J2ZP0DAFE0000000000PLAN0"
)

var t0 = time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func atp(sec float64) *time.Time { t := at(sec); return &t }

func ptrBool(b bool) *bool { return &b }

var (
	web    = engine.Address("module.app.terraform_data.web")
	worker = engine.Address("module.app.terraform_data.worker")
	cache  = engine.Address("module.app.terraform_data.cache")
	webURL = engine.Address("output.web_url")
	vpc    = engine.Address("module.net.terraform_data.vpc")
	subnet = engine.Address("module.net.terraform_data.subnet")
	shared = engine.Address("module.shared.*")
	dbMain = engine.Address("module.db.terraform_data.main")
	zone   = engine.Address("module.dns.terraform_data.zone")
	record = engine.Address("module.dns.terraform_data.record")
)

func set(as ...engine.Address) engine.AddressSet { return engine.NewAddressSet(as...) }

func pr(n int) *engine.PullRequest {
	return &engine.PullRequest{Repo: "acme/infra", Number: n, URL: fmt.Sprintf("https://github.com/acme/infra/pull/%d", n)}
}

var holder = engine.Holder{Host: "ci-runner-7", PID: 4242}

// footprintA is alice's footprint: writes the app, reads the network and
// (widened) the shared module.
func footprintA() engine.Footprint {
	return engine.Footprint{
		Write: set(web, worker, webURL),
		Read:  set(vpc, subnet, shared),
		Widened: []engine.Widening{{Address: shared, From: "local.subnets in module.app",
			Reason: "locals are not in plan JSON; widened to the module prefix"}},
	}
}

func envelope(actor string, p *engine.PullRequest, serial int64, fp engine.Footprint, start float64) *engine.Envelope {
	return &engine.Envelope{
		Actor: actor, Holder: holder, StartedAt: at(start), FinishedAt: at(start + 18.5),
		State: stateName, Lineage: lineage, SourceSerial: serial,
		Scope:     engine.Scope{Dir: "infra/prod", ChangedFiles: []string{"infra/prod/app.tf"}, Workspace: "default"},
		Footprint: fp, Reservations: fp.Reservations(), Lane: engine.LaneTerraform,
		PlanDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Summary:    engine.PlanSummary{Add: 1, Change: 1, Outputs: 1}, TerraformVersion: "1.5.7",
		PR: p, CommitSHA: "4f2c9e1a7b",
	}
}

// planRunA is alice's reviewed plan in the given status.
func planRunA(status engine.RunStatus, apply string) engine.Run {
	return engine.Run{ID: planA, Kind: engine.KindPlan, State: stateName, Actor: "alice", Holder: holder, Status: status,
		PR: pr(42), CreatedAt: at(0), UpdatedAt: at(18.5), FinishedAt: atp(18.5),
		Envelope: envelope("alice", pr(42), 12, footprintA(), 0), ApplyRun: apply}
}

func planMarkers() []engine.Marker {
	return []engine.Marker{
		{Run: planA, Seq: 1, At: at(18.4), Kind: engine.MarkerWidened, Addresses: set(shared),
			Reason: "local.subnets in module.app: locals are not in plan JSON; widened to the module prefix"},
		{Run: planA, Seq: 2, At: at(18.5), Kind: engine.MarkerPlanned, Serial: 12, Count: 6},
	}
}

// applyRunA is alice's apply of her plan in the given status, ended as end
// says (nil: running, or applied).
func applyRunA(status engine.RunStatus, end *engine.End) engine.Run {
	return engine.Run{ID: applyA, Kind: engine.KindApply, State: stateName, Actor: "alice", Holder: holder, Status: status,
		End: end, PR: pr(42), CreatedAt: at(600), UpdatedAt: at(640), FinishedAt: atp(640),
		PlanRun: planA}
}

// Versions committed by others after alice's source serial 12.
func entry13() engine.SincePlanEntry {
	return engine.SincePlanEntry{Serial: 13, Class: engine.ClassIndependent, Changed: set(zone, record), Run: applyC,
		PlanRun: planC, Actor: "carol", PR: pr(43), CommittedAt: at(300), Mode: engine.CommitSnapshotMerge}
}

func entry14() engine.SincePlanEntry {
	return engine.SincePlanEntry{Serial: 14, Class: engine.ClassReadChanged, Addresses: set(vpc), Changed: set(vpc), Run: applyE,
		PlanRun: planE, Actor: "erin", PR: pr(44), CommittedAt: at(520), Mode: engine.CommitSnapshotMerge}
}

func entry15Write() engine.SincePlanEntry {
	return engine.SincePlanEntry{Serial: 15, Class: engine.ClassWriteChanged, Addresses: set(web), Changed: set(web, dbMain), Run: applyF,
		PlanRun: planF, Actor: "frank", PR: pr(45), CommittedAt: at(580), Mode: engine.CommitSnapshotMerge}
}

func sincePlan(head int64, es ...engine.SincePlanEntry) *engine.SincePlan {
	return &engine.SincePlan{PlanRun: planA, SourceSerial: 12, HeadSerial: head, Entries: es}
}

func summaryOf(sp *engine.SincePlan) *engine.SincePlanSummary {
	s := sp.Summary()
	return &s
}

func version(serial int64, p engine.Provenance, changed engine.AddressSet, created float64) *engine.Version {
	p.CommittedSerial = serial
	return &engine.Version{State: stateName, Serial: serial, Lineage: lineage, CreatedAt: at(created), Changed: changed,
		Provenance: p, Resources: 31, Size: 48213}
}
