package terraform

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/kilolock/kilolock/internal/engine"
)

var _ engine.UpgradedSnapshotReader = (*Runner)(nil)

// maxPlanStateBytes caps the "tfstate" entry InspectPlanFile reads: it is the
// whole prior state (docs/terraform.md: 1.25 MB for 2000 resources).
const maxPlanStateBytes = 512 << 20

// InspectPlanFile reads the lineage, serial and terraform_version of the
// state snapshot a saved plan was made against: the JSON "tfstate" entry of
// the plan file, which is a zip (docs/terraform.md "Plan JSON": the plan JSON has
// no serial or lineage, the saved plan file does). A plan made with no prior
// state has lineage "" and serial 0. Errors wrap engine.ErrInvalid and say
// what is wrong: not a zip, no tfstate entry, tfstate not JSON.
func (r *Runner) InspectPlanFile(planFile []byte) (engine.PlanFileInfo, error) {
	return inspectPlanFile(planFile)
}

func inspectPlanFile(planFile []byte) (engine.PlanFileInfo, error) {
	var info engine.PlanFileInfo
	zr, err := zip.NewReader(bytes.NewReader(planFile), int64(len(planFile)))
	if err != nil {
		return info, engine.Errorf(engine.ErrInvalid, "inspecting plan file: not a zip archive (%v)", err)
	}
	b, err := readZipEntry(zr, "tfstate", maxPlanStateBytes)
	if err != nil {
		return info, fmt.Errorf("inspecting plan file: %w", err)
	}
	var st struct {
		Version          int    `json:"version"`
		Lineage          string `json:"lineage"`
		Serial           *int64 `json:"serial"`
		TerraformVersion string `json:"terraform_version"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return info, engine.Errorf(engine.ErrInvalid, "inspecting plan file: tfstate entry is not a state JSON document (%v)", err)
	}
	if st.Serial == nil || st.Version == 0 {
		return info, engine.Errorf(engine.ErrInvalid, "inspecting plan file: tfstate entry has no version or serial")
	}
	return engine.PlanFileInfo{Lineage: st.Lineage, Serial: *st.Serial, TerraformVersion: st.TerraformVersion}, nil
}

// UpgradedSnapshot returns the "tfstate-prev" entry of a saved plan: the
// snapshot the plan was made from as Terraform upgraded it to the
// providers' current schemas, before refreshing (Terraform's PrevRunState;
// its lineage and serial are not the snapshot's). nil, nil when the plan
// file has none. Errors wrap engine.ErrInvalid: not a zip, an entry too
// large. It implements engine.UpgradedSnapshotReader.
func (r *Runner) UpgradedSnapshot(planFile []byte) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(planFile), int64(len(planFile)))
	if err != nil {
		return nil, engine.Errorf(engine.ErrInvalid, "reading the upgraded snapshot of a plan file: not a zip archive (%v)", err)
	}
	if !slices.ContainsFunc(zr.File, func(f *zip.File) bool { return f.Name == prevStateEntry }) {
		return nil, nil
	}
	b, err := readZipEntry(zr, prevStateEntry, maxPlanStateBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the upgraded snapshot of a plan file: %w", err)
	}
	return b, nil
}

// prevStateEntry is the plan file's entry holding Terraform's PrevRunState.
const prevStateEntry = "tfstate-prev"

// readZipEntry reads the entry called name, at most limit bytes. A missing
// or oversized entry is an error wrapping engine.ErrInvalid.
func readZipEntry(zr *zip.Reader, name string, limit int64) ([]byte, error) {
	for _, f := range zr.File {
		if f.Name != name {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, engine.Errorf(engine.ErrInvalid, "opening %s entry (%v)", name, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, limit+1))
		if err != nil {
			return nil, engine.Errorf(engine.ErrInvalid, "reading %s entry (%v)", name, err)
		}
		if int64(len(b)) > limit {
			return nil, engine.Errorf(engine.ErrInvalid, "%s entry is larger than %d MiB", name, limit>>20)
		}
		return b, nil
	}
	return nil, engine.Errorf(engine.ErrInvalid, "no %s entry: not a Terraform plan file", name)
}
