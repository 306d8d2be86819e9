package webhook

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedWebhooks is shared/fixtures/github/webhooks, beside the project
// root (as laid out for developers and CI).
var sharedWebhooks = filepath.Join("..", "..", "..", "shared", "fixtures", "github", "webhooks")

// Every real payload in shared/fixtures, unpatched, is answered without a
// 5xx; a 400 only for what the fixtures README lists or a payload without
// an installation (the examples are not all App deliveries).
func TestSharedFixturesNeverFail(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(sharedWebhooks)
	if err != nil {
		t.Skipf("shared fixtures not found: %v", err)
	}
	for _, ent := range entries {
		name := strings.TrimSuffix(ent.Name(), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join(sharedWebhooks, ent.Name()))
			if err != nil {
				t.Fatal(err)
			}
			event, _, _ := strings.Cut(name, ".")
			e := setup(t, nil, nil)
			rec := e.serve(request(t, event, "d-"+name, body))
			switch rec.Code {
			case http.StatusAccepted:
			case http.StatusBadRequest:
				msg := decode(t, rec).Error
				switch {
				case strings.HasPrefix(name, "check_run.rerequested.") && strings.Contains(msg, "parsing time"):
				case strings.HasSuffix(msg, "has no installation.id") && !hasInstallation(t, body):
				default:
					t.Errorf("400 %q, not one the fixtures explain", msg)
				}
			default:
				t.Errorf("status %d %s, want 202 or an explained 400", rec.Code, rec.Body)
			}
		})
	}
}

func hasInstallation(t *testing.T, body []byte) bool {
	t.Helper()
	var p struct {
		Installation *struct {
			ID int64 `json:"id"`
		} `json:"installation"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p.Installation != nil && p.Installation.ID != 0
}
