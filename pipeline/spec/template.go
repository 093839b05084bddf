package spec

import (
	"fmt"
	"sort"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Template is a method template (roster, bond, ...): a function from a few
// method-level parameters to a spec. `nerflow run roster.yaml` and friends
// will expand a template file into a spec and run it like a hand-written one.
type Template struct {
	Name string
	Doc  string
	// Expand returns the spec as YAML (the syntax of docs/spec.md), so that
	// what a template produces can be printed, saved and edited by hand.
	Expand func(params map[string]any) ([]byte, error)
}

var (
	templatesMu sync.RWMutex
	templates   = map[string]Template{}
)

// RegisterTemplate adds a method template; like stages.Register it panics
// on a duplicate name.
func RegisterTemplate(t Template) {
	templatesMu.Lock()
	defer templatesMu.Unlock()
	if t.Name == "" || t.Expand == nil {
		panic("spec: RegisterTemplate needs a name and an Expand function")
	}
	if _, dup := templates[t.Name]; dup {
		panic(fmt.Sprintf("spec: template %s registered twice", t.Name))
	}
	templates[t.Name] = t
}

// LookupTemplate returns the template name.
func LookupTemplate(name string) (Template, bool) {
	templatesMu.RLock()
	defer templatesMu.RUnlock()
	t, ok := templates[name]
	return t, ok
}

// Templates returns the registered templates sorted by name.
func Templates() []Template {
	templatesMu.RLock()
	defer templatesMu.RUnlock()
	out := make([]Template, 0, len(templates))
	for _, t := range templates {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ExpandTemplate renders template name with params into a spec and parses
// it; file and dir play the same roles as in Parse.
func ExpandTemplate(name string, params map[string]any, file, dir string, overrides ...string) (*Spec, error) {
	t, ok := LookupTemplate(name)
	if !ok {
		return nil, fmt.Errorf("unknown method template %q", name)
	}
	data, err := t.Expand(params)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var probe map[string]any
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("template %s produced invalid YAML: %w", name, err)
	}
	return Parse(data, file+" (template "+name+")", dir, overrides...)
}
