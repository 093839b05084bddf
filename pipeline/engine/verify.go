package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/layout"
)

// VerifyReport is what Verify found.
type VerifyReport struct {
	// Artifacts, Files and Bytes count what was read and checked (a
	// file that artifacts share counts in Bytes once).
	Artifacts int   `json:"artifacts"`
	Files     int   `json:"files"`
	Bytes     int64 `json:"bytes"`
	// Damaged lists the artifacts (and node records) that failed.
	Damaged []Damage `json:"damaged,omitempty"`
	// Dropped counts the node records Verify deleted (with drop).
	Dropped int `json:"dropped,omitempty"`
	// shared holds the verdict on each shared file read so far.
	shared map[string]error
}

// recordDamage is the Output of a Damage that is a damaged node record.
const recordDamage = "node record"

// Damage is one damaged artifact or node record.
type Damage struct {
	// Node is the node of the run, for a run's check.
	Node string `json:"node,omitempty"`
	// Key is the node key whose record lists the artifact ("" for a
	// dataset).
	Key string `json:"key,omitempty"`
	// Output is the output's name, or "dataset SOURCE", or "node record".
	Output string `json:"output"`
	Prefix string `json:"prefix,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Problems has one line per damaged file.
	Problems []string `json:"problems"`
}

// Verify reads every file of every artifact of run (of the whole store
// when run is "": every node record's outputs and every imported dataset)
// and checks it against its manifest's size and digest. With drop, the
// node record of each damaged output is deleted, so that the next run that
// needs the node executes it again instead of finding it cached (a run
// does that by itself when it reads the damage; drop spares it the failed
// read). Errors that are not damage (the store away) end the check.
func (e *Engine) Verify(ctx context.Context, run string, drop bool) (*VerifyReport, error) {
	r := &VerifyReport{}
	if run != "" {
		if err := e.verifyRun(ctx, run, r); err != nil {
			return r, err
		}
	} else if err := e.verifyStore(ctx, r); err != nil {
		return r, err
	}
	if drop {
		for _, d := range r.Damaged {
			var dropped bool
			var err error
			if d.Output == recordDamage {
				dropped, err = true, e.store.Delete(ctx, layout.NodeRecord(d.Key))
			} else {
				dropped, err = e.dropRecordNaming(ctx, d.Key, d.Prefix)
			}
			if err != nil {
				return r, fmt.Errorf("dropping the record of %s: %w", Short(d.Key), err)
			}
			if dropped {
				r.Dropped++
			}
		}
	}
	return r, nil
}

func (e *Engine) verifyRun(ctx context.Context, run string, r *VerifyReport) error {
	m, err := e.RunManifest(ctx, run)
	if err != nil {
		return err
	}
	st, err := e.Status(ctx, run)
	if err != nil {
		return err
	}
	for _, src := range slices.Sorted(maps.Keys(m.Datasets)) {
		if err := e.verifyArtifact(ctx, r, Damage{Output: "dataset " + src}, m.Datasets[src]); err != nil {
			return err
		}
	}
	for _, n := range st.Nodes {
		for _, name := range n.OutputNames() {
			a := n.Outputs[name]
			if err := e.verifyArtifact(ctx, r, Damage{Node: n.ID, Key: a.Producer.NodeKey, Output: name}, a); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Engine) verifyStore(ctx context.Context, r *VerifyReport) error {
	objs, err := e.store.List(ctx, layout.Nodes)
	if err != nil {
		return fmt.Errorf("listing node records: %w", err)
	}
	for _, o := range objs {
		key, ok := layout.NodeOfRecord(o.Key)
		if !ok {
			continue
		}
		rec, err := e.NodeRecord(ctx, key)
		switch {
		case isDamagedRecord(err):
			r.Damaged = append(r.Damaged, Damage{Key: key, Output: recordDamage, Prefix: o.Key, Problems: []string{err.Error()}})
			continue
		case errors.Is(err, storage.ErrNotFound):
			continue // deleted since the listing
		case err != nil:
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(rec.Outputs)) {
			if err := e.verifyArtifact(ctx, r, Damage{Node: rec.Node, Key: key, Output: name}, rec.Outputs[name]); err != nil {
				return err
			}
		}
	}
	objs, err = e.store.List(ctx, layout.Datasets+"/")
	if err != nil {
		return fmt.Errorf("listing datasets: %w", err)
	}
	for _, o := range objs {
		prefix, ok := strings.CutSuffix(o.Key, artifact.ManifestSuffix)
		if !ok {
			continue
		}
		a, err := artifact.Read(ctx, e.store, prefix)
		if err != nil {
			if storage.IsTransient(err) {
				return err
			}
			r.Damaged = append(r.Damaged, Damage{Output: "dataset", Prefix: prefix, Problems: []string{err.Error()}})
			continue
		}
		if err := e.verifyArtifact(ctx, r, Damage{Output: "dataset " + a.Producer.Source}, a); err != nil {
			return err
		}
	}
	return nil
}

// verifyArtifact checks every file of a, adding d (completed) to r when
// one is damaged.
func (e *Engine) verifyArtifact(ctx context.Context, r *VerifyReport, d Damage, a stages.Artifact) error {
	r.Artifacts++
	d.Prefix, d.Digest = a.Prefix, a.Digest
	if err := a.Validate(); err != nil {
		d.Problems = append(d.Problems, err.Error())
	}
	for _, f := range a.Files {
		r.Files++
		if prev, seen := r.shared[f.Blob]; f.Shared() && seen {
			// A shared file (the word vectors every model of a table
			// carries) is read once, its verdict given to every artifact
			// that lists it.
			if prev != nil {
				d.Problems = append(d.Problems, fmt.Sprintf("%s: %v", f.Name, prev))
			}
			continue
		}
		err := artifact.VerifyFile(ctx, e.store, a, f.Name)
		if f.Shared() && (err == nil || stages.IsDamage(err)) {
			if r.shared == nil {
				r.shared = map[string]error{}
			}
			r.shared[f.Blob] = err
		}
		switch {
		case err == nil:
			r.Bytes += f.Size
		case stages.IsDamage(err):
			d.Problems = append(d.Problems, fmt.Sprintf("%s: %v", f.Name, err))
		default:
			return fmt.Errorf("checking %s: %w", a.Key(f.Name), err)
		}
	}
	if len(d.Problems) > 0 {
		r.Damaged = append(r.Damaged, d)
	}
	return nil
}
