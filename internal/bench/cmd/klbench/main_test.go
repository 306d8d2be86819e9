package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestRunRefusesBadArguments(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		args []string
		want string
	}{
		"unknown figure": {[]string{"-only", "speed"}, `unknown figure "speed"`},
		"extra argument": {[]string{"now"}, "unexpected arguments"},
		"unknown flag":   {[]string{"-fast"}, "flag provided but not defined"},
		"tiny native":    {[]string{"-only", "native", "-native-resources", "3"}, "-native-resources 3: want at least 10"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := run(context.Background(), tc.args, nil, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}
