// Package spec reads pipeline specs (YAML, loaded with viper), validates
// them against the stage registry and expands fan-out into the graph of
// nodes the engine runs. The syntax is documented in docs/spec.md.
//
//	name: demo
//	nodes:
//	  label:
//	    stage: distant.label
//	    params: {scheme: io}
//	    inputs:
//	      text: ./data/raw.txt          # a local file or directory
//	      gazetteer: s3://data/gaz.tsv  # an object (or prefix) in a store
//	  train:
//	    stage: train.tagger
//	    queue: gpu
//	    fan_out: {seed: [1, 2, 3]}      # one node per seed
//	    inputs: {corpus: label.labeled} # NODE.OUTPUT
//	  ensemble:
//	    stage: ensemble.average
//	    inputs: {models: train.model}   # fan-in: all three models
package spec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// Spec is a pipeline as written, before validation and expansion.
type Spec struct {
	// Name names the pipeline; it defaults to the file name without
	// extension.
	Name string
	// File is where the spec came from (for messages); Dir is the base of
	// relative dataset paths.
	File, Dir string
	// Nodes in file order.
	Nodes []NodeSpec

	pos       positions
	overrides map[string]string // path -> the --set that wrote it
}

// NodeSpec is one node as written.
type NodeSpec struct {
	Name    string
	Stage   string
	Params  map[string]any
	Inputs  map[string][]string // port -> references, in order
	Queue   string
	FanOut  map[string][]any
	Timeout time.Duration
	Retries *int
}

// Error is one problem in a spec, located by file, line and field path.
type Error struct {
	File string
	Line int
	// Path is the field at fault, e.g. "nodes.train.params.lr".
	Path string
	// Set is the --set override that supplied the value, when one did.
	Set string
	Msg string
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Set != "":
		fmt.Fprintf(&b, "--set %s: ", e.Set)
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a spec, in file order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (s *Spec) errorf(path, format string, args ...any) *Error {
	e := &Error{File: s.File, Path: path, Msg: fmt.Sprintf(format, args...)}
	// The most specific path that has a position or an override wins.
	for p := path; p != ""; p = parentPath(p) {
		if set, ok := s.overrides[p]; ok {
			e.Set = set
			break
		}
		if line, ok := s.pos[p]; ok {
			e.Line = line
			break
		}
	}
	return e
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return ""
	}
	return p[:i]
}

// Load reads the spec file at path and applies overrides, each
// "NODE.PARAM=VALUE" or "NODE.fan_out.PARAM=V1,V2,...".
func Load(path string, overrides ...string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading spec: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, filepath.Dir(abs), overrides...)
}

var (
	nodeNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	topFields  = []string{"name", "nodes"}
	nodeFields = []string{"stage", "params", "inputs", "queue", "fan_out", "timeout", "retries"}
)

// Parse reads a spec from data; file names it in messages and dir is the
// base of relative dataset paths.
func Parse(data []byte, file, dir string, overrides ...string) (*Spec, error) {
	s := &Spec{File: file, Dir: dir, overrides: map[string]string{}}
	pos, order, err := indexYAML(data)
	if le, ok := err.(*lineError); ok {
		return nil, Errors{{File: file, Line: le.line, Msg: le.msg}}
	}
	if err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	s.pos = pos
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, &Error{File: file, Msg: fmt.Sprintf("reading YAML: %v", err)}
	}
	var errs Errors
	for _, o := range overrides {
		path, val, err := overridePath(o)
		if err != nil {
			errs = append(errs, &Error{Set: o, Msg: err.Error()})
			continue
		}
		v.Set(path, val)
		s.overrides[path] = o
		if !slices.Contains(order, pathNode(path)) {
			order = append(order, pathNode(path))
		}
	}
	all := v.AllSettings()
	for k := range all {
		if !slices.Contains(topFields, k) {
			errs = append(errs, s.errorf(k, "unknown field (a spec has: %s)", strings.Join(topFields, ", ")))
		}
	}
	s.Name, _ = all["name"].(string)
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	nodes, ok := all["nodes"].(map[string]any)
	if !ok || len(nodes) == 0 {
		errs = append(errs, s.errorf("nodes", "a spec needs a nodes: mapping with at least one node"))
		return nil, errs
	}
	for _, name := range order {
		raw, ok := nodes[name]
		if !ok {
			continue
		}
		n, nerrs := s.decodeNode(name, raw)
		errs = append(errs, nerrs...)
		if n != nil {
			s.Nodes = append(s.Nodes, *n)
		}
	}
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	return s, nil
}

func pathNode(path string) string {
	p := strings.TrimPrefix(path, "nodes.")
	name, _, _ := strings.Cut(p, ".")
	return name
}

