// Package gc finds what in a store nothing kept needs any more, and deletes
// it: the outputs, node records and checkpoints of old runs, the manifests
// of runs beyond the newest few per pipeline, imported datasets no kept
// run or model refers to, and shared files (word vectors a model carries
// unchanged, see artifact.File.Blob) that nothing left refers to.
//
// Kept (the roots, and everything they refer to):
//
//   - every registered model version: its model artifact, the reports of
//     its metrics, the manifest of the run that registered it and the
//     datasets of its lineage; and every other copy (same content digest)
//     of its model and reports that a node record names, since the
//     version's own copy may be the damaged one;
//   - the newest KeepRuns finished runs of each pipeline name (scheduled
//     runs carry their spec's name): their manifests, every node output
//     they show (cached ones included, wherever they were first written),
//     the node records of those outputs and the datasets they imported;
//   - every run that has not ended (a live marker), with what it has
//     done so far and its nodes' checkpoints, as the engine reports it;
//   - runs the registry has not examined yet (it may register their
//     models);
//   - everything written less than MinAge ago (a run that starts while gc
//     runs writes only new objects), or since the start of a live run whose
//     state cannot be read;
//   - the registry, live markers, and any key outside the layout gc knows;
//   - every shared file that anything kept (an artifact, a node record, a
//     checkpoint, a model version, a run) lists, read from their manifests.
//
// Deleting a node record makes its node a cache miss; records go before the
// outputs they name, so that a run starting meanwhile recomputes rather than
// reads a half-deleted output, and the outputs of a run that appeared
// between the plan and the deletion are spared. Shared files go last, each
// checked again just before: one written since the plan (an artifact that
// has just taken it up writes it again) stays.
package gc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/layout"
)

// Options say what to keep.
type Options struct {
	// KeepRuns is how many finished runs of each pipeline name are kept
	// with their outputs (at least 1).
	KeepRuns int
	// MinAge protects objects written less than this long ago.
	MinAge time.Duration
	// Live reads the state of a run that has not ended (the engine's
	// Status). Without it, or when it fails, the plan keeps everything
	// written since the run started, and Apply deletes nothing.
	Live func(ctx context.Context, run string) (*engine.RunStatus, error)
	// Now is the time of the plan (default time.Now).
	Now func() time.Time
}

// Item is one thing gc deletes: an artifact, node record, checkpoint,
// dataset or run manifest, with its objects.
type Item struct {
	Kind   string `json:"kind"`   // artifact, node-record, checkpoint, dataset, run, blob
	Prefix string `json:"prefix"` // the key, or the prefix of its objects
	// Why says why nothing keeps it.
	Why     string   `json:"why"`
	Objects []string `json:"objects"`
	Bytes   int64    `json:"bytes"`
}

// Plan is what gc would delete and what it keeps.
type Plan struct {
	At         time.Time `json:"at"`
	Delete     []Item    `json:"delete"`
	Bytes      int64     `json:"bytes"`      // of Delete
	KeptBytes  int64     `json:"kept_bytes"` // of everything else
	KeptRuns   []string  `json:"kept_runs"`  // runs kept with their outputs
	LiveRuns   []string  `json:"live_runs"`  // runs that have not ended
	Unreadable []string  `json:"unreadable"` // live runs whose state could not be read
	Cutoff     time.Time `json:"cutoff"`     // objects written after it are kept
	store      storage.Store
}

// Objects counts the objects the plan deletes.
func (p *Plan) Objects() int {
	n := 0
	for _, it := range p.Delete {
		n += len(it.Objects)
	}
	return n
}

// group is what gc knows of one prefix of the layout.
type group struct {
	kind, prefix string
	objects      []storage.ObjectInfo
}

func (g *group) bytes() int64 {
	var n int64
	for _, o := range g.objects {
		n += o.Size
	}
	return n
}

func (g *group) newest() time.Time {
	var t time.Time
	for _, o := range g.objects {
		if o.ModTime.After(t) {
			t = o.ModTime
		}
	}
	return t
}

