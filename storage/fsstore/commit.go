package fsstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Group commit. Every worker of a process flushes a batch per node, and
// the batches of concurrent nodes share directories (artifacts/, the
// parent of every attempt). Synced one batch at a time, each flush pays
// its own fsyncs of the shared directories, and the flushes queue behind
// each other's device writes anyway. So the batches' flushes go through
// the store's committer: one group is synced at a time, and the flushes
// that arrive meanwhile join the next group, which syncs each file and
// directory once for all of them. A Flush returns when the group it
// joined has been synced: never before its own files and directories are
// durable, and never waiting for more than the group in progress and its
// own.

// group is one sync of the files and directories of every batch that
// joined it.
type group struct {
	files map[string]*os.File // nil: synced by path
	dirs  map[string]bool
	done  chan struct{} // closed once errs is set
	errs  map[string]error
}

// committer collects batches' flushes into groups and syncs one group at a
// time.
type committer struct {
	sync    func(*group) map[string]error
	mu      sync.Mutex
	next    *group // the group collecting flushes; nil if none
	syncing bool   // a goroutine is syncing groups
}

func newCommitter(sync func(*group) map[string]error) *committer {
	return &committer{sync: sync}
}

// join adds files and dirs to the next group and returns it. The group
// takes the files over: it closes them once synced.
func (c *committer) join(files map[string]*os.File, dirs map[string]bool) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.next
	if g == nil {
		g = &group{files: map[string]*os.File{}, dirs: map[string]bool{}, done: make(chan struct{})}
		c.next = g
	}
	for p, f := range files {
		if old, dup := g.files[p]; dup && old != f {
			// Two batches put one key: which file is the current
			// object depends on the order of their renames, so the
			// path is synced instead of either.
			closeFile(old)
			closeFile(f)
			f = nil
		}
		g.files[p] = f
	}
	for d := range dirs {
		g.dirs[d] = true
	}
	if !c.syncing {
		c.syncing = true
		go c.loop()
	}
	return g
}

// loop syncs groups until no flush is waiting.
func (c *committer) loop() {
	for {
		c.mu.Lock()
		g := c.next
		c.next = nil
		if g == nil {
			c.syncing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		g.errs = c.sync(g)
		close(g.done)
	}
}

// flush makes files and dirs durable through the next group; a nil
// committer syncs them on the spot, one fsync each. It returns the errors
// of its own paths only: another batch's failure is not its own, but a
// directory it shares with that batch is.
func (c *committer) flush(ctx context.Context, files map[string]*os.File, dirs map[string]bool) error {
	if len(files) == 0 && len(dirs) == 0 {
		return nil
	}
	var errs map[string]error
	if c == nil {
		errs = syncEach(&group{files: files, dirs: dirs})
	} else {
		g := c.join(files, dirs)
		select {
		case <-g.done:
		case <-ctx.Done():
			// The group syncs them anyway; the caller may flush again.
			return ctx.Err()
		}
		errs = g.errs
	}
	if len(errs) == 0 {
		return nil
	}
	var own []error
	for p := range files {
		if err := errs[p]; err != nil {
			own = append(own, err)
		}
	}
	for d := range dirs {
		if err := errs[d]; err != nil {
			own = append(own, err)
		}
	}
	return errors.Join(own...)
}

// syncEach syncs a group with one fsync per file and directory: the files
// first, all at once, then the directories, all at once (see batch.go for
// why in that order). It is the portable way.
func syncEach(g *group) map[string]error {
	var mu sync.Mutex
	errs := map[string]error{}
	record := func(p string, err error) error {
		if err != nil {
			mu.Lock()
			errs[p] = fmt.Errorf("%s: %w", p, err)
			mu.Unlock()
		}
		return nil
	}
	syncAll(g.files, func(p string, f *os.File) error {
		if f == nil {
			return record(p, syncPath(p))
		}
		err := syncFile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return record(p, err)
	})
	syncAll(g.dirs, func(p string, _ bool) error { return record(p, syncPath(p)) })
	return errs
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}
