package fsstore

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// One syncfs for a group. On a filesystem without a journal (ext4 can run
// without one) every fsync writes its inode and directory blocks on its
// own and flushes the device's cache, so a node's four fsyncs are four
// flushes; with a journal they are each a commit. syncfs(2) writes back
// everything dirty on the filesystem and flushes (or commits) once, for
// every batch of the group.
//
// It writes back the dirty data of other writers too, so it is only used
// when that is little: the group is synced file by file instead when more
// than syncfsMaxDirty bytes of the machine wait to be written (a training
// saving a checkpoint on the same disk), which bounds what a flush waits
// for. Writeback that syncfs starts covers only pages dirtied before it
// started, so data dirtied meanwhile does not prolong it.
//
// Only filesystems whose syncfs is known to write back and flush (or
// commit) everything qualify: ext2/3/4, XFS and Btrfs. A FUSE or network
// filesystem's may do less, and every path of the group must be on the
// root's filesystem (a directory of the store may be a mount point or a
// symlink to another disk). Errors: syncfs reports a writeback error of
// the filesystem since the descriptor was opened (Linux 5.8 and later), so
// the descriptor is opened once per store and kept; older kernels report
// none, and there the files are fsynced one by one.

// syncfsMaxDirty bounds the dirty and in-writeback memory of the machine
// under which a group is synced with syncfs.
const syncfsMaxDirty = 32 << 20

// Filesystem magic numbers (statfs f_type) whose syncfs writes back
// everything and flushes or commits.
var syncfsTypes = map[int64]string{
	unix.EXT4_SUPER_MAGIC:  "ext4",
	unix.XFS_SUPER_MAGIC:   "xfs",
	unix.BTRFS_SUPER_MAGIC: "btrfs",
}

// fsSyncer syncs groups of one store's root filesystem with syncfs.
type fsSyncer struct {
	root    string
	dev     uint64
	once    sync.Once
	fd      *os.File // the root, kept open for syncfs's error reports
	openErr error
	// dirty returns the bytes of the machine waiting to be written.
	dirty func() (int64, error)
}

// newFSSyncer returns a syncer for the filesystem of root, or nil when
// syncfs cannot stand for fsync there.
func newFSSyncer(root string) *fsSyncer {
	if !kernelReportsSyncfsErrors() {
		return nil
	}
	var fs unix.Statfs_t
	var st unix.Stat_t
	if unix.Statfs(root, &fs) != nil || unix.Stat(root, &st) != nil {
		return nil
	}
	if _, ok := syncfsTypes[int64(fs.Type)]; !ok {
		return nil
	}
	return &fsSyncer{root: root, dev: st.Dev, dirty: dirtyBytes}
}

// sync syncs g: with one syncfs when it qualifies, else file by file.
func (s *fsSyncer) sync(g *group) map[string]error {
	if !s.covers(g) {
		return syncEach(g)
	}
	if n, err := s.dirty(); err != nil || n > syncfsMaxDirty {
		return syncEach(g)
	}
	s.once.Do(func() { s.fd, s.openErr = os.Open(s.root) })
	err := s.openErr
	if err == nil {
		err = unix.Syncfs(int(s.fd.Fd()))
	}
	for _, f := range g.files {
		closeFile(f)
	}
	if err == nil {
		return nil
	}
	errs := map[string]error{}
	for p := range g.files {
		errs[p] = fmt.Errorf("%s: syncfs: %w", p, err)
	}
	for p := range g.dirs {
		errs[p] = fmt.Errorf("%s: syncfs: %w", p, err)
	}
	return errs
}

// covers reports whether every path of g is on the root's filesystem. A
// path that is gone (deleted since) has nothing to sync.
func (s *fsSyncer) covers(g *group) bool {
	var st unix.Stat_t
	for p, f := range g.files {
		var err error
		if f != nil {
			err = unix.Fstat(int(f.Fd()), &st)
		} else {
			err = unix.Stat(p, &st)
		}
		if err == nil && st.Dev != s.dev {
			return false
		}
	}
	for d := range g.dirs {
		if unix.Stat(d, &st) == nil && st.Dev != s.dev {
			return false
		}
	}
	return true
}

func (s *fsSyncer) close() error {
	if s.fd != nil {
		return s.fd.Close()
	}
	return nil
}

// dirtyBytes reads the machine's dirty and in-writeback memory from
// /proc/meminfo.
func dirtyBytes() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	var total int64
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || (string(name) != "Dirty" && string(name) != "Writeback") {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: unexpected %s line %q", name, sc.Bytes())
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: %s: %w", name, err)
		}
		total += kb << 10
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("/proc/meminfo: no Dirty or Writeback line")
	}
	return total, nil
}

// kernelReportsSyncfsErrors reports whether the kernel is Linux 5.8 or
// later, the first whose syncfs returns writeback errors.
func kernelReportsSyncfsErrors() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 8
}
