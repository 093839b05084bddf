// Package registry is nerflow's model registry: every model a run declares
// with the register stage becomes a version NAME@N, with its lineage (spec,
// training stage and parameters, the datasets upstream of it with their
// digests, the nerflow version) and the metrics of its evaluations. Tags
// (production, staging) point at one version of a model each; serving loads
// the version a tag points at.
//
// Everything lives in the artifact store, so the registry survives the loss
// of Redis:
//
//	registry/models/<name>/<N>.json   a version (written once)
//	registry/models/<name>/tags.json  tag -> version
//	registry/synced.json              the run manifests already examined
//
// The engine knows no model, so registration is not its business: Sync reads
// the manifests of finished runs (runs/<id>/manifest.json) and registers the
// cards of their register nodes, numbering new versions in the order the
// runs finished. A model already registered (same content digest) is not
// registered twice: a re-run that was served from the cache adds nothing.
//
// Writers (Sync, Promote) hold a lock for the read-modify-write of the
// registry objects: a Redis lease when the registry has a Redis client
// (WithRedis), else a mutex of this process.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/redislock"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/layout"
)

// Errors.
var (
	ErrNoModel   = errors.New("no such model")
	ErrNoVersion = errors.New("no such model version")
	ErrNoTag     = errors.New("no version has this tag")
)

// Version is one registered model.
type Version struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	// Model is the manifest of the model artifact (read it with
	// stages.NewInput(ctx, store, v.Model)).
	Model stages.Artifact `json:"model"`
	// Registered is when the run that registered it finished.
	Registered time.Time `json:"registered"`
	// Nerflow is the version of the binary that produced it.
	Nerflow string `json:"nerflow"`
	Lineage
	Metrics []Metrics `json:"metrics,omitempty"`
}

// Ref is "NAME@N".
func (v *Version) Ref() string { return v.Name + "@" + strconv.Itoa(v.Version) }

// Lineage is where a model came from.
type Lineage struct {
	// Run is the run that registered it; Spec, SpecFile and Overrides are
	// that run's spec.
	Run       string   `json:"run"`
	Spec      string   `json:"spec,omitempty"`
	SpecFile  string   `json:"spec_file,omitempty"`
	Overrides []string `json:"overrides,omitempty"`
	// Node, Stage, StageVersion and Params describe the node that trained
	// the model (the method and its parameters); Key is its node key.
	Node         string          `json:"node,omitempty"`
	Stage        string          `json:"stage,omitempty"`
	StageVersion int             `json:"stage_version,omitempty"`
	Params       json.RawMessage `json:"params,omitempty"`
	Key          string          `json:"key,omitempty"`
	// Inputs are the model artifact's direct inputs (port and digest).
	Inputs []artifact.Input `json:"inputs,omitempty"`
	// Datasets are the external datasets upstream of the training node:
	// corpora, gazetteers, word vectors.
	Datasets []Dataset `json:"datasets,omitempty"`
}

// Dataset is an imported dataset a model depends on.
type Dataset struct {
	Source string `json:"source"`
	Digest string `json:"digest"`
	// Ports are the inputs it was connected to ("train.tagger corpus").
	Ports []string `json:"ports"`
}

// Model summarizes a model's versions.
type Model struct {
	Name     string         `json:"name"`
	Versions int            `json:"versions"`
	Latest   *Version       `json:"latest"`
	Tags     map[string]int `json:"tags,omitempty"`
}

// Registry reads and writes the registry objects of a store. It is safe for
// concurrent use.
type Registry struct {
	store storage.Store
	rdb   redis.UniversalClient
	ns    string
	log   *slog.Logger
	mu    sync.Mutex
}

// Option configures a Registry.
type Option func(*Registry)

// WithRedis makes writers take a Redis lease (key "<ns>:registry:lock"), so
// that processes sharing the store do not write the registry at once.
func WithRedis(rdb redis.UniversalClient, namespace string) Option {
	return func(r *Registry) { r.rdb, r.ns = rdb, namespace }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(r *Registry) { r.log = l } }

// New returns the registry of store.
func New(store storage.Store, opts ...Option) *Registry {
	r := &Registry{store: store, log: slog.Default(), ns: "nerflow"}
	for _, o := range opts {
		o(r)
	}
	return r
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// ValidateName checks a model name: lower-case letters, digits, '.', '_'
// and '-', starting with a letter or digit.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("invalid model name %q (lower-case letters, digits, '.', '_', '-'; at most 100)", name)
	}
	return nil
}

