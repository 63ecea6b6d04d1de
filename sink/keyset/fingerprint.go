package keyset

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Fingerprint is a key's 128-bit hash (FingerprintOf): what the key set
// holds of a key whose id is not a row index, and what the audit of a
// directory indexes its keys by.
type Fingerprint struct{ hi, lo uint64 }

func cmpFP(a, b Fingerprint) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

// FingerprintOf hashes the key's sample and id (the sample as 8 bytes ahead
// of the id, so that no two keys are the same bytes).
func FingerprintOf(k Key) Fingerprint {
	var d xxhash.Digest
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], uint64(k.Sample))
	d.ResetWithSeed(0x9e3779b97f4a7c15)
	_, _ = d.Write(s[:])
	_, _ = d.WriteString(k.ID)
	hi := d.Sum64()
	d.ResetWithSeed(0xc2b2ae3d27d4eb4f)
	_, _ = d.Write(s[:])
	_, _ = d.WriteString(k.ID)
	return Fingerprint{hi: hi, lo: d.Sum64()}
}
