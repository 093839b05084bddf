package stages

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Type is the type of a stage parameter.
type Type string

// Parameter types. Lists are written in YAML as sequences and on the command
// line (--set) as comma-separated values.
const (
	Int        Type = "int"
	Float      Type = "float"
	String     Type = "string"
	Bool       Type = "bool"
	Duration   Type = "duration" // Go syntax: "90s", "1h30m"
	IntList    Type = "[]int"
	FloatList  Type = "[]float"
	StringList Type = "[]string"
)

// Param declares one parameter of a stage. Build them with IntParam,
// FloatParam, StringParam, BoolParam, DurationParam and the list variants.
type Param struct {
	Name string
	Type Type
	// Default is used when a spec does not set the parameter; it is held in
	// the parameter's canonical Go type (int64, float64, string, bool,
	// time.Duration, []int64, []float64, []string). A parameter without a
	// default (Required) must be set by every spec.
	Default  any
	Required bool
	Doc      string
	// Min and Max bound numeric values (each element of numeric lists).
	Min, Max *float64
	// Enum restricts string values (each element of string lists).
	Enum []string
}

// ParamOption refines a parameter declaration.
type ParamOption func(*Param)

// Range bounds a numeric parameter to [lo, hi].
func Range(lo, hi float64) ParamOption { return func(p *Param) { p.Min, p.Max = &lo, &hi } }

// AtLeast bounds a numeric parameter from below.
func AtLeast(lo float64) ParamOption { return func(p *Param) { p.Min = &lo } }

// AtMost bounds a numeric parameter from above.
func AtMost(hi float64) ParamOption { return func(p *Param) { p.Max = &hi } }

// OneOf restricts a string parameter to the given values.
func OneOf(values ...string) ParamOption { return func(p *Param) { p.Enum = values } }

// Required marks a parameter that has no default and must be set by the spec.
func Required() ParamOption { return func(p *Param) { p.Required = true; p.Default = nil } }

