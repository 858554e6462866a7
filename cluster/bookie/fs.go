package bookie

import (
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
)

// FS is the filesystem under the journal (which holds the entries) and the
// checkpoint file. It is an interface so that tests (and failpoints in a real
// process) can make writes fail with ENOSPC and syncs fail with EIO. The
// entry index lives in pebble, which has its own vfs; its faults surface as
// ErrStorage.
type FS interface {
	// OpenFile opens name like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	MkdirAll(name string, perm os.FileMode) error
	// ReadDirNames lists the names in a directory, sorted.
	ReadDirNames(name string) ([]string, error)
	// SyncDir makes a directory's entries (creations, renames, removals)
	// durable.
	SyncDir(name string) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	// ReaderAt is pread: reads of entries from journal files, concurrent
	// with each other and with appends through another handle.
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes the file's data durable (fdatasync: data and the size, not
	// the timestamps).
	Sync() error
	Truncate(size int64) error
	Seek(offset int64, whence int) (int64, error)
}

// OSFS is the real filesystem.
type OSFS struct{}

type osFile struct{ *os.File }

// Sync is fdatasync: the journal only needs its data and length durable, and
// skipping the inode timestamps saves a metadata write per sync.
func (f osFile) Sync() error {
	for {
		err := syscall.Fdatasync(int(f.File.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Remove(name string) error                     { return os.Remove(name) }
func (OSFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (OSFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }

func (OSFS) ReadDirNames(name string) ([]string, error) {
	ents, err := os.ReadDir(name) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (OSFS) SyncDir(name string) error {
	d, err := os.Open(filepath.Clean(name))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// noSyncFS is an FS whose syncs do nothing (Config.NoSync): files and
// directories are written as usual and reach the disk whenever the kernel
// writes them back.
type noSyncFS struct{ FS }

func (fs noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// SyncDir does nothing: see noSyncFS.
func (noSyncFS) SyncDir(string) error { return nil }

type noSyncFile struct{ File }

// Sync does nothing: see noSyncFS.
func (noSyncFile) Sync() error { return nil }

// FaultFS wraps an FS and injects errors into writes and syncs of its files.
// A fault armed with after = n lets n more calls succeed and then fails every
// later call with err, until it is cleared. It is what tests and the
// journal-write / journal-fsync failpoints use. Faults may be armed and
// cleared while its files are in use.
type FaultFS struct {
	FS
	// clock times slow syncs; nil is the real clock. Set before use.
	clock clockwork.Clock
	mu    sync.Mutex
	write fault     // guarded by mu
	sync  fault     // guarded by mu
	slow  slowFault // guarded by mu
}

type fault struct {
	err   error
	after int
}

// slowFault delays syncs by delay after `after` more undelayed ones; a zero
// delay is off.
type slowFault struct {
	delay time.Duration
	after int
}

// NewFaultFS wraps fs with no fault armed.
func NewFaultFS(fs FS) *FaultFS { return &FaultFS{FS: fs} }

// FailWrites makes file writes fail with err (e.g. syscall.ENOSPC) after
// `after` more successful ones; a nil err clears the fault.
func (f *FaultFS) FailWrites(err error, after int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.write = fault{err: err, after: after}
}

// FailSyncs makes file syncs fail with err (e.g. syscall.EIO) after `after`
// more successful ones; a nil err clears the fault.
func (f *FaultFS) FailSyncs(err error, after int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sync = fault{err: err, after: after}
}

// SlowSyncs makes every file sync wait delay before it syncs, after `after`
// more undelayed ones: a slow disk. A zero delay clears it.
func (f *FaultFS) SlowSyncs(delay time.Duration, after int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow = slowFault{delay: delay, after: after}
}

// armed is a snapshot of the faults.
func (f *FaultFS) armed() (write, sync fault, slow slowFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.write, f.sync, f.slow
}

// syncDelay is how long the next sync waits first.
func (f *FaultFS) syncDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.slow.delay == 0 {
		return 0
	}
	if f.slow.after > 0 {
		f.slow.after--
		return 0
	}
	return f.slow.delay
}

func (f *FaultFS) check(which *fault) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if which.err == nil {
		return nil
	}
	if which.after > 0 {
		which.after--
		return nil
	}
	return which.err
}

func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

type faultFile struct {
	File
	fs *FaultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check(&f.fs.write); err != nil {
		// A full disk often takes part of a write before refusing the
		// rest; do the same so the journal's truncate-back is exercised.
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: "journal", Err: err}
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if d := f.fs.syncDelay(); d > 0 {
		if f.fs.clock != nil {
			f.fs.clock.Sleep(d)
		} else {
			time.Sleep(d)
		}
	}
	if err := f.fs.check(&f.fs.sync); err != nil {
		return &os.PathError{Op: "fdatasync", Path: "journal", Err: err}
	}
	return f.File.Sync()
}
