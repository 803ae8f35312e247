package lotusreceive

import (
	"encoding/binary"
	"fmt"

	rlepluslazy "github.com/filecoin-project/go-bitfield/rle"
)

// UnsealedCCTrailer is what follows a CC sector's bytes in lotus' unsealed sector file.
// lotus stores an unsealed sector as its padded bytes (sector size of them), then an RLE+
// bitfield of the byte ranges present, then that bitfield's length as a little-endian uint32
// (lotus' partial file). A CC sector's bytes are zeros, all present. lotus wants an unsealed
// location with every received sector; it drops a CC sector's copy when it finalizes.
func UnsealedCCTrailer(sectorSize uint64) ([]byte, error) {
	runs := &rlepluslazy.RunSliceIterator{Runs: []rlepluslazy.Run{{Val: true, Len: sectorSize}}}
	rle, err := rlepluslazy.EncodeRuns(runs, nil)
	if err != nil {
		return nil, fmt.Errorf("encoding the unsealed file's trailer: %w", err)
	}
	return binary.LittleEndian.AppendUint32(rle, uint32(len(rle))), nil
}