// groupOf names the unit of deletion a key belongs to, or "" for a key gc
// never deletes. An artifact's unit is its files ("<prefix>/...") and its
// manifest beside them ("<prefix>.manifest.json").
func groupOf(key string) (kind, prefix string) {
	for _, d := range []struct{ kind, dir string }{{"artifact", "artifacts/"}, {"checkpoint", "checkpoints/"}, {"dataset", layout.Datasets + "/"}} {
		rest, ok := strings.CutPrefix(key, d.dir)
		if !ok {
			continue
		}
		if name, _, ok := strings.Cut(rest, "/"); ok && name != "" {
			return d.kind, d.dir + name + "/"
		}
		if name, ok := strings.CutSuffix(rest, artifact.ManifestSuffix); ok && name != "" {
			return d.kind, d.dir + name + "/"
		}
		return "", ""
	}
	switch {
	case strings.HasPrefix(key, layout.Blobs):
		if _, ok := layout.DigestOfBlob(key); ok {
			return "blob", key
		}
	case strings.HasPrefix(key, layout.Nodes):
		if _, ok := layout.NodeOfRecord(key); ok {
			return "node-record", key
		}
	case strings.HasPrefix(key, layout.Runs):
		if id, ok := layout.RunOfManifest(key); ok {
			return "run", layout.RunManifest(id)
		}
	}
	return "", ""
}

