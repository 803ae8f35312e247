// Package scratch gives a released layer slot's space back: BLKDISCARD on block devices, hole
// punching on regular files. Either way the old labels are gone and cannot be mistaken for a
// new batch's.
package scratch

import (
	"fmt"
	"os"
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
