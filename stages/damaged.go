package stages

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/nerflow/nerflow/storage"
)

// DamagedInputError reports an input artifact that cannot be read as its
// manifest describes it: a file whose stored bytes no longer hash to the
// recorded digest (bit rot, a hand edit, a partial restore) or that is gone
// from the store. The engine reacts to it by executing the artifact's
// producer again instead of trusting its cache entry; anything else that
// reads artifacts gets an error that names what is damaged.
type DamagedInputError struct {
	// Input is the port the artifact was read through ("" outside a
	// stage).
	Input string
	// Artifact is the damaged artifact's manifest.
	Artifact Artifact
	// File is the file that failed.
	File string
	// Err is the store's error (wraps storage.ErrDigestMismatch or
	// storage.ErrNotFound).
	Err error
}

func (e *DamagedInputError) Error() string {
	port := ""
	if e.Input != "" {
		port = "input " + e.Input + ": "
	}
	p := e.Artifact.Producer
	from := "imported from " + p.Source
	if p.Stage != "" {
		from = fmt.Sprintf("made by %s (node key %.12s, run %s)", p.Stage, p.NodeKey, p.Run)
	}
	return fmt.Sprintf("%sdamaged artifact %s at %s, %s: file %s: %v", port, e.Artifact.Digest, e.Artifact.Prefix, from, e.File, e.Err)
}

func (e *DamagedInputError) Unwrap() error { return e.Err }

// IsDamage reports whether err says that stored bytes are not those a
// manifest lists: a damaged or vanished object, as opposed to a server that
// is away or a cancelled read.
func IsDamage(err error) bool {
	return errors.Is(err, storage.ErrDigestMismatch) || errors.Is(err, storage.ErrNotFound)
}

// damageLog collects the damaged inputs that the reads of one execution
// met. Exec consults it whatever the stage did with the error: a stage may
// wrap it without %w, or carry on with what it read.
type damageLog struct {
	mu    sync.Mutex
	found []*DamagedInputError
}

func (d *damageLog) add(e *DamagedInputError) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.found = append(d.found, e)
	d.mu.Unlock()
}

func (d *damageLog) first() *DamagedInputError {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.found) == 0 {
		return nil
	}
	return d.found[0]
}

// damaged turns a damage error met reading file name of in into a
// DamagedInputError, recorded for Exec; other errors pass unchanged.
func (in *Input) damaged(name string, err error) error {
	if err == nil || !IsDamage(err) {
		return err
	}
	var d *DamagedInputError
	if errors.As(err, &d) {
		return err
	}
	d = &DamagedInputError{Input: in.port, Artifact: in.Artifact, File: name, Err: err}
	in.damage.add(d)
	return d
}

// checkedReader reports the damage that a read of an input file meets at
// its end (the digest is known only then) as a DamagedInputError.
type checkedReader struct {
	io.ReadCloser
	in   *Input
	name string
}

func (r *checkedReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = r.in.damaged(r.name, err)
	}
	return n, err
}
