package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/layout"
)

// The store writes of a node. A stage's outputs are small objects (its
// files) and the node record commits them, holding the outputs' manifests:
// those are not stored beside the files too (stages.Env.RecordsManifests),
// which cost an object per output.
// Making each object durable on its own costs a few fsyncs per object on a
// filesystem store, which was most of the engine's overhead per node; so
// the outputs are written through a storage.Batch, made durable together
// just before the record is written.
//
// The record itself is not flushed. A record that a crash of the machine
// loses or tears is a cache miss (NodeRecord rejects a damaged record, and
// restore then queues the node again), never a hit on missing outputs:
// those were durable before the record was written.

// outputStore is the store a stage writes through: objects under the
// attempt's output prefixes go into a batch, flushed before the node
// record; everything else (checkpoints, which must survive the attempt on
// their own) is durable as it is written.
type outputStore struct {
	storage.Store
	batch storage.Batch
	// prefix starts the prefix of every output of the attempt
	// (layout.AttemptOutputs).
	prefix string
}

func newOutputStore(s storage.Store, prefix string) *outputStore {
	return &outputStore{Store: s, batch: storage.NewBatch(s), prefix: prefix}
}

// outputPrefix is the prefix of output name (stages.Env.OutputPrefixOf).
func (o *outputStore) outputPrefix(name string) string { return o.prefix + name }

func (o *outputStore) Put(ctx context.Context, key string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	if strings.HasPrefix(key, o.prefix) {
		return o.batch.Put(ctx, key, r, opts...)
	}
	return o.Store.Put(ctx, key, r, opts...)
}

// Close leaves the engine's store open.
func (o *outputStore) Close() error { return nil }

// commitRecord writes the node record, the cache entry of its key, through
// a batch that is not flushed (see above), where no record is: it fails
// with storage.ErrExists otherwise (see the fencing in lock.go).
func (e *Engine) commitRecord(ctx context.Context, rec *NodeRecord) error {
	b := storage.NewBatch(e.store)
	defer b.Close()
	_, err := storage.PutJSON(ctx, b, layout.NodeRecord(rec.Key), rec, storage.IfAbsent())
	return err
}

var errBadRecord = errors.New("damaged node record")

// isDamagedRecord reports whether err, NodeRecord's or cachedRecord's,
// says that the record is damaged: unreadable, not the object its store
// lists, or naming outputs that are gone.
func isDamagedRecord(err error) bool {
	return errors.Is(err, errBadRecord) || errors.Is(err, storage.ErrDigestMismatch)
}

// isCacheMiss reports whether err says that node key has no usable record:
// none, or a damaged one (executing the node again rewrites it).
func isCacheMiss(err error) bool {
	return errors.Is(err, storage.ErrNotFound) || isDamagedRecord(err)
}

// errOutputsGone says that a node record names outputs whose files are no
// longer stored as recorded (deleted, lost in a restore, replaced).
var errOutputsGone = errors.New("its outputs are no longer stored as recorded")

// cachedRecord is NodeRecord for a cache lookup: a record whose outputs'
// files are gone or replaced (as their stored size and digest tell, without
// reading them) is a damaged record, a cache miss, and executing the node
// again rewrites it. Bytes that rotted under an intact recorded digest are
// found by whoever reads them (see repair.go).
func (e *Engine) cachedRecord(ctx context.Context, key string) (*NodeRecord, error) {
	rec, err := e.NodeRecord(ctx, key)
	if err != nil {
		return nil, err
	}
	for name, a := range rec.Outputs {
		ok, err := artifact.Stored(ctx, e.store, a)
		if err != nil {
			return nil, fmt.Errorf("looking up cache: output %s of %s: %w", name, Short(key), err)
		}
		if !ok {
			return nil, fmt.Errorf("%w %s: output %s at %s: %w", errBadRecord, Short(key), name, a.Prefix, errOutputsGone)
		}
	}
	return rec, nil
}

// NodeRecord reads the committed record of node key (storage.ErrNotFound
// when the node was never committed: a cache miss). It is where the
// manifests of the node's outputs are stored.
func (e *Engine) NodeRecord(ctx context.Context, key string) (*NodeRecord, error) {
	rc, _, err := e.store.Get(ctx, layout.NodeRecord(key))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var rec NodeRecord
	if err := json.NewDecoder(rc).Decode(&rec); err != nil {
		if errors.Is(err, storage.ErrDigestMismatch) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %s: %v", errBadRecord, Short(key), err)
	}
	if rec.Key != key || rec.Outputs == nil {
		return nil, fmt.Errorf("%w %s: it holds node %q", errBadRecord, Short(key), rec.Key)
	}
	for name, a := range rec.Outputs {
		// An output of another manifest format, or whose digest does not
		// match its content, is no cache hit.
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("%w %s: output %s: %v", errBadRecord, Short(key), name, err)
		}
	}
	return &rec, nil
}