// artifactGroup is the deletion unit of an artifact's prefix (as a
// manifest records it, without the trailing slash).
func artifactGroup(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/" }

// datasetGroup is the deletion unit of an imported dataset of digest d.
func datasetGroup(d string) string {
	return layout.Datasets + "/" + strings.TrimPrefix(d, "sha256:") + "/"
}

// marks collects what is kept, by deletion unit.
type marks map[string]bool

func (m marks) artifact(a engine.NodeStatus) {
	for _, out := range a.Outputs {
		if out.Prefix != "" {
			m[artifactGroup(out.Prefix)] = true
		}
		m.blobs(out)
	}
	if a.Key != "" {
		m[layout.NodeRecord(a.Key)] = true
	}
}

// blobs keeps the shared files artifact a refers to.
func (m marks) blobs(a artifact.Manifest) {
	for _, f := range a.Files {
		if f.Blob != "" {
			m[f.Blob] = true
		}
	}
}

// Make plans a collection of store.
func Make(ctx context.Context, store storage.Store, o Options) (*Plan, error) {
	if o.KeepRuns < 1 {
		return nil, fmt.Errorf("gc: keep at least the newest run of each pipeline (KeepRuns %d)", o.KeepRuns)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	p := &Plan{At: now().UTC(), store: store}
	p.Cutoff = p.At.Add(-o.MinAge)
	objs, err := store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("gc: listing the store: %w", err)
	}
	groups := map[string]*group{}
	for _, ob := range objs {
		kind, prefix := groupOf(ob.Key)
		if kind == "" {
			p.KeptBytes += ob.Size
			continue
		}
		g := groups[prefix]
		if g == nil {
			g = &group{kind: kind, prefix: prefix}
			groups[prefix] = g
		}
		g.objects = append(g.objects, ob)
	}
	keep := marks{}

	// Runs that have not ended.
	live := map[string]bool{}
	for _, ob := range objs {
		id, ok := layout.RunOfLiveMarker(ob.Key)
		if !ok {
			continue
		}
		live[id] = true
		p.LiveRuns = append(p.LiveRuns, id)
		var st *engine.RunStatus
		if o.Live != nil {
			st, err = o.Live(ctx, id)
		}
		if o.Live == nil || err != nil || st == nil {
			// What it has done is unknown: keep everything written since
			// it started.
			p.Unreadable = append(p.Unreadable, id)
			if ob.ModTime.Before(p.Cutoff) {
				p.Cutoff = ob.ModTime
			}
			keep[layout.RunManifest(id)] = true
			continue
		}
		keep[layout.RunManifest(id)] = true
		for _, n := range st.Nodes {
			keep.artifact(n)
			if n.Key != "" {
				keep["checkpoints/"+n.Key+"/"] = true
			}
		}
	}

	// Run manifests: the newest finished runs of each pipeline, live
	// ones, and those the registry has not examined.
	var synced struct {
		Runs map[string]string `json:"runs"`
	}
	if _, err := storage.GetJSON(ctx, store, layout.RegistrySynced, &synced); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("gc: reading %s: %w", layout.RegistrySynced, err)
	}
	manifests := map[string]*engine.RunManifest{}
	byName := map[string][]*engine.RunManifest{}
	for prefix, g := range groups {
		if g.kind != "run" {
			continue
		}
		id, _ := layout.RunOfManifest(prefix)
		var m engine.RunManifest
		if _, err := storage.GetJSON(ctx, store, prefix, &m); err != nil {
			return nil, fmt.Errorf("gc: reading the manifest of run %s: %w", id, err)
		}
		manifests[id] = &m
		switch {
		case live[id] || m.State == engine.Running:
			keep[prefix] = true
			markRun(keep, &m)
		case synced.Runs[id] == "":
			keep[prefix] = true
			markRun(keep, &m)
		default:
			byName[m.Name] = append(byName[m.Name], &m)
		}
	}
	for _, ms := range byName {
		sort.Slice(ms, func(i, j int) bool { return ms[i].CreatedAt.After(ms[j].CreatedAt) })
		for _, m := range ms[:min(o.KeepRuns, len(ms))] {
			keep[layout.RunManifest(m.ID)] = true
			markRun(keep, m)
		}
	}
	for id := range manifests {
		if keep[layout.RunManifest(id)] {
			p.KeptRuns = append(p.KeptRuns, id)
		}
	}
	sort.Strings(p.KeptRuns)

	// Registered models and their lineage. modelNeeds holds the content
	// digests of the artifacts they need, and modelRecords the records of
	// the nodes that made them, for the copies kept below.
	modelNeeds, modelRecords := map[string]bool{}, map[string]bool{}
	for _, ob := range objs {
		name, ok := layout.ModelOf(ob.Key)
		if !ok {
			continue
		}
		if _, ok := layout.VersionOf(name, ob.Key); !ok {
			continue
		}
		var v registry.Version
		if _, err := storage.GetJSON(ctx, store, ob.Key, &v); err != nil {
			return nil, fmt.Errorf("gc: reading model version %s: %w", ob.Key, err)
		}
		keep[artifactGroup(v.Model.Prefix)] = true
		modelNeeds[v.Model.Digest] = true
		for _, m := range v.Metrics {
			modelNeeds[m.Digest] = true
		}
		if v.Key != "" {
			modelRecords[layout.NodeRecord(v.Key)] = true
		}
		keep.blobs(v.Model)
		keep[layout.RunManifest(v.Run)] = true
		for _, d := range v.Datasets {
			keep[datasetGroup(d.Digest)] = true
		}
		if m := manifests[v.Run]; m != nil {
			for _, n := range m.Nodes {
				if n.ID == v.Node || isMetricsNode(v, n) {
					keep.artifact(n)
					if n.Key != "" {
						modelRecords[layout.NodeRecord(n.Key)] = true
					}
				}
			}
		}
	}

	// Node records stay while any of their outputs does; checkpoints only
	// for nodes that may still run. A record newer than the cutoff stays
	// anyway, unread.
	//
	// An output with the content of something a kept model needs stays
	// too, with its record, however old its run: it may be the only good
	// copy. The model's own copy may have rotted or gone, in which case
	// its producer executed again (under another prefix, see
	// docs/operations.md), and nothing but the producer's record refers
	// to the copy it made. So the records of the nodes that made what
	// kept models need are read even when kept. Such copies are rare (a
	// cache hit makes none), so keeping them all costs less than reading
	// every kept model to learn which copy is good.
	for prefix, g := range groups {
		if g.kind != "node-record" || !modelRecords[prefix] && (keep[prefix] || g.newest().After(p.Cutoff)) {
			continue
		}
		var rec engine.NodeRecord
		if _, err := storage.GetJSON(ctx, store, prefix, &rec); err != nil {
			return nil, fmt.Errorf("gc: reading node record %s: %w", prefix, err)
		}
		for _, out := range rec.Outputs {
			if modelNeeds[out.Digest] {
				keep[artifactGroup(out.Prefix)] = true
			}
			if keep[artifactGroup(out.Prefix)] {
				keep[prefix] = true
			}
		}
	}

	if err := keepSharedFiles(ctx, store, groups, keep, p.Cutoff); err != nil {
		return nil, err
	}

	var prefixes []string
	for prefix := range groups {
		prefixes = append(prefixes, prefix)
	}
	sort.Strings(prefixes)
	for _, prefix := range prefixes {
		g := groups[prefix]
		if keep[prefix] || g.newest().After(p.Cutoff) {
			p.KeptBytes += g.bytes()
			continue
		}
		it := Item{Kind: g.kind, Prefix: prefix, Bytes: g.bytes(), Why: why(g, manifests, o.KeepRuns)}
		for _, ob := range g.objects {
			it.Objects = append(it.Objects, ob.Key)
		}
		// The manifest first: an artifact is never seen described but
		// without its files.
		sort.SliceStable(it.Objects, func(i, j int) bool {
			return strings.HasSuffix(it.Objects[i], artifact.ManifestSuffix) && !strings.HasSuffix(it.Objects[j], artifact.ManifestSuffix)
		})
		p.Delete = append(p.Delete, it)
		p.Bytes += it.Bytes
	}
	return p, nil
}