// overridePath turns NODE.PARAM=VALUE into the viper path and value.
func overridePath(o string) (string, any, error) {
	lhs, val, ok := strings.Cut(o, "=")
	if !ok {
		return "", nil, fmt.Errorf("want NODE.PARAM=VALUE")
	}
	parts := strings.Split(strings.TrimSpace(lhs), ".")
	switch {
	case len(parts) == 2 && parts[1] != "":
		if parts[1] == "fan_out" || parts[1] == "queue" || parts[1] == "stage" {
			if parts[1] == "queue" {
				return "nodes." + parts[0] + ".queue", val, nil
			}
			return "", nil, fmt.Errorf("%s cannot be set this way", parts[1])
		}
		return "nodes." + parts[0] + ".params." + parts[1], val, nil
	case len(parts) == 3 && parts[1] == "fan_out" && parts[2] != "":
		items := []any{}
		for _, s := range strings.Split(val, ",") {
			items = append(items, strings.TrimSpace(s))
		}
		return "nodes." + parts[0] + ".fan_out." + parts[2], items, nil
	}
	return "", nil, fmt.Errorf("want NODE.PARAM=VALUE, NODE.queue=cpu|gpu or NODE.fan_out.PARAM=V1,V2")
}

func (s *Spec) decodeNode(name string, raw any) (*NodeSpec, Errors) {
	path := "nodes." + name
	var errs Errors
	if !nodeNameRE.MatchString(name) {
		errs = append(errs, s.errorf(path, "invalid node name %q: use lower-case letters, digits, '_' and '-'", name))
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, append(errs, s.errorf(path, "want a mapping with stage, params, inputs..., got %s", describe(raw)))
	}
	n := &NodeSpec{Name: name, Params: map[string]any{}, Inputs: map[string][]string{}, FanOut: map[string][]any{}}
	for k := range m {
		if !slices.Contains(nodeFields, k) {
			errs = append(errs, s.errorf(path+"."+k, "unknown field (a node has: %s)", strings.Join(nodeFields, ", ")))
		}
	}
	n.Stage, ok = m["stage"].(string)
	if !ok || n.Stage == "" {
		errs = append(errs, s.errorf(path+".stage", "missing: every node names its stage (see `nerflow stages`)"))
	}
	if p, ok := m["params"]; ok {
		if pm, ok := p.(map[string]any); ok {
			n.Params = pm
		} else {
			errs = append(errs, s.errorf(path+".params", "want a mapping of parameter: value, got %s", describe(p)))
		}
	}
	if in, ok := m["inputs"]; ok {
		im, ok := in.(map[string]any)
		if !ok {
			errs = append(errs, s.errorf(path+".inputs", "want a mapping of input: reference, got %s", describe(in)))
		}
		for port, ref := range im {
			switch r := ref.(type) {
			case string:
				n.Inputs[port] = []string{r}
			case []any:
				for i, x := range r {
					str, ok := x.(string)
					if !ok {
						errs = append(errs, s.errorf(fmt.Sprintf("%s.inputs.%s.%d", path, port, i), "want a reference NODE.OUTPUT or a path, got %s", describe(x)))
						continue
					}
					n.Inputs[port] = append(n.Inputs[port], str)
				}
			default:
				errs = append(errs, s.errorf(path+".inputs."+port, "want a reference NODE.OUTPUT, a path, or a list of them, got %s", describe(ref)))
			}
		}
	}
	if q, ok := m["queue"]; ok {
		n.Queue, _ = q.(string)
		if n.Queue != "cpu" && n.Queue != "gpu" {
			errs = append(errs, s.errorf(path+".queue", "%v is not cpu or gpu", q))
		}
	}
	if f, ok := m["fan_out"]; ok {
		fm, ok := f.(map[string]any)
		if !ok || len(fm) == 0 {
			errs = append(errs, s.errorf(path+".fan_out", "want a mapping of parameter: [values...], got %s", describe(f)))
		}
		for k, vals := range fm {
			l, ok := vals.([]any)
			if !ok {
				errs = append(errs, s.errorf(path+".fan_out."+k, "want a non-empty list of values, got %s", describe(vals)))
				continue
			}
			if len(l) == 0 {
				errs = append(errs, s.errorf(path+".fan_out."+k, "want a non-empty list of values"))
				continue
			}
			n.FanOut[k] = l
		}
	}
	if t, ok := m["timeout"]; ok {
		d, err := time.ParseDuration(fmt.Sprint(t))
		if err != nil || d < 0 {
			errs = append(errs, s.errorf(path+".timeout", "want a duration such as 90m or 12h, got %v", t))
		}
		n.Timeout = d
	}
	if r, ok := m["retries"]; ok {
		k, err := strconv.Atoi(fmt.Sprint(r))
		if err != nil || k < 0 {
			errs = append(errs, s.errorf(path+".retries", "want a number >= 0, got %v", r))
		}
		n.Retries = &k
	}
	return n, errs
}

func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool {
		if (es[i].Line == 0) != (es[j].Line == 0) {
			return es[i].Line != 0
		}
		return es[i].Line < es[j].Line
	})
	return es
}

func describe(raw any) string {
	switch r := raw.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("%q", r)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", raw)
}
