package view

import "unsafe"

// The index's entries live in blocks of blockLen, one array per field (no
// padding between fields), allocated one block at a time and never moved:
// an index of a million records is 62 blocks of 608 KiB, 38 bytes a record.
// Where the platform has mmap a block is anonymous memory outside the Go
// heap (store_unix.go), so the index counts once in the process's memory:
// not in the garbage collector's pacing, which lets the garbage of the
// records decoded while the index is built grow to the size of the live
// heap.

const (
	blockBits = 14
	blockLen  = 1 << blockBits
	blockMask = blockLen - 1
)

// block holds blockLen entries.
type block struct {
	loc    [blockLen]uint64  // segment<<locBits | the record's offset (JSONL) or row (Parquet)
	key    [blockLen]uint32  // the low 32 bits of the key's hash (keyHash)
	compl  [blockLen]uint32  // completion tokens
	prompt [blockLen]uint32  // prompt tokens
	lat    [blockLen]float32 // latency, ms
	ttft   [blockLen]float32 // time to first token, ms
	rlen   [blockLen]uint32  // characters of reasoning, every turn
	clen   [blockLen]uint32  // characters of content, every turn
	finish [blockLen]uint8   // finish reason, by Index.finish
	flags  [blockLen]uint8   // flag*
}

// blockSize is the bytes of a block.
const blockSize = int(unsafe.Sizeof(block{}))

// A location: the segment in the top 24 bits, the offset or row below.
const (
	locBits = 40
	locMask = 1<<locBits - 1
	maxSegs = 1 << (64 - locBits)
)
