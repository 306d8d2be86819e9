package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/kilolock/kilolock/internal/engine"
)

// `kl state output` (ADR 0055): a version's root outputs in the shapes of
// `terraform output` (Terraform 1.11, measured: docs/terraform.md "Output
// values"), sensitive values withheld.

// SchemaStateOutput is the document of `kl state output --json`.
const SchemaStateOutput = "kilolock/state-output/v1"

// Sensitive is what stands for a sensitive value, as `terraform output`
// prints it.
const Sensitive = "<sensitive>"

// Outputs renders the outputs of a version (engine.Outputs). Text is
// `terraform output`'s: "NAME = VALUE" per output, by name — or, with
// one, the value alone — VALUE as Terraform writes it (strings quoted,
// multi-line strings as heredocs, tolist/toset/tomap for collections), a
// sensitive value as <sensitive>. JSON is a kilolock/state-output/v1
// document whose "outputs" member is `terraform output -json`'s object
// ({"NAME": {"sensitive", "type", "value"}}), a sensitive output without
// its "value". Errors: a value whose JSON does not match its type.
func Outputs(w io.Writer, out *engine.Outputs, one bool, o Options) error {
	if o.Format == JSON {
		return outputsJSON(w, out)
	}
	var b strings.Builder
	for _, x := range out.Outputs {
		v := Sensitive
		if !x.Sensitive || x.Value != nil {
			s, err := formatOutput(x)
			if err != nil {
				return err
			}
			v = s
		}
		if one {
			b.WriteString(v + "\n")
			continue
		}
		b.WriteString(x.Name + " = " + v + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RawOutput writes one output's value as `terraform output -raw` does: a
// string as it is, a number or a bool as its literal, no newline after.
// Errors: null, or a list, map, set, object or tuple (as Terraform's:
// "use --json").
func RawOutput(w io.Writer, x engine.Output) error {
	v, err := outputValue(x)
	if err != nil {
		return err
	}
	if v.IsNull() {
		return fmt.Errorf("output %q is null: --raw prints strings, numbers and bools only", x.Name)
	}
	var s string
	switch v.Type() {
	case cty.String:
		s = v.AsString()
	case cty.Number:
		s = v.AsBigFloat().Text('f', -1)
	case cty.Bool:
		s = strconv.FormatBool(v.True())
	default:
		return fmt.Errorf("output %q is %s: --raw prints strings, numbers and bools only; use --json (as terraform output -raw)", x.Name, friendlyType(v.Type()))
	}
	_, err = io.WriteString(w, s)
	return err
}

// friendlyType is "a list", "an object", … for a value's type.
func friendlyType(t cty.Type) string {
	switch {
	case t.IsListType():
		return "a list"
	case t.IsSetType():
		return "a set"
	case t.IsMapType():
		return "a map"
	case t.IsObjectType():
		return "an object"
	case t.IsTupleType():
		return "a tuple"
	}
	return t.FriendlyName()
}

// outputValue decodes an output's value by its type.
func outputValue(x engine.Output) (cty.Value, error) {
	t, err := ctyjson.UnmarshalType(x.Type)
	if err != nil {
		return cty.NilVal, fmt.Errorf("output %q: reading its type: %w", x.Name, err)
	}
	v, err := ctyjson.Unmarshal(x.Value, t)
	if err != nil {
		return cty.NilVal, fmt.Errorf("output %q: reading its value as %s: %w", x.Name, t.FriendlyName(), err)
	}
	return v, nil
}

func formatOutput(x engine.Output) (string, error) {
	v, err := outputValue(x)
	if err != nil {
		return "", err
	}
	return formatValue(v, 0), nil
}

// formatValue writes v as `terraform output` does, at indent (spaces).
func formatValue(v cty.Value, indent int) string {
	if v.IsNull() {
		return formatNull(v.Type())
	}
	t := v.Type()
	switch {
	case t == cty.String:
		if s, ok := heredoc(v.AsString(), indent); ok {
			return s
		}
		return strconv.Quote(v.AsString())
	case t == cty.Number:
		return v.AsBigFloat().Text('f', -1)
	case t == cty.Bool:
		return strconv.FormatBool(v.True())
	case t.IsObjectType():
		return formatMapping(v, indent)
	case t.IsTupleType():
		return formatSequence(v, indent)
	case t.IsListType():
		return "tolist(" + formatSequence(v, indent) + ")"
	case t.IsSetType():
		return "toset(" + formatSequence(v, indent) + ")"
	case t.IsMapType():
		return "tomap(" + formatMapping(v, indent) + ")"
	}
	return v.GoString()
}

// formatNull is a null of type t: "null", or Terraform's conversion of
// null to t ("tostring(null)", "tolist(null) /* of string */").
func formatNull(t cty.Type) string {
	switch {
	case t == cty.DynamicPseudoType:
		return "null"
	case t == cty.String:
		return "tostring(null)"
	case t == cty.Number:
		return "tonumber(null)"
	case t == cty.Bool:
		return "tobool(null)"
	case t.IsListType():
		return "tolist(null) /* of " + t.ElementType().FriendlyName() + " */"
	case t.IsSetType():
		return "toset(null) /* of " + t.ElementType().FriendlyName() + " */"
	case t.IsMapType():
		return "tomap(null) /* of " + t.ElementType().FriendlyName() + " */"
	}
	return "null /* " + t.FriendlyName() + " */"
}

// heredoc writes a string of more than one line as a heredoc: "<<EOT" at
// the top level, "<<-EOT" nested, each line and the delimiter at indent;
// the delimiter grows by "_" while a line is it.
func heredoc(s string, indent int) (string, bool) {
	lines := strings.Split(s, "\n")
	if len(lines) < 2 {
		return "", false
	}
	op, delim := "<<", "EOT"
	if indent > 0 {
		op = "<<-"
	}
	for clash := true; clash; {
		clash = false
		for _, l := range lines {
			if strings.TrimSpace(l) == delim {
				delim += "_"
				clash = true
				break
			}
		}
	}
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	b.WriteString(op + delim)
	for _, l := range lines {
		b.WriteString("\n" + pad + l)
	}
	b.WriteString("\n" + pad + delim)
	return b.String(), true
}

func formatMapping(v cty.Value, indent int) string {
	var b strings.Builder
	b.WriteByte('{')
	pad := strings.Repeat(" ", indent+2)
	n := 0
	for it := v.ElementIterator(); it.Next(); n++ {
		k, e := it.Element()
		b.WriteString("\n" + pad + formatValue(k, indent+2) + " = " + formatValue(e, indent+2))
	}
	if n > 0 {
		b.WriteString("\n" + strings.Repeat(" ", indent))
	}
	b.WriteByte('}')
	return b.String()
}

func formatSequence(v cty.Value, indent int) string {
	var b strings.Builder
	b.WriteByte('[')
	pad := strings.Repeat(" ", indent+2)
	n := 0
	for it := v.ElementIterator(); it.Next(); n++ {
		_, e := it.Element()
		b.WriteString("\n" + pad + formatValue(e, indent+2) + ",")
	}
	if n > 0 {
		b.WriteString("\n" + strings.Repeat(" ", indent))
	}
	b.WriteByte(']')
	return b.String()
}

// outputsJSON writes the kilolock/state-output/v1 document: schema, state,
// serial, text, and outputs in `terraform output -json`'s shape (members
// in Terraform's order: sensitive, type, value), indented by two spaces.
func outputsJSON(w io.Writer, out *engine.Outputs) error {
	sensitive := 0
	for _, x := range out.Outputs {
		if x.Sensitive {
			sensitive++
		}
	}
	text := fmt.Sprintf("%s of state %s at version %d", plural(len(out.Outputs), "output", "outputs"), out.State, out.Serial)
	if sensitive > 0 {
		text += fmt.Sprintf(" (%d sensitive: value withheld)", sensitive)
	}
	head, err := json.Marshal(struct {
		Schema string `json:"schema"`
		State  string `json:"state"`
		Serial int64  `json:"serial"`
		Text   string `json:"text"`
	}{SchemaStateOutput, out.State, out.Serial, text})
	if err != nil {
		return fmt.Errorf("encoding outputs: %w", err)
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(`,"outputs":{`)
	sorted := append([]engine.Output(nil), out.Outputs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i, x := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(x.Name)
		fmt.Fprintf(&b, `%s:{"sensitive":%t,"type":%s`, name, x.Sensitive, x.Type)
		if x.Value != nil {
			fmt.Fprintf(&b, `,"value":%s`, x.Value)
		}
		b.WriteByte('}')
	}
	b.WriteString("}}")
	var ind bytes.Buffer
	if err := json.Indent(&ind, b.Bytes(), "", "  "); err != nil {
		return fmt.Errorf("encoding outputs: %w", err)
	}
	ind.WriteByte('\n')
	_, err = w.Write(ind.Bytes())
	return err
}