func newParam(name string, t Type, def any, doc string, opts []ParamOption) Param {
	// A list declared without a default defaults to the empty list: nil
	// would be stored as JSON null, which no list parameter accepts back.
	switch d := def.(type) {
	case []float64:
		if d == nil {
			def = []float64{}
		}
	case []string:
		if d == nil {
			def = []string{}
		}
	}
	p := Param{Name: name, Type: t, Default: def, Doc: doc}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// IntParam declares an integer parameter.
func IntParam(name string, def int, doc string, opts ...ParamOption) Param {
	return newParam(name, Int, int64(def), doc, opts)
}

// FloatParam declares a floating-point parameter.
func FloatParam(name string, def float64, doc string, opts ...ParamOption) Param {
	return newParam(name, Float, def, doc, opts)
}

// StringParam declares a string parameter.
func StringParam(name, def, doc string, opts ...ParamOption) Param {
	return newParam(name, String, def, doc, opts)
}

// BoolParam declares a boolean parameter.
func BoolParam(name string, def bool, doc string, opts ...ParamOption) Param {
	return newParam(name, Bool, def, doc, opts)
}

// DurationParam declares a duration parameter.
func DurationParam(name string, def time.Duration, doc string, opts ...ParamOption) Param {
	return newParam(name, Duration, def, doc, opts)
}

// IntListParam declares a list-of-integers parameter.
func IntListParam(name string, def []int, doc string, opts ...ParamOption) Param {
	d := make([]int64, len(def))
	for i, v := range def {
		d[i] = int64(v)
	}
	return newParam(name, IntList, d, doc, opts)
}

// FloatListParam declares a list-of-floats parameter.
func FloatListParam(name string, def []float64, doc string, opts ...ParamOption) Param {
	return newParam(name, FloatList, slices.Clone(def), doc, opts)
}

// StringListParam declares a list-of-strings parameter.
func StringListParam(name string, def []string, doc string, opts ...ParamOption) Param {
	return newParam(name, StringList, slices.Clone(def), doc, opts)
}

// Convert turns a raw value, as decoded from YAML or JSON (int, float64,
// string, bool, []any...) or given as a string on the command line, into the
// parameter's canonical Go type, and checks its range or enum.
func (p Param) Convert(raw any) (any, error) {
	v, err := convert(p.Type, raw)
	if err != nil {
		return nil, err
	}
	return v, p.check(v)
}

func convert(t Type, raw any) (any, error) {
	switch t {
	case Int:
		return toInt(raw)
	case Float:
		return toFloat(raw)
	case String:
		switch r := raw.(type) {
		case string:
			return r, nil
		case fmt.Stringer:
			return r.String(), nil
		case bool:
			// A setting that reads auto, true or false: YAML decodes
			// the last two as booleans, the command line as strings.
			return strconv.FormatBool(r), nil
		}
		return nil, fmt.Errorf("want a string, got %s", describe(raw))
	case Bool:
		switch r := raw.(type) {
		case bool:
			return r, nil
		case string:
			b, err := strconv.ParseBool(r)
			if err != nil {
				return nil, fmt.Errorf("want a bool, got %q", r)
			}
			return b, nil
		}
		return nil, fmt.Errorf("want a bool, got %s", describe(raw))
	case Duration:
		switch r := raw.(type) {
		case time.Duration:
			return r, nil
		case string:
			d, err := time.ParseDuration(r)
			if err != nil {
				return nil, fmt.Errorf("want a duration such as 90s or 1h30m, got %q", r)
			}
			return d, nil
		}
		return nil, fmt.Errorf("want a duration such as 90s or 1h30m, got %s", describe(raw))
	case IntList, FloatList, StringList:
		elem := map[Type]Type{IntList: Int, FloatList: Float, StringList: String}[t]
		items, err := toList(raw)
		if err != nil {
			return nil, err
		}
		switch t {
		case IntList:
			return convertList[int64](elem, items)
		case FloatList:
			return convertList[float64](elem, items)
		default:
			return convertList[string](elem, items)
		}
	}
	return nil, fmt.Errorf("unknown parameter type %q", t)
}

func convertList[T any](elem Type, items []any) ([]T, error) {
	out := make([]T, 0, len(items))
	for i, it := range items {
		v, err := convert(elem, it)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out = append(out, v.(T))
	}
	return out, nil
}

func toList(raw any) ([]any, error) {
	switch r := raw.(type) {
	case []any:
		return r, nil
	case string:
		// Command-line form: comma-separated; "" is the empty list.
		if strings.TrimSpace(r) == "" {
			return []any{}, nil
		}
		parts := strings.Split(r, ",")
		out := make([]any, len(parts))
		for i, s := range parts {
			out[i] = strings.TrimSpace(s)
		}
		return out, nil
	case []int64:
		return anySlice(r), nil
	case []int:
		return anySlice(r), nil
	case []float64:
		return anySlice(r), nil
	case []string:
		return anySlice(r), nil
	case int, int64, float64:
		// A single value where a list goes is a list of one, as a
		// single string is: `miss_rate: 0.5` for a parameter that may
		// list candidates.
		return []any{r}, nil
	}
	return nil, fmt.Errorf("want a list, got %s", describe(raw))
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func toInt(raw any) (int64, error) {
	switch r := raw.(type) {
	case int:
		return int64(r), nil
	case int32:
		return int64(r), nil
	case int64:
		return r, nil
	case uint64:
		if r > math.MaxInt64 {
			return 0, fmt.Errorf("integer %d is too large", r)
		}
		return int64(r), nil
	case float64:
		if r != math.Trunc(r) || math.Abs(r) > 1<<53 {
			return 0, fmt.Errorf("want an integer, got %v", r)
		}
		return int64(r), nil
	case json.Number:
		return toIntString(string(r))
	case string:
		return toIntString(r)
	}
	return 0, fmt.Errorf("want an integer, got %s", describe(raw))
}

func toIntString(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %q", s)
	}
	return n, nil
}

func toFloat(raw any) (float64, error) {
	var f float64
	switch r := raw.(type) {
	case float64:
		f = r
	case float32:
		f = float64(r)
	case int:
		f = float64(r)
	case int64:
		f = float64(r)
	case json.Number:
		return toFloat(string(r))
	case string:
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil {
			return 0, fmt.Errorf("want a number, got %q", r)
		}
		f = v
	default:
		return 0, fmt.Errorf("want a number, got %s", describe(raw))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a finite number, got %v", f)
	}
	return f, nil
}

func describe(raw any) string {
	switch r := raw.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("string %q", r)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T %v", raw, raw)
}

func (p Param) check(v any) error {
	checkNum := func(f float64) error {
		if p.Min != nil && f < *p.Min {
			return fmt.Errorf("%v is below the minimum %v", f, *p.Min)
		}
		if p.Max != nil && f > *p.Max {
			return fmt.Errorf("%v is above the maximum %v", f, *p.Max)
		}
		return nil
	}
	checkEnum := func(s string) error {
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, s) {
			return fmt.Errorf("%q is not one of %s", s, strings.Join(p.Enum, ", "))
		}
		return nil
	}
	switch x := v.(type) {
	case int64:
		return checkNum(float64(x))
	case float64:
		return checkNum(x)
	case time.Duration:
		return checkNum(x.Seconds())
	case string:
		return checkEnum(x)
	case []int64:
		for i, e := range x {
			if err := checkNum(float64(e)); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	case []float64:
		for i, e := range x {
			if err := checkNum(e); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	case []string:
		for i, e := range x {
			if err := checkEnum(e); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	}
	return nil
}

// Params holds a stage's parameter values after resolution: every declared
// parameter is present, converted to its canonical type and validated.
// The typed getters panic when asked for a parameter the stage did not
// declare with that type: that is a bug in the stage, not in the spec, and
// the engine reports it as a permanent failure of the node.
type Params struct {
	values map[string]any
	types  map[string]Type
}

// ParamError reports an invalid parameter value.
type ParamError struct {
	Param string
	Err   error
}

func (e *ParamError) Error() string { return fmt.Sprintf("param %q: %v", e.Param, e.Err) }
func (e *ParamError) Unwrap() error { return e.Err }

// ResolveParams checks raw values (from a spec or --set) against the stage's
// declarations and fills in defaults. Errors name the parameter at fault and
// are *ParamError; unknown names are reported too.
func (s *Stage) ResolveParams(raw map[string]any) (Params, error) {
	return ResolveParams("stage "+s.Name, s.Params, raw)
}

// ResolveParams checks raw values against the declarations decls of owner
// ("stage train.tagger", "method distant": named in the message about an
// unknown parameter) and fills in defaults. Stages and methods share it, so
// that a parameter is validated the same way wherever it is declared.
func ResolveParams(owner string, decls []Param, raw map[string]any) (Params, error) {
	p := Params{values: map[string]any{}, types: map[string]Type{}}
	known := map[string]bool{}
	var errs ParamErrors
	for _, d := range decls {
		known[d.Name] = true
		p.types[d.Name] = d.Type
		r, ok := raw[d.Name]
		if !ok {
			if d.Required {
				errs = append(errs, &ParamError{d.Name, fmt.Errorf("required (%s) but not set", d.Type)})
			}
			p.values[d.Name] = d.Default
			continue
		}
		v, err := d.Convert(r)
		if err != nil {
			errs = append(errs, &ParamError{d.Name, err})
			continue
		}
		p.values[d.Name] = v
	}
	var unknown []string
	for name := range raw {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, u := range unknown {
		names := make([]string, 0, len(decls))
		for _, d := range decls {
			names = append(names, d.Name)
		}
		errs = append(errs, &ParamError{u, fmt.Errorf("%s has no such parameter (it has: %s)", owner, strings.Join(names, ", "))})
	}
	if len(errs) == 1 {
		return Params{}, errs[0]
	}
	if len(errs) > 0 {
		return Params{}, errs
	}
	return p, nil
}

// ParamErrors is every problem with a stage's parameters, in declaration
// order, then unknown names.
type ParamErrors []*ParamError

func (es ParamErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap gives errors.As and errors.Is every problem.
func (es ParamErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (p Params) get(name string, t Type) any {
	got, ok := p.types[name]
	if !ok {
		panic(fmt.Sprintf("stages: parameter %q is not declared by the stage", name))
	}
	if got != t {
		panic(fmt.Sprintf("stages: parameter %q is %s, read as %s", name, got, t))
	}
	return p.values[name]
}

// Int returns an int parameter.
func (p Params) Int(name string) int { return int(p.get(name, Int).(int64)) }

// Float returns a float parameter.
func (p Params) Float(name string) float64 { return p.get(name, Float).(float64) }

// String returns a string parameter.
func (p Params) String(name string) string { return p.get(name, String).(string) }

// Bool returns a bool parameter.
func (p Params) Bool(name string) bool { return p.get(name, Bool).(bool) }

// Duration returns a duration parameter.
func (p Params) Duration(name string) time.Duration { return p.get(name, Duration).(time.Duration) }

// Ints returns a list-of-integers parameter.
func (p Params) Ints(name string) []int {
	v := p.get(name, IntList).([]int64)
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// Floats returns a list-of-floats parameter.
func (p Params) Floats(name string) []float64 {
	return slices.Clone(p.get(name, FloatList).([]float64))
}

// Strings returns a list-of-strings parameter.
func (p Params) Strings(name string) []string {
	return slices.Clone(p.get(name, StringList).([]string))
}

// Map returns the values in their canonical types, keyed by name.
func (p Params) Map() map[string]any {
	out := make(map[string]any, len(p.values))
	for k, v := range p.values {
		out[k] = v
	}
	return out
}

// Canonical returns the parameters as canonical JSON: keys sorted, numbers in
// Go's shortest round-trip form, durations as Go duration strings. Equal
// parameter sets give equal bytes, which is what node keys are made of.
func (p Params) Canonical() []byte {
	m := make(map[string]any, len(p.values))
	for k, v := range p.values {
		switch x := v.(type) {
		case time.Duration:
			m[k] = x.String()
		default:
			m[k] = x
		}
	}
	b, err := json.Marshal(m) // encoding/json sorts map keys
	if err != nil {
		panic(fmt.Sprintf("stages: canonical params: %v", err))
	}
	return b
}

// ParamsFromCanonical rebuilds Params from Canonical output, for the engine
// that ships resolved parameters to workers.
func (s *Stage) ParamsFromCanonical(b []byte) (Params, error) {
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Params{}, fmt.Errorf("stage %s: decoding params: %w", s.Name, err)
	}
	for k, v := range raw {
		raw[k] = unNumber(v)
	}
	return s.ResolveParams(raw)
}

// unNumber keeps json.Number (exact for big integers) but turns lists into
// []any of the same, which convert understands.
func unNumber(v any) any {
	if l, ok := v.([]any); ok {
		for i := range l {
			l[i] = unNumber(l[i])
		}
	}
	return v
}
