// Package commcid writes and reads Filecoin sector commitments as CIDs, the form lotus,
// Curio and deal tooling show: commD as a piece CID (baga6ea4seaq…) and commR as a sealed CID
// (bagboea4b5abc…). It builds them with go-cid and go-multihash from the codes of the
// multicodec table.
package commcid

import (
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// Multicodec codes of Filecoin commitments.
const (
	codecUnsealed = 0xf101 // fil-commitment-unsealed
	codecSealed   = 0xf102 // fil-commitment-sealed
	hashUnsealed  = 0x1012 // sha2-256-trunc254-padded
	hashSealed    = 0xb401 // poseidon-bls12_381-a2-fc1
)

// PieceCID is commD as a piece CID.
func PieceCID(commD [32]byte) (string, error) { return encode(codecUnsealed, hashUnsealed, commD) }

// SealedCID is commR as a sealed CID.
func SealedCID(commR [32]byte) (string, error) { return encode(codecSealed, hashSealed, commR) }

func encode(codec, hash uint64, comm [32]byte) (string, error) {
	mh, err := multihash.Encode(comm[:], hash)
	if err != nil {
		return "", err
	}
	return cid.NewCidV1(codec, mh).String(), nil
}

// ParsePieceCID reads a piece CID back into commD.
func ParsePieceCID(s string) ([32]byte, error) {
	return decode(s, codecUnsealed, hashUnsealed, "piece")
}

// ParseSealedCID reads a sealed CID back into commR.
func ParseSealedCID(s string) ([32]byte, error) { return decode(s, codecSealed, hashSealed, "sealed") }

func decode(s string, codec, hash uint64, kind string) ([32]byte, error) {
	var out [32]byte
	c, err := cid.Decode(s)
	if err != nil {
		return out, fmt.Errorf("not a CID: %w", err)
	}
	dec, err := multihash.Decode(c.Hash())
	if err != nil {
		return out, err
	}
	if c.Version() != 1 || c.Type() != codec || dec.Code != hash || len(dec.Digest) != len(out) {
		return out, fmt.Errorf("not a %s commitment CID (codec 0x%x, hash 0x%x, %d bytes)", kind, c.Type(), dec.Code, len(dec.Digest))
	}
	copy(out[:], dec.Digest)
	return out, nil
}