// keepSharedFiles keeps the shared files that the node records and
// artifact manifests which stay (kept, or newer than cutoff) list: a
// record kept for one output, a checkpoint of a live node, an output a run
// wrote after the plan's cutoff.
func keepSharedFiles(ctx context.Context, store storage.Store, groups map[string]*group, keep marks, cutoff time.Time) error {
	for prefix, g := range groups {
		if g.kind == "blob" || g.kind == "run" || (!keep[prefix] && !g.newest().After(cutoff)) {
			continue
		}
		if g.kind == "node-record" {
			var rec engine.NodeRecord
			if _, err := storage.GetJSON(ctx, store, prefix, &rec); err != nil {
				if errors.Is(err, storage.ErrNotFound) {
					continue // replaced or collected meanwhile
				}
				return fmt.Errorf("gc: reading node record %s: %w", prefix, err)
			}
			for _, out := range rec.Outputs {
				keep.blobs(out)
			}
			continue
		}
		// Artifacts, checkpoints and datasets with their manifests beside
		// their files (node outputs have theirs in the node record).
		for _, ob := range g.objects {
			if !strings.HasSuffix(ob.Key, artifact.ManifestSuffix) {
				continue
			}
			var m artifact.Manifest
			if _, err := storage.GetJSON(ctx, store, ob.Key, &m); err != nil {
				if errors.Is(err, storage.ErrNotFound) {
					continue
				}
				return fmt.Errorf("gc: reading %s: %w", ob.Key, err)
			}
			keep.blobs(m)
		}
	}
	return nil
}

// markRun keeps what a run shows: its nodes' outputs and records, and the
// datasets it imported.
func markRun(keep marks, m *engine.RunManifest) {
	for _, n := range m.Nodes {
		keep.artifact(n)
	}
	for _, d := range m.Datasets {
		keep[artifactGroup(d.Prefix)] = true
		keep[datasetGroup(d.Digest)] = true
	}
}

// isMetricsNode tells whether node n of the registering run wrote a report
// among v's metrics.
func isMetricsNode(v registry.Version, n engine.NodeStatus) bool {
	for _, m := range v.Metrics {
		if m.Node == n.ID {
			return true
		}
		for _, out := range n.Outputs {
			if out.Digest == m.Digest {
				return true
			}
		}
	}
	return false
}

