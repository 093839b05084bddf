package stages

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"
)

// Stage is a named, versioned step of a pipeline: a Go function from
// parameters and input artifacts to output artifacts. A stage must be
// deterministic for given parameters and inputs (seed your randomness from a
// parameter): its outputs are cached under a digest of exactly those.
type Stage struct {
	// Name identifies the stage in specs, e.g. "distant.label". Lower case
	// letters, digits, '.', '_' and '-'.
	Name string
	// Version is part of every node key: bump it when a change to the code
	// changes the outputs, so that cached results of the old code are not
	// reused.
	Version int
	// Doc is a one-paragraph description shown by `nerflow stages`.
	Doc string
	// Params declares the parameters, with types, defaults and validation.
	Params []Param
	// Inputs and Outputs declare the named artifacts the stage reads and
	// writes.
	Inputs  []Port
	Outputs []Port
	// Queue is the default queue of the stage's nodes ("cpu" or "gpu"); a
	// spec can override it per node. Empty means "cpu".
	Queue string
	// Timeout bounds one attempt. Zero means no timeout: the attempt runs as
	// long as its worker is alive (liveness comes from the queue's lease,
	// renewed while the worker runs), which is what long training wants.
	Timeout time.Duration
	// Retries is how many times a failed attempt is retried (default 2 when
	// zero; set -1 for none). Permanent errors are never retried.
	Retries int
	// Resumable says the stage uses Context.LoadCheckpoint/SaveCheckpoint,
	// so an attempt that replaces a dead worker's continues where it left.
	Resumable bool
	// Run does the work. It reads c.Params and c.Input(...), writes every
	// declared output through c.Output(...), and returns nil on success.
	Run func(c *Context) error
}

// Port declares a named input or output artifact.
type Port struct {
	Name string
	// Kind says what the artifact holds (corpus, gazetteer, embeddings,
	// checkpoint, predictions, report, ...); outputs are stamped with it.
	Kind string
	Doc  string
	// Many (inputs only) accepts any number of artifacts, the fan-in of a
	// fanned-out node; read them with Context.Inputs.
	Many bool
	// Optional (inputs only) may be left unconnected.
	Optional bool
	// Accepts (inputs only) lists the kinds the input reads besides Kind:
	// an lm input that draws masked words reads language models or an
	// encoder alike.
	Accepts []string
}

// Takes says whether the input reads artifacts of kind.
func (p Port) Takes(kind string) bool { return kind == p.Kind || slices.Contains(p.Accepts, kind) }

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
	// Parameter and port names appear in spec paths (nodes.N.params.P) and
	// in --set N.P=V, so they have no dots.
	fieldRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// Validate checks a stage declaration.
func (s *Stage) Validate() error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("stages: invalid stage name %q (want lower-case letters, digits, '.', '_', '-')", s.Name)
	}
	if s.Version < 1 {
		return fmt.Errorf("stages: stage %s: version must be >= 1", s.Name)
	}
	if s.Run == nil {
		return fmt.Errorf("stages: stage %s: no Run function", s.Name)
	}
	switch s.Queue {
	case "", "cpu", "gpu":
	default:
		return fmt.Errorf("stages: stage %s: queue %q is not cpu or gpu", s.Name, s.Queue)
	}
	seen := map[string]bool{}
	for _, p := range s.Params {
		if !fieldRE.MatchString(p.Name) {
			return fmt.Errorf("stages: stage %s: invalid param name %q (lower-case letters, digits and '_')", s.Name, p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("stages: stage %s: param %s declared twice", s.Name, p.Name)
		}
		seen[p.Name] = true
		if !p.Required {
			if _, err := p.Convert(p.Default); err != nil {
				return fmt.Errorf("stages: stage %s: param %s: default: %w", s.Name, p.Name, err)
			}
		}
	}
	for _, ports := range [][]Port{s.Inputs, s.Outputs} {
		seen := map[string]bool{}
		for _, p := range ports {
			if !fieldRE.MatchString(p.Name) {
				return fmt.Errorf("stages: stage %s: invalid port name %q (lower-case letters, digits and '_')", s.Name, p.Name)
			}
			if seen[p.Name] {
				return fmt.Errorf("stages: stage %s: port %s declared twice", s.Name, p.Name)
			}
			seen[p.Name] = true
		}
	}
	for _, p := range s.Outputs {
		if p.Many || p.Optional {
			return fmt.Errorf("stages: stage %s: output %s: Many and Optional apply to inputs only", s.Name, p.Name)
		}
	}
	return nil
}

// Input returns the declared input port name.
func (s *Stage) Input(name string) (Port, bool) { return findPort(s.Inputs, name) }

// Output returns the declared output port name.
func (s *Stage) Output(name string) (Port, bool) { return findPort(s.Outputs, name) }

// Param returns the declaration of parameter name.
func (s *Stage) Param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

func findPort(ports []Port, name string) (Port, bool) {
	for _, p := range ports {
		if p.Name == name {
			return p, true
		}
	}
	return Port{}, false
}

// MaxRetries is the number of retries after a failed attempt.
func (s *Stage) MaxRetries() int {
	switch {
	case s.Retries < 0:
		return 0
	case s.Retries == 0:
		return 2
	}
	return s.Retries
}

// DefaultQueue is the stage's queue, "cpu" unless declared otherwise.
func (s *Stage) DefaultQueue() string {
	if s.Queue == "" {
		return "cpu"
	}
	return s.Queue
}

var (
	mu       sync.RWMutex
	registry = map[string]*Stage{}
)

// Register adds a stage to the registry. Call it from an init function of
// the package that implements the stage. It panics when the declaration is
// invalid or the name is taken, as database/sql.Register does: both are
// programming errors found at start-up.
func Register(s Stage) {
	if err := s.Validate(); err != nil {
		panic(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[s.Name]; dup {
		panic(fmt.Sprintf("stages: stage %s registered twice", s.Name))
	}
	registry[s.Name] = &s
}

// Lookup returns the registered stage name.
func Lookup(name string) (*Stage, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := registry[name]
	return s, ok
}

// All returns the registered stages sorted by name.
func All() []*Stage {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]*Stage, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
