// Package scratch gives a released layer slot's space back: BLKDISCARD on block devices, hole
// punching on regular files. Either way the old labels are gone and cannot be mistaken for a
// new batch's.
package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Discard drops [offset, offset+length) of the device or file at path. A range past the end
// of a file is clipped; a file that does not exist has nothing to discard.
func Discard(path string, offset, length int64) error {
	if offset < 0 || length < 0 {
		return fmt.Errorf("%s: negative offset or length", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return discard(f, path, offset, length)
}

// DiscardConfined is Discard for a layer device named by an admin's spec, re-checked on the
// node: a path under /dev/ must be a block device; any other path must be a regular file whose
// real path, symlinks resolved, stays under the root (one of roots) it is named under. A file
// that does not exist has nothing to discard.
func DiscardConfined(path string, roots []string, offset, length int64) error {
	if offset < 0 || length < 0 {
		return fmt.Errorf("%s: negative offset or length", path)
	}
	var f *os.File
	var err error
	if strings.HasPrefix(path, "/dev/") {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	} else {
		f, err = openBeneath(path, roots)
	}
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	switch isDev := st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0; {
	case strings.HasPrefix(path, "/dev/") && !isDev:
		return fmt.Errorf("%s: not a block device (%s); refusing to scrub it", path, st.Mode().Type())
	case !strings.HasPrefix(path, "/dev/") && !st.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file (%s); refusing to scrub it", path, st.Mode().Type())
	}
	return discard(f, path, offset, length)
}

// openBeneath opens path for writing without leaving the root it lies under: openat2 with
// RESOLVE_BENEATH where the kernel has it (5.6 and later), else the real path checked against
// the root's and opened without following a final symlink.
func openBeneath(path string, roots []string) (*os.File, error) {
	path = filepath.Clean(path)
	root := ""
	for _, r := range roots {
		r = filepath.Clean(r)
		if strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/") {
			root = r
			break
		}
	}
	if root == "" {
		return nil, fmt.Errorf("%s: outside the node's hostPathRoots %v; refusing to scrub it", path, roots)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, root), "/")
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: unix.O_RDWR | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), path), nil
	case errors.Is(err, unix.EXDEV):
		return nil, fmt.Errorf("%s: resolves outside its root %s (a symlink?); refusing to scrub it", path, root)
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
		return openResolved(path, root) // no openat2 (or a seccomp filter refusing it)
	}
	return nil, &os.PathError{Op: "open", Path: path, Err: err}
}

// openResolved is openBeneath without openat2.
func openResolved(path, root string) (*os.File, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(resolved, strings.TrimSuffix(realRoot, "/")+"/") {
		return nil, fmt.Errorf("%s: resolves to %s, outside its root %s; refusing to scrub it", path, resolved, root)
	}
	return os.OpenFile(resolved, os.O_RDWR|unix.O_NOFOLLOW, 0)
}

// discard drops the range of an open device or file.
func discard(f *os.File, path string, offset, length int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeDevice != 0 {
		rng := [2]uint64{uint64(offset), uint64(length)}
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKDISCARD, uintptr(unsafe.Pointer(&rng))); errno != 0 {
			return fmt.Errorf("%s: BLKDISCARD %d+%d: %v", path, offset, length, errno)
		}
		return nil
	}
	if offset >= st.Size() || length == 0 {
		return nil
	}
	if offset+length > st.Size() {
		length = st.Size() - offset
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, offset, length); err != nil {
		return fmt.Errorf("%s: punching a hole at %d+%d: %w", path, offset, length, err)
	}
	return nil
}