func why(g *group, manifests map[string]*engine.RunManifest, keepRuns int) string {
	switch g.kind {
	case "run":
		id, _ := layout.RunOfManifest(g.prefix)
		name := ""
		if m := manifests[id]; m != nil {
			name = m.Name
		}
		return "run " + id + " of " + name + " is older than the newest " + strconv.Itoa(keepRuns) + " and registered no kept model"
	case "artifact":
		return "no kept run shows it and no registered model is it"
	case "node-record":
		return "none of its outputs is kept"
	case "checkpoint":
		return "no live run has its node"
	case "dataset":
		return "no kept run imported it and no registered model was trained on it"
	case "blob":
		return "no kept artifact, model or run refers to this shared file"
	}
	return ""
}

// Apply deletes what the plan found: run manifests and node records first,
// then (after checking the live runs again, sparing the outputs of any that
// appeared since the plan) artifacts, checkpoints and datasets, and last
// the shared files that no live run's outputs list and that were not
// written again since the plan. It returns the bytes deleted.
func (p *Plan) Apply(ctx context.Context, o Options) (int64, error) {
	if len(p.Unreadable) > 0 {
		return 0, fmt.Errorf("gc: run %s has not ended and what it uses cannot be read (an embedded run of another process, or Redis away): "+
			"nothing deleted; collect after it ends, or delete %s if its process died", p.Unreadable[0], layout.LiveMarker(p.Unreadable[0]))
	}
	var deleted int64
	del := func(it Item) error {
		for _, key := range it.Objects {
			if err := p.store.Delete(ctx, key); err != nil {
				return fmt.Errorf("gc: deleting %s: %w", key, err)
			}
		}
		deleted += it.Bytes
		return nil
	}
	for _, it := range p.Delete {
		if it.Kind == "run" || it.Kind == "node-record" {
			if err := del(it); err != nil {
				return deleted, err
			}
		}
	}
	// Runs that started since the plan may have taken a cache hit on a
	// record deleted above before it went.
	spare := marks{}
	objs, err := p.store.List(ctx, layout.Live)
	if err != nil {
		return deleted, fmt.Errorf("gc: listing live runs: %w", err)
	}
	known := map[string]bool{}
	for _, id := range p.LiveRuns {
		known[id] = true
	}
	for _, ob := range objs {
		id, ok := layout.RunOfLiveMarker(ob.Key)
		if !ok {
			continue
		}
		if known[id] {
			// What it has done since the plan may have taken up a shared
			// file planned to go.
			if o.Live != nil {
				if st, err := o.Live(ctx, id); err == nil {
					for _, n := range st.Nodes {
						for _, out := range n.Outputs {
							spare.blobs(out)
						}
					}
				}
			}
			continue
		}
		if o.Live == nil {
			return deleted, fmt.Errorf("gc: run %s started during the collection and its state cannot be read: artifacts left for the next one", id)
		}
		st, err := o.Live(ctx, id)
		if err != nil {
			return deleted, fmt.Errorf("gc: run %s started during the collection: %w (artifacts left for the next one)", id, err)
		}
		for _, n := range st.Nodes {
			spare.artifact(n)
		}
	}
	for _, it := range p.Delete {
		if it.Kind == "run" || it.Kind == "node-record" || it.Kind == "blob" || spare[it.Prefix] {
			continue
		}
		if err := del(it); err != nil {
			return deleted, err
		}
	}
	// Shared files last: an artifact that takes one up writes it again
	// before its record is committed, so one written since the plan stays.
	for _, it := range p.Delete {
		if it.Kind != "blob" || spare[it.Prefix] {
			continue
		}
		info, err := p.store.Stat(ctx, it.Prefix)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			continue
		case err != nil:
			return deleted, fmt.Errorf("gc: checking %s: %w", it.Prefix, err)
		case !info.ModTime.Before(p.Cutoff.Truncate(time.Second)):
			// S3 gives an object's time to the second: written in the
			// cutoff's second or later may be written since the plan.
			continue
		}
		if err := del(it); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}
