package bench

import (
	"bytes"
	"testing"
)

func TestTableRender(t *testing.T) {
	t.Parallel()
	tab := &Table{Header: []string{"figure", "kl", "ratio"}}
	tab.Add("concurrency", "3.10 s", "5.94×")
	tab.Add("a|b", "µ") // short row: the last cell renders empty
	tab.Add("x", "y", "z", "dropped")
	var b bytes.Buffer
	if err := tab.Render(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.golden", b.Bytes())
}