// ValidateTag checks a tag name (same rules as model names).
func ValidateTag(tag string) error {
	if !nameRE.MatchString(tag) {
		return fmt.Errorf("invalid tag %q (lower-case letters, digits, '.', '_', '-')", tag)
	}
	return nil
}

// ParseRef splits "NAME@N" (N may be a tag: "NAME@production"; a bare
// "NAME" means its latest version, returned as version 0 and tag "").
func ParseRef(ref string) (name string, version int, tag string, err error) {
	name, v, hasAt := strings.Cut(ref, "@")
	if err := ValidateName(name); err != nil {
		return "", 0, "", err
	}
	if !hasAt {
		return name, 0, "", nil
	}
	if n, perr := strconv.Atoi(v); perr == nil {
		if n < 1 {
			return "", 0, "", fmt.Errorf("model %q: version must be >= 1", ref)
		}
		return name, n, "", nil
	}
	if err := ValidateTag(v); err != nil {
		return "", 0, "", fmt.Errorf("model %q: want NAME@VERSION or NAME@TAG: %w", ref, err)
	}
	return name, 0, v, nil
}

// locked runs fn holding the registry's write lock.
func (r *Registry) locked(ctx context.Context, fn func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rdb != nil {
		l, err := redislock.Lock(ctx, r.rdb, r.ns+":registry:lock", time.Minute)
		if err != nil {
			return err
		}
		defer l.Unlock(context.WithoutCancel(ctx))
	}
	return fn()
}

// Resolve returns the version a reference names: NAME@N, NAME@TAG or NAME
// (the latest version).
func (r *Registry) Resolve(ctx context.Context, ref string) (*Version, error) {
	name, n, tag, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	switch {
	case n > 0:
		return r.Get(ctx, name, n)
	case tag != "":
		return r.Tagged(ctx, name, tag)
	}
	vs, err := r.Versions(ctx, name)
	if err != nil {
		return nil, err
	}
	return &vs[len(vs)-1], nil
}

// Get returns version n of model name.
func (r *Registry) Get(ctx context.Context, name string, n int) (*Version, error) {
	var v Version
	_, err := storage.GetJSON(ctx, r.store, layout.ModelVersion(name, n), &v)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%s@%d: %w", name, n, ErrNoVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s@%d: %w", name, n, err)
	}
	return &v, nil
}

