package bot

import (
	"testing"
)

func TestCodeListOr(t *testing.T) {
	t.Parallel()
	if got := codeListOr(nil, "none"); got != "none" {
		t.Errorf("empty: %q", got)
	}
	if got := codeListOr([]string{"a", "b"}, "none"); got != "`a`, `b`" {
		t.Errorf("two: %q", got)
	}
}
