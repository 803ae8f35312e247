package nodeprep

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
)

// probeBytes is how much of a device the signature probe reads (btrfs sits at 64 KiB).
const probeBytes = 72 * 1024

// signature reads the start of root/dev/<name> and names the first partition table, RAID,
// LVM or filesystem signature found, or "" when none (or the device cannot be read). It is
// read-only and looks at fixed offsets like blkid, without claiming to know every format;
// md metadata 0.90/1.0 (at the end of the device) is not probed.
func (p *prep) signature(name string) string {
	f, err := os.Open(filepath.Join(p.root, "dev", name))
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, probeBytes)
	n, _ := io.ReadFull(f, buf)
	return Signature(buf[:n])
}

// Signature names the signature at the start of a device image, or "".
func Signature(b []byte) string {
	at := func(off int, magic string) bool {
		return len(b) >= off+len(magic) && bytes.Equal(b[off:off+len(magic)], []byte(magic))
	}
	le32 := func(off int) uint32 {
		if len(b) < off+4 {
			return 0
		}
		return binary.LittleEndian.Uint32(b[off:])
	}
	const mdMagic = 0xa92b4efc
	switch {
	case at(512, "EFI PART") || at(4096, "EFI PART"):
		return "GPT partition table"
	case at(512, "LABELONE") || at(0, "LABELONE") || at(1024, "LABELONE") || at(1536, "LABELONE"):
		return "LVM2 physical volume"
	case le32(4096) == mdMagic || le32(0) == mdMagic:
		return "Linux RAID (md)"
	case at(0, "LUKS\xba\xbe"):
		return "LUKS"
	case at(0, "XFSB"):
		return "XFS"
	case at(1080, "\x53\xef"):
		return "ext2/3/4"
	case at(65600, "_BHRfS_M"):
		return "btrfs"
	case at(4086, "SWAPSPACE2") || at(4086, "SWAP-SPACE"):
		return "swap"
	case len(b) >= 512 && b[510] == 0x55 && b[511] == 0xaa && !allZero(b[446:510]):
		return "MBR partition table"
	}
	return ""
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
