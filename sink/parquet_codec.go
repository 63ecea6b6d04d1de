package sink

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// partCodec is Zstandard as parquet.Zstd writes it, with a window of
// 1 MiB instead of the library's 8 MiB: a page is far smaller than either,
// so the files are the same size, and the encoder's history buffers are an
// eighth (see ARCHITECTURE.md, "Measured decisions"). One encoder serves
// every conversion; EncodeAll may be called concurrently.
var partCodec = &zstdCodec{}

type zstdCodec struct {
	once sync.Once
	enc  *zstd.Encoder
	err  error
}

func (c *zstdCodec) String() string { return parquet.Zstd.String() }
func (c *zstdCodec) CompressionCodec() format.CompressionCodec {
	return parquet.Zstd.CompressionCodec()
}
func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) { return parquet.Zstd.Decode(dst, src) }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.once.Do(func() {
		c.enc, c.err = zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(1<<20),
			zstd.WithZeroFrames(true),
			zstd.WithEncoderCRC(false),
		)
	})
	if c.err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", c.err)
	}
	return c.enc.EncodeAll(src, dst[:0]), nil
}
