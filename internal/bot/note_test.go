package bot

import "testing"

// TestNoteColumn: a note round-trips through the note column with its
// kind; a column written before notes had a kind reads as its text, a
// refusal when it begins with "⛔".
func TestNoteColumn(t *testing.T) {
	t.Parallel()
	for name, n := range map[string]note{
		"none":    {},
		"refused": {Kind: noteRefused, Text: "⛔ `/kl apply` by @alice refused: **approved** — project `infra` requires an approving review."},
		"failed":  {Kind: noteFailed, Text: "❌ The plan failed: see the `kl plan · infra` check run."},
	} {
		s, err := encodeNote(n)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := decodeNote(s)
		if err != nil || got != n {
			t.Errorf("%s: decodeNote(%q) = %+v, %v; want %+v", name, s, got, err, n)
		}
	}
	for text, kind := range map[string]noteKind{
		"⛔ Apply button by @bob refused: **mergeable** — GitHub says no.":           noteRefused,
		"The pull request was merged without applying plan `P`: it was superseded.": noteSuperseded,
	} {
		if got, err := decodeNote(text); err != nil || got != (note{Kind: kind, Text: text}) {
			t.Errorf("decodeNote(%q) = %+v, %v; want kind %s", text, got, err, kind)
		}
	}
	if _, err := decodeNote("{not json"); err == nil {
		t.Errorf("decodeNote accepted a broken JSON note")
	}
}