// Versions returns every version of model name, oldest first.
func (r *Registry) Versions(ctx context.Context, name string) ([]Version, error) {
	nums, err := r.versionNumbers(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(nums) == 0 {
		return nil, fmt.Errorf("model %s: %w", name, ErrNoModel)
	}
	out := make([]Version, 0, len(nums))
	for _, n := range nums {
		v, err := r.Get(ctx, name, n)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

func (r *Registry) versionNumbers(ctx context.Context, name string) ([]int, error) {
	objs, err := r.store.List(ctx, layout.Model(name))
	if err != nil {
		return nil, fmt.Errorf("listing versions of %s: %w", name, err)
	}
	var nums []int
	for _, o := range objs {
		if n, ok := layout.VersionOf(name, o.Key); ok {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	return nums, nil
}

// Tags returns model name's tags (tag -> version).
func (r *Registry) Tags(ctx context.Context, name string) (map[string]int, error) {
	tags := map[string]int{}
	_, err := storage.GetJSON(ctx, r.store, layout.ModelTags(name), &tags)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("reading tags of %s: %w", name, err)
	}
	return tags, nil
}

// Tagged returns the version of model name that tag points at.
func (r *Registry) Tagged(ctx context.Context, name, tag string) (*Version, error) {
	tags, err := r.Tags(ctx, name)
	if err != nil {
		return nil, err
	}
	n, ok := tags[tag]
	if !ok {
		return nil, fmt.Errorf("%s@%s: %w", name, tag, ErrNoTag)
	}
	return r.Get(ctx, name, n)
}

// Models lists the registered models by name.
func (r *Registry) Models(ctx context.Context) ([]Model, error) {
	objs, err := r.store.List(ctx, layout.Models)
	if err != nil {
		return nil, fmt.Errorf("listing models: %w", err)
	}
	counts := map[string]int{}
	latest := map[string]int{}
	for _, o := range objs {
		name, _ := layout.ModelOf(o.Key)
		if n, ok := layout.VersionOf(name, o.Key); ok {
			counts[name]++
			latest[name] = max(latest[name], n)
		}
	}
	var out []Model
	for name, c := range counts {
		v, err := r.Get(ctx, name, latest[name])
		if err != nil {
			return nil, err
		}
		tags, err := r.Tags(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Model{Name: name, Versions: c, Latest: v, Tags: tags})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Promote points tag at name@n (a tag points at one version per model;
// moving it away from another version is the promotion).
func (r *Registry) Promote(ctx context.Context, name string, n int, tag string) error {
	if err := ValidateTag(tag); err != nil {
		return err
	}
	if _, err := r.Get(ctx, name, n); err != nil {
		return err
	}
	return r.locked(ctx, func() error {
		tags, err := r.Tags(ctx, name)
		if err != nil {
			return err
		}
		old, had := tags[tag]
		tags[tag] = n
		if _, err := storage.PutJSON(ctx, r.store, layout.ModelTags(name), tags); err != nil {
			return fmt.Errorf("writing tags of %s: %w", name, err)
		}
		if had && old != n {
			r.log.Info("model promoted", "model", name, "tag", tag, "version", n, "previous", old)
		} else {
			r.log.Info("model promoted", "model", name, "tag", tag, "version", n)
		}
		return nil
	})
}

// TagsOf returns the tags pointing at version n, sorted.
func TagsOf(tags map[string]int, n int) []string {
	var out []string
	for t, v := range tags {
		if v == n {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// synced is the registry's memory of the run manifests it has examined:
// run id -> digest of the manifest (a retried run rewrites it).
type synced struct {
	Runs map[string]string `json:"runs"`
}

// Sync registers the models of succeeded runs it has not examined yet and
// returns the versions it created.
func (r *Registry) Sync(ctx context.Context) ([]Version, error) {
	var created []Version
	err := r.locked(ctx, func() error {
		var s synced
		if _, err := storage.GetJSON(ctx, r.store, layout.RegistrySynced, &s); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("reading %s: %w", layout.RegistrySynced, err)
		}
		if s.Runs == nil {
			s.Runs = map[string]string{}
		}
		objs, err := r.store.List(ctx, layout.Runs)
		if err != nil {
			return fmt.Errorf("listing runs: %w", err)
		}
		var runs []*engine.RunManifest
		changed := false
		for _, o := range objs {
			id, ok := layout.RunOfManifest(o.Key)
			if !ok || s.Runs[id] == o.Digest {
				continue
			}
			var m engine.RunManifest
			if _, err := storage.GetJSON(ctx, r.store, o.Key, &m); err != nil {
				r.log.Warn("registry: skipping unreadable run manifest", "run", id, "err", err)
				continue
			}
			if m.State == engine.Running {
				continue // look again when it has finished
			}
			s.Runs[id] = o.Digest
			changed = true
			if m.State == engine.Succeeded {
				runs = append(runs, &m)
			}
		}
		// Versions are numbered in the order the runs finished.
		sort.Slice(runs, func(i, j int) bool { return finished(runs[i]).Before(finished(runs[j])) })
		for _, m := range runs {
			vs, err := r.registerRun(ctx, m)
			if err != nil {
				return fmt.Errorf("run %s: %w", m.ID, err)
			}
			created = append(created, vs...)
		}
		if changed {
			if _, err := storage.PutJSON(ctx, r.store, layout.RegistrySynced, s); err != nil {
				return fmt.Errorf("writing %s: %w", layout.RegistrySynced, err)
			}
		}
		return nil
	})
	return created, err
}

// SyncRun waits up to timeout for the manifest of run to record its end,
// then syncs. A run's state reaches Redis a moment before its final
// manifest reaches the store, so a caller that has just seen the run
// finish (nerflow run) uses this rather than Sync.
func (r *Registry) SyncRun(ctx context.Context, run string, timeout time.Duration) ([]Version, error) {
	deadline := time.Now().Add(timeout)
	for {
		var m engine.RunManifest
		_, err := storage.GetJSON(ctx, r.store, layout.RunManifest(run), &m)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("reading the manifest of run %s: %w", run, err)
		}
		if err == nil && m.State != engine.Running {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("run %s: its manifest does not record its end after %s", run, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return r.Sync(ctx)
}

func finished(m *engine.RunManifest) time.Time {
	if m.FinishedAt != nil {
		return *m.FinishedAt
	}
	return m.CreatedAt
}

// registerRun registers the cards of run m's register nodes.
func (r *Registry) registerRun(ctx context.Context, m *engine.RunManifest) ([]Version, error) {
	if m.Graph == nil {
		return nil, nil
	}
	var out []Version
	for _, n := range m.Graph.Nodes {
		if n.Stage != StageName {
			continue
		}
		ns, ok := m.Node(n.ID)
		if !ok {
			continue
		}
		a, ok := ns.Outputs["card"]
		if !ok {
			continue
		}
		var card Card
		if err := stages.NewInput(ctx, r.store, a).ReadJSON(CardFile, &card); err != nil {
			return out, fmt.Errorf("node %s: %w", n.ID, err)
		}
		v, isNew, err := r.register(ctx, m, n, &card)
		if err != nil {
			return out, fmt.Errorf("node %s: %w", n.ID, err)
		}
		if isNew {
			out = append(out, *v)
		}
	}
	return out, nil
}

// register adds card as a new version unless its model is registered
// under that name already.
func (r *Registry) register(ctx context.Context, m *engine.RunManifest, regNode *spec.Node, card *Card) (*Version, bool, error) {
	name := card.Name
	if name == "" {
		name = m.Name
	}
	if err := ValidateName(name); err != nil {
		return nil, false, fmt.Errorf("spec name %q cannot name a model; set the register stage's name: %w", m.Name, err)
	}
	nums, err := r.versionNumbers(ctx, name)
	if err != nil {
		return nil, false, err
	}
	for _, n := range nums {
		v, err := r.Get(ctx, name, n)
		if err != nil {
			return nil, false, err
		}
		if v.Model.Digest == card.Model.Digest {
			return v, false, nil
		}
	}
	v := &Version{Name: name, Version: 1, Model: card.Model, Registered: finished(m).UTC(), Nerflow: card.Nerflow,
		Lineage: lineage(m, card), Metrics: card.Metrics}
	if len(nums) > 0 {
		v.Version = nums[len(nums)-1] + 1
	}
	// Name each report's evaluating node by its output digest.
	for i := range v.Metrics {
		for _, ns := range m.Nodes {
			for _, o := range ns.Outputs {
				if o.Digest == v.Metrics[i].Digest && v.Metrics[i].Node == "" {
					v.Metrics[i].Node = ns.ID
				}
			}
		}
	}
	if _, err := storage.PutJSON(ctx, r.store, layout.ModelVersion(name, v.Version), v); err != nil {
		return nil, false, fmt.Errorf("writing %s: %w", v.Ref(), err)
	}
	r.log.Info("model registered", "model", v.Ref(), "run", m.ID, "node", regNode.ID)
	return v, true, nil
}

// lineage gathers what run m knows of the model of card: the training node
// (the one whose node key produced it), and the datasets upstream of it.
func lineage(m *engine.RunManifest, card *Card) Lineage {
	l := Lineage{Run: m.ID, Spec: m.Spec, SpecFile: m.SpecFile, Overrides: m.Overrides,
		Key: card.Model.Producer.NodeKey, Inputs: card.Model.Lineage}
	var train *spec.Node
	for _, ns := range m.Nodes {
		if ns.Key != "" && ns.Key == card.Model.Producer.NodeKey {
			train, _ = m.Graph.Node(ns.ID)
			break
		}
	}
	if train == nil {
		return l
	}
	l.Node, l.Stage, l.StageVersion, l.Params = train.ID, train.Stage, train.Version, train.Params
	byDigest := map[string]*Dataset{}
	seen := map[string]bool{}
	var walk func(n *spec.Node)
	walk = func(n *spec.Node) {
		if seen[n.ID] {
			return
		}
		seen[n.ID] = true
		for _, in := range n.Inputs {
			if in.Dataset != "" {
				a, ok := m.Datasets[in.Dataset]
				if !ok {
					continue
				}
				d := byDigest[a.Digest]
				if d == nil {
					d = &Dataset{Source: in.Dataset, Digest: a.Digest}
					byDigest[a.Digest] = d
				}
				d.Ports = append(d.Ports, n.Stage+" "+in.Port)
				continue
			}
			if p, ok := m.Graph.Node(in.Node); ok {
				walk(p)
			}
		}
	}
	walk(train)
	for _, d := range byDigest {
		d.Ports = uniq(d.Ports)
		l.Datasets = append(l.Datasets, *d)
	}
	sort.Slice(l.Datasets, func(i, j int) bool { return l.Datasets[i].Source < l.Datasets[j].Source })
	return l
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
