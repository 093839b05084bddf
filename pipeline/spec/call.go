package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/stages"
)

// runFields are the keys of an override that change how a node runs; every
// other key of an override is a parameter of the node's stage.
var runFields = []string{"queue", "fan_out", "timeout", "retries"}

// callMethod expands the method call of a spec (method:, params:, inputs:,
// overrides:) into the nodes the method makes, recording where each of
// their values came from so that errors found later point at the user's
// lines.
func (s *Spec) callMethod(all map[string]any) ([]NodeSpec, Errors) {
	name, _ := all["method"].(string)
	m, ok := LookupMethod(name)
	if !ok {
		return nil, Errors{s.errorf("method", "unknown method %q (methods: %s; `nerflow methods` describes them)", all["method"], methodNames())}
	}
	s.Method = name
	var errs Errors
	raw, err := s.mapping(all, "params", "parameter: value")
	if err != nil {
		errs = append(errs, err)
	}
	params, perr := stages.ResolveParams("method "+name, m.Params, raw)
	if perr != nil {
		errs = append(errs, s.paramErrors("params", perr)...)
	}
	b := &Builder{method: m, name: s.Name, params: params, set: map[string]bool{},
		inputs: map[string]Ref{}, byName: map[string]*NodeBuilder{}}
	for k := range raw {
		b.set[k] = true
	}
	errs = append(errs, s.callInputs(m, all, b)...)
	if len(errs) > 0 {
		return nil, errs
	}
	if err := m.Build(b); err != nil {
		errs = append(errs, s.errorf("method", "method %s: %v", name, err))
	}
	for _, e := range b.errs {
		field := e.field
		if field == "" {
			field = "method"
		}
		errs = append(errs, s.errorf(field, "%s", e.msg))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for _, n := range b.nodes {
		s.origin["nodes."+n.spec.Name] = "method"
		for k, o := range n.origins {
			s.origin["nodes."+n.spec.Name+"."+k] = o
		}
	}
	errs = append(errs, s.applyOverrides(m, all, b)...)
	out := make([]NodeSpec, len(b.nodes))
	for i, n := range b.nodes {
		out[i] = n.spec
	}
	return out, errs
}

// mapping returns the mapping under key of parent (nil when absent).
func (s *Spec) mapping(parent map[string]any, key, what string) (map[string]any, *Error) {
	v, ok := parent[key]
	if !ok || v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return map[string]any{}, s.errorf(key, "want a mapping of %s, got %s", what, describe(v))
	}
	return m, nil
}

// callInputs checks the inputs: of a method call against the method's
// declarations and gives them to the builder.
func (s *Spec) callInputs(m *Method, all map[string]any, b *Builder) Errors {
	var errs Errors
	given, err := s.mapping(all, "inputs", "input: reference")
	if err != nil {
		errs = append(errs, err)
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		path := "inputs." + k
		decl, ok := m.Input(k)
		if !ok {
			errs = append(errs, s.errorf(path, "method %s has no input %q (inputs: %s)", m.Name, k, m.inputNames()))
			continue
		}
		var r Ref
		switch v := given[k].(type) {
		case string:
			r.items = []refItem{{raw: v, origin: path}}
		case []any:
			if !decl.Many {
				errs = append(errs, s.errorf(path, "input %s of method %s takes one reference, got a list", k, m.Name))
				continue
			}
			for i, x := range v {
				str, ok := x.(string)
				if !ok {
					errs = append(errs, s.errorf(fmt.Sprintf("%s.%d", path, i), "want a path, a store URL or NODE.OUTPUT, got %s", describe(x)))
					continue
				}
				r.items = append(r.items, refItem{raw: str, origin: fmt.Sprintf("%s.%d", path, i)})
			}
		default:
			errs = append(errs, s.errorf(path, "want a path, a store URL or NODE.OUTPUT, got %s", describe(v)))
			continue
		}
		b.inputs[k] = r
	}
	for _, decl := range m.Inputs {
		if _, ok := given[decl.Name]; !ok && !decl.Optional {
			at := "inputs"
			if _, ok := s.pos[at]; !ok {
				at = "method"
			}
			errs = append(errs, s.errorf(at, "input %s of method %s is not connected: %s (%s)", decl.Name, m.Name, decl.Doc, decl.Kind))
		}
	}
	return errs
}

// applyOverrides applies overrides: NODE: {PARAM: VALUE, queue: ..., ...}
// to the nodes the method made.
func (s *Spec) applyOverrides(m *Method, all map[string]any, b *Builder) Errors {
	var errs Errors
	over, err := s.mapping(all, "overrides", "node: {parameter: value}")
	if err != nil {
		return Errors{err}
	}
	for _, node := range slices.Sorted(maps.Keys(over)) {
		path := "overrides." + node
		n, ok := b.byName[node]
		if !ok {
			names := make([]string, len(b.nodes))
			for i, x := range b.nodes {
				names[i] = x.spec.Name
			}
			errs = append(errs, s.errorf(path, "method %s makes no node %q (it makes: %s)", m.Name, node, strings.Join(names, ", ")))
			continue
		}
		vals, ok := over[node].(map[string]any)
		if !ok {
			errs = append(errs, s.errorf(path, "want a mapping of parameter: value (and queue, fan_out, timeout, retries), got %s", describe(over[node])))
			continue
		}
		run := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(vals)) {
			target := "nodes." + node + "."
			switch {
			case slices.Contains(runFields, k):
				run[k] = vals[k]
				target += k
			case k == "stage" || k == "inputs" || k == "params":
				errs = append(errs, s.errorf(path+"."+k, "an override sets parameters (directly under the node: %s: {hidden: 300}) and %s; not %s", node, strings.Join(runFields, ", "), k))
				continue
			default:
				n.spec.Params[k] = vals[k]
				target += "params." + k
			}
			s.origin[target] = path + "." + k
		}
		if f, ok := run["fan_out"].(map[string]any); ok {
			// A fanned-out key replaces the method's value of it.
			for k := range f {
				delete(n.spec.Params, k)
				s.origin["nodes."+node+".fan_out."+k] = path + ".fan_out." + k
			}
		}
		errs = append(errs, s.decodeRunFields("nodes."+node, run, &n.spec)...)
	}
	return errs
}
