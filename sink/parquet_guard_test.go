package sink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/lz4"
)

// TestScanParquetKeysRefusesLZ4: a corrupt LZ4 page makes parquet-go grow a
// buffer without bound (a fatal out-of-memory no recover catches), so the
// resume's key scan refuses LZ4 columns before reading a page, naming the
// file, instead of trusting what it finds in DIR/data.
func TestScanParquetKeysRefusesLZ4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part-000000.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[Record](f, parquet.Compression(&lz4.Codec{}))
	if _, err := w.Write([]Record{{ID: "1"}, {ID: "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = scanParquetKeys(path, func(Key, int) error { return nil })
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "LZ4") {
		t.Fatalf("scanParquetKeys on an LZ4 file: err = %v; want an error naming %s and LZ4", err, path)
	}
}
