package githubfake

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Schema is the subset of OpenAPI 3.0 / JSON Schema that the GitHub REST
// description in testdata/openapi uses for request bodies and parameters:
// type, properties, required, maxLength, enum, maxItems, items, oneOf,
// anyOf, nullable, additionalProperties (boolean) and format (date-time is
// checked; int64 and others are annotations). Annotations (description,
// default, example, examples, title) are ignored. A keyword outside this
// set makes ParseSchema fail, so a richer description can never be
// validated silently by a validator that does not understand it.
type Schema struct {
	Type                 string // "" (any), object, array, string, integer, number, boolean
	Properties           map[string]*Schema
	Required             []string
	MaxLength            *int // in characters (Unicode code points), as JSON Schema counts
	Enum                 []any
	MaxItems             *int
	Items                *Schema
	OneOf, AnyOf         []*Schema
	Nullable             bool
	AdditionalProperties *bool // nil or true: allowed
	Format               string
}

// annotation keywords carry no validation meaning.
var annotations = map[string]bool{"description": true, "default": true, "example": true, "examples": true, "title": true}

// ParseSchema converts a decoded JSON schema object into a Schema.
func ParseSchema(raw any) (*Schema, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parsing schema: want an object, got %T", raw)
	}
	s := &Schema{}
	for k, v := range m {
		if annotations[k] {
			continue
		}
		var err error
		switch k {
		case "type":
			t, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("parsing schema: type %v is not a string", v)
			}
			s.Type = t
		case "properties":
			pm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("parsing schema: properties is %T", v)
			}
			s.Properties = make(map[string]*Schema, len(pm))
			for name, ps := range pm {
				if s.Properties[name], err = ParseSchema(ps); err != nil {
					return nil, fmt.Errorf("property %s: %w", name, err)
				}
			}
		case "required":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("parsing schema: required is %T", v)
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok {
					return nil, fmt.Errorf("parsing schema: required entry %v", r)
				}
				s.Required = append(s.Required, name)
			}
		case "maxLength", "maxItems":
			n, err := intOf(v)
			if err != nil {
				return nil, fmt.Errorf("parsing schema: %s: %w", k, err)
			}
			if k == "maxLength" {
				s.MaxLength = &n
			} else {
				s.MaxItems = &n
			}
		case "enum":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("parsing schema: enum is %T", v)
			}
			s.Enum = list
		case "items":
			if s.Items, err = ParseSchema(v); err != nil {
				return nil, fmt.Errorf("items: %w", err)
			}
		case "oneOf", "anyOf":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("parsing schema: %s is %T", k, v)
			}
			for i, sub := range list {
				ss, err := ParseSchema(sub)
				if err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", k, i, err)
				}
				if k == "oneOf" {
					s.OneOf = append(s.OneOf, ss)
				} else {
					s.AnyOf = append(s.AnyOf, ss)
				}
			}
		case "nullable":
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("parsing schema: nullable is %T", v)
			}
			s.Nullable = b
		case "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("parsing schema: additionalProperties as a schema is not supported")
			}
			s.AdditionalProperties = &b
		case "format":
			f, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("parsing schema: format is %T", v)
			}
			s.Format = f
		default:
			return nil, fmt.Errorf("parsing schema: unsupported keyword %q", k)
		}
	}
	return s, nil
}

func intOf(v any) (int, error) {
	switch n := v.(type) {
	case float64:
		if n != float64(int(n)) {
			return 0, fmt.Errorf("%v is not an integer", v)
		}
		return int(n), nil
	case json.Number:
		i, err := n.Int64()
		return int(i), err
	}
	return 0, fmt.Errorf("%v (%T) is not a number", v, v)
}

