package klyaml

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// validGlob checks a when_modified pattern: path.Match syntax per path
// segment, "**" alone as a segment for any number of directories.
func validGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty pattern")
	}
	if path.IsAbs(g) {
		return fmt.Errorf("must be relative to the project directory")
	}
	for _, seg := range strings.Split(g, "/") {
		if seg != "**" && strings.Contains(seg, "**") {
			return fmt.Errorf("\"**\" must be a whole path segment")
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("bad pattern: %v", err)
		}
	}
	return nil
}

// matchGlob reports whether name (a slash path) matches pattern: segments
// match with path.Match, "**" matches zero or more whole segments.
func matchGlob(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// Touches returns the changed files (repository-relative slash paths) that
// touch project p: those matching one of its when_modified globs, each glob
// taken relative to p.Dir ("../modules/**" reaches a sibling directory).
func (p Project) Touches(changed []string) []string {
	var out []string
	for _, f := range changed {
		f = path.Clean(f)
		for _, g := range p.WhenModified {
			if matchGlob(path.Join(p.Dir, g), f) {
				out = append(out, f)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Selection is which projects a push plans: Touched by name with the
// changed files that touch each, and the names left Untouched.
type Selection struct {
	Touched   map[string][]string
	Order     []string // touched project names, in kl.yaml order
	Untouched []string
}

// Select picks the projects of cfg that the changed files touch (a project
// is planned on a push only when one of its when_modified globs matches).
func Select(cfg *Config, changed []string) Selection {
	s := Selection{Touched: map[string][]string{}}
	for _, p := range cfg.Projects {
		if files := p.Touches(changed); len(files) > 0 {
			s.Touched[p.Name] = files
			s.Order = append(s.Order, p.Name)
		} else {
			s.Untouched = append(s.Untouched, p.Name)
		}
	}
	return s
}
