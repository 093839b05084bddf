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
//
// A spec may instead call a method (method.go): `method: NAME` with
// `params:`, `inputs:` and `overrides:`; the method's Build makes the nodes
// through a Builder, and every value remembers the line of the user's file
// it came from, so that errors found while expanding point there.
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
	// Method is the method the spec calls (`method: NAME`), "" for a
	// spec that lists its nodes by hand.
	Method string
	// Nodes in file order; for a method call, the nodes the method made
	// (overrides applied), then the spec's own nodes.
	Nodes []NodeSpec

	pos       positions
	overrides map[string]string // path -> the --set that wrote it
	// origin maps a field of a node a method made ("nodes.train.params.
	// epochs") to the field of the user's file its value came from
	// ("params.epochs", "overrides.train.epochs", "inputs.train"), or to
	// "method" when the method chose it.
	origin map[string]string
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
	if !s.locate(e, path) && s.Method != "" {
		e.Line = s.pos["method"]
	}
	return e
}

// locate sets e's line or --set from the most specific path that has one.
// A field of a node a method made is located at the field of the user's
// file its value came from, and named by it.
func (s *Spec) locate(e *Error, path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if set, ok := s.overrides[p]; ok {
			e.Set = set
			return true
		}
		if line, ok := s.pos[p]; ok {
			e.Line = line
			return true
		}
		if o, ok := s.origin[p]; ok {
			if o != "method" {
				e.Path = o + path[len(p):]
			}
			return s.locate(e, o)
		}
	}
	return false
}

// Origin returns the field of the user's file that a field of a node a
// method made came from: Origin("nodes.test.inputs.gold") is
// "inputs.test" when the method connected the spec's test input there. It
// returns "" for a field the method chose, or one of a hand-written node.
func (s *Spec) Origin(field string) string {
	if o := s.origin[field]; o != "method" {
		return o
	}
	return ""
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return ""
	}
	return p[:i]
}

// Load reads the spec file at path and applies overrides, each
// "NODE.PARAM=VALUE", "NODE.queue=cpu|gpu", "NODE.fan_out.PARAM=V1,V2,..."
// or, for a method call, "PARAM=VALUE" (a method parameter).
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
	topFields  = []string{"name", "method", "params", "inputs", "overrides", "nodes"}
	callFields = []string{"params", "inputs", "overrides"}
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
	call := v.IsSet("method")
	s.origin = map[string]string{}
	for _, o := range overrides {
		path, val, err := overridePath(o, call, order)
		if err != nil {
			errs = append(errs, &Error{Set: o, Msg: err.Error()})
			continue
		}
		v.Set(path, val)
		s.overrides[path] = o
		if strings.HasPrefix(path, "nodes.") && !slices.Contains(order, pathNode(path)) {
			order = append(order, pathNode(path))
		}
	}
	all := v.AllSettings()
	for k := range all {
		if !slices.Contains(topFields, k) {
			errs = append(errs, s.errorf(k, "unknown field (a spec has: %s)", strings.Join(topFields, ", ")))
		} else if !call && slices.Contains(callFields, k) {
			errs = append(errs, s.errorf(k, "only a method call has %s (method: NAME; `nerflow methods` lists them)", k))
		}
	}
	s.Name, _ = all["name"].(string)
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	made := map[string]bool{}
	if call {
		gen, cerrs := s.callMethod(all)
		errs = append(errs, cerrs...)
		for _, n := range gen {
			made[n.Name] = true
		}
		s.Nodes = gen
	}
	nodes, ok := all["nodes"].(map[string]any)
	switch {
	case !call && (!ok || len(nodes) == 0):
		errs = append(errs, s.errorf("nodes", "a spec needs a nodes: mapping with at least one node, or method: NAME"))
		return nil, errs
	case all["nodes"] != nil && !ok:
		errs = append(errs, s.errorf("nodes", "want a mapping of node name: node, got %s", describe(all["nodes"])))
	}
	for _, name := range order {
		raw, ok := nodes[name]
		if !ok {
			continue
		}
		if made[name] {
			errs = append(errs, s.errorf("nodes."+name, "method %s makes a node %s already: change it under overrides:, or name this one differently", s.Method, name))
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

// overridePath turns a --set into the viper path and value. PARAM=VALUE
// (no dot) is a parameter of the method a spec calls; NODE.PARAM=VALUE a
// parameter of a node: of one the spec lists under nodes: (own), or, in a
// method call, an override of a node the method makes.
func overridePath(o string, call bool, own []string) (string, any, error) {
	lhs, val, ok := strings.Cut(o, "=")
	if !ok {
		return "", nil, fmt.Errorf("want NODE.PARAM=VALUE")
	}
	parts := strings.Split(strings.TrimSpace(lhs), ".")
	if len(parts) == 1 && parts[0] != "" {
		if !call {
			return "", nil, fmt.Errorf("%s=... sets a method parameter, but this spec calls no method (want NODE.PARAM=VALUE)", parts[0])
		}
		return "params." + parts[0], val, nil
	}
	if call && len(parts) == 2 && parts[0] == "params" && !slices.Contains(own, "params") {
		return "", nil, fmt.Errorf("a method parameter is set without a prefix: --set %s=%s", parts[1], val)
	}
	node := "nodes." + parts[0] + "."
	params := node + "params."
	if call && !slices.Contains(own, parts[0]) {
		node = "overrides." + parts[0] + "."
		params = node
	}
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		if parts[1] == "fan_out" || parts[1] == "queue" || parts[1] == "stage" {
			if parts[1] == "queue" {
				return node + "queue", val, nil
			}
			return "", nil, fmt.Errorf("%s cannot be set this way", parts[1])
		}
		return params + parts[1], val, nil
	case len(parts) == 3 && parts[0] != "" && parts[1] == "fan_out" && parts[2] != "":
		items := []any{}
		for _, s := range strings.Split(val, ",") {
			items = append(items, strings.TrimSpace(s))
		}
		return node + "fan_out." + parts[2], items, nil
	}
	return "", nil, fmt.Errorf("want NODE.PARAM=VALUE, NODE.queue=cpu|gpu, NODE.fan_out.PARAM=V1,V2 or, in a method call, PARAM=VALUE")
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
	return n, append(errs, s.decodeRunFields(path, m, n)...)
}

// decodeRunFields reads how a node runs, fields shared by nodes and the
// overrides of a method call: queue, fan_out, timeout and retries.
func (s *Spec) decodeRunFields(path string, m map[string]any, n *NodeSpec) Errors {
	var errs Errors
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
	return errs
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
