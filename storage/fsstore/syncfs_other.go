//go:build !linux

package fsstore

// fsSyncer is Linux's syncfs (syncfs_linux.go); elsewhere every batch
// fsyncs its own files and directories.
type fsSyncer struct{}

func newFSSyncer(string) *fsSyncer { return nil }

func (*fsSyncer) sync(g *group) map[string]error { return syncEach(g) }

func (*fsSyncer) close() error { return nil }
