package sink

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cespare/xxhash/v2"
)

// fileStamp is a final part's size, modification time and hash.
func fileStamp(path string) (size int64, mod time.Time, sum string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, time.Time{}, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, time.Time{}, "", err
	}
	h := xxhash.New()
	if _, err := io.Copy(h, f); err != nil {
		return 0, time.Time{}, "", fmt.Errorf("read %s: %w", path, err)
	}
	return st.Size(), st.ModTime().UTC(), fmt.Sprintf("%016x", h.Sum64()), nil
}

// PartHash is the xxh64 of the file at path as ShardInfo.XXH64 records a
// final part's: the audit compares every listed part's, whatever its
// modification time says.
func PartHash(path string) (string, error) {
	_, _, sum, err := fileStamp(path)
	return sum, err
}

// stampPart records in info the final file at path as it is now.
func stampPart(path string, info *PartInfo) error {
	size, mod, sum, err := fileStamp(path)
	if err != nil {
		return fmt.Errorf("checksum %s: %w", path, err)
	}
	info.Size, info.ModTime, info.XXH64 = size, mod, sum
	return nil
}

// partChanged says how the final file at path differs from what listed
// recorded when it was written ("" when it does not, or when nothing was
// recorded). The size is compared first; a moved modification time (a copy
// of the directory, a touch) costs a read of the file to compare the hash,
// and on a match the new time is taken into now.
func partChanged(path string, listed PartInfo, now *PartInfo) (string, error) {
	if listed.XXH64 == "" {
		return "", nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Size() != listed.Size {
		return fmt.Sprintf("%d bytes on disk, %d when written", st.Size(), listed.Size), nil
	}
	now.Size, now.ModTime, now.XXH64 = listed.Size, listed.ModTime, listed.XXH64
	if st.ModTime().Equal(listed.ModTime) {
		return "", nil
	}
	size, mod, sum, err := fileStamp(path)
	if err != nil {
		return "", err
	}
	if sum != listed.XXH64 {
		return fmt.Sprintf("its bytes changed (xxh64 %s, %s when written)", sum, listed.XXH64), nil
	}
	now.Size, now.ModTime = size, mod
	return "", nil
}
