package storage

import "context"

// Batch is a Store whose Puts are published (readable, atomically) when
// they return but may be durable, that is, safe from a crash of the
// machine, only after Flush. A writer that makes several objects and then
// commits them with one last object (a node's outputs, then its record)
// flushes the batch before that commit instead of paying for the
// durability of each object on its own.
//
// Get, Stat, List and Delete are those of the underlying store; Close does
// not close it.
type Batch interface {
	Store
	// Flush makes every object Put through the batch so far durable.
	Flush(ctx context.Context) error
}

// Batcher is the optional interface of drivers for which the durability
// of each object costs much more when paid one object at a time (the
// filesystem driver's fsyncs). Callers use NewBatch rather than asserting
// it.
type Batcher interface {
	NewBatch() Batch
}

// NewBatch returns a batch over s: the driver's own when it implements
// Batcher, otherwise s itself, whose Puts are durable when they return (an
// S3 PUT is), with a Flush that does nothing.
func NewBatch(s Store) Batch {
	if b, ok := s.(Batcher); ok {
		return b.NewBatch()
	}
	return durableBatch{s}
}

type durableBatch struct{ Store }

func (durableBatch) Flush(context.Context) error { return nil }
func (durableBatch) Close() error                { return nil }