// FieldError is one violation, in the shape of an entry of GitHub's
// "errors" array: code is missing_field for a missing required field and
// invalid otherwise.
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Validate checks a value decoded with json.Decoder.UseNumber against s and
// returns every violation found, fields named by their dotted path
// (output.summary, actions[3]). A nil result means valid.
func (s *Schema) Validate(v any) []FieldError {
	var errs []FieldError
	s.validate(v, "", &errs)
	return errs
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func fieldName(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

func (s *Schema) validate(v any, path string, errs *[]FieldError) {
	add := func(code, format string, args ...any) {
		*errs = append(*errs, FieldError{Field: fieldName(path), Code: code, Message: fmt.Sprintf(format, args...)})
	}
	if v == nil {
		if !s.Nullable && s.Type != "" {
			add("invalid", "%s is null; want %s", fieldName(path), s.Type)
		}
		return
	}
	if s.Type != "" && !hasType(v, s.Type) {
		add("invalid", "%s is %s; want %s", fieldName(path), jsonType(v), s.Type)
		return
	}
	if len(s.Enum) > 0 && !inEnum(v, s.Enum) {
		add("invalid", "%s %s is not one of %s", fieldName(path), compact(v), compact(s.Enum))
	}
	switch x := v.(type) {
	case string:
		if s.MaxLength != nil {
			if n := utf8.RuneCountInString(x); n > *s.MaxLength {
				add("invalid", "%s is too long (%d characters; maximum is %d)", fieldName(path), n, *s.MaxLength)
			}
		}
		if s.Format == "date-time" {
			if _, err := time.Parse(time.RFC3339, x); err != nil {
				add("invalid", "%s %q is not an ISO 8601 date-time", fieldName(path), x)
			}
		}
	case []any:
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			add("invalid", "%s has %d items; maximum is %d", fieldName(path), len(x), *s.MaxItems)
		}
		if s.Items != nil {
			for i, item := range x {
				s.Items.validate(item, fmt.Sprintf("%s[%d]", fieldName(path), i), errs)
			}
		}
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := x[name]; !ok {
				*errs = append(*errs, FieldError{Field: join(path, name), Code: "missing_field",
					Message: fmt.Sprintf("%q wasn't supplied.", name)})
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, ok := s.Properties[k]
			if !ok {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					*errs = append(*errs, FieldError{Field: join(path, k), Code: "invalid",
						Message: fmt.Sprintf("%q is not a permitted key.", k)})
				}
				continue
			}
			ps.validate(x[k], join(path, k), errs)
		}
	}
	if len(s.AnyOf) > 0 {
		var sub []FieldError
		matched := false
		for _, alt := range s.AnyOf {
			e := alt.Validate(v)
			if len(e) == 0 {
				matched = true
				break
			}
			sub = append(sub, prefix(e, path)...)
		}
		if !matched {
			add("invalid", "No subschema in \"anyOf\" matched.")
			*errs = append(*errs, sub...)
		}
	}
	if len(s.OneOf) > 0 {
		n := 0
		var sub []FieldError
		for _, alt := range s.OneOf {
			e := alt.Validate(v)
			if len(e) == 0 {
				n++
			} else {
				sub = append(sub, prefix(e, path)...)
			}
		}
		switch {
		case n == 0:
			add("invalid", "No subschema in \"oneOf\" matched.")
			*errs = append(*errs, sub...)
		case n > 1:
			add("invalid", "More than one subschema in \"oneOf\" matched.")
		}
	}
}

// prefix re-roots errors of a subschema validated at path.
func prefix(errs []FieldError, path string) []FieldError {
	if path == "" {
		return errs
	}
	out := make([]FieldError, len(errs))
	for i, e := range errs {
		e.Field = strings.TrimSuffix(join(path, e.Field), ".body")
		out[i] = e
	}
	return out
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := new(big.Rat).SetString(n.String())
		return ok && r.IsInt()
	}
	return false // an unknown type name never matches: better loud than lenient
}

func jsonType(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		if hasType(x, "integer") {
			return "an integer"
		}
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func inEnum(v any, enum []any) bool {
	for _, e := range enum {
		if n, ok := v.(json.Number); ok {
			if f, ok := e.(float64); ok {
				r1, ok1 := new(big.Rat).SetString(n.String())
				r2 := new(big.Rat).SetFloat64(f)
				if ok1 && r2 != nil && r1.Cmp(r2) == 0 {
					return true
				}
			}
			continue
		}
		if reflect.DeepEqual(v, e) {
			return true
		}
	}
	return false
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
