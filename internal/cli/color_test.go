package cli

import (
	"testing"
)

// TestUseColor: colour only on a terminal, and not with NO_COLOR set to
// anything (https://no-color.org) nor with TERM=dumb.
func TestUseColor(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  []string
		tty  bool
		want bool
	}{
		"terminal":                {env: []string{"TERM=xterm-256color"}, tty: true, want: true},
		"no TERM":                 {tty: true, want: true},
		"not a terminal":          {env: []string{"TERM=xterm-256color"}},
		"NO_COLOR=1":              {env: []string{"TERM=xterm", "NO_COLOR=1"}, tty: true},
		"NO_COLOR=yes":            {env: []string{"TERM=xterm", "NO_COLOR=yes"}, tty: true},
		"NO_COLOR empty: unset":   {env: []string{"TERM=xterm", "NO_COLOR="}, tty: true, want: true},
		"TERM=dumb":               {env: []string{"TERM=dumb"}, tty: true},
		"TERM=dumb, not terminal": {env: []string{"TERM=dumb"}},
		"TERM=dumb with NO_COLOR": {env: []string{"TERM=dumb", "NO_COLOR=1"}, tty: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := &app{env: tc.env}
			if err := a.loadEnv(t.Context()); err != nil {
				t.Fatalf("loadEnv: %v", err)
			}
			if got := useColor(a.cfg, tc.tty); got != tc.want {
				t.Errorf("useColor(%v, tty %v) = %v, want %v", tc.env, tc.tty, got, tc.want)
			}
		})
	}
}
