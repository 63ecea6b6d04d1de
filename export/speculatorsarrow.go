package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// dsFeatures are the columns of speculators' preprocessed dataset as
// datasets (>= 4, which speculators requires) describes them in
// dataset_info.json and in the Arrow schema's "huggingface" metadata:
// input_ids and loss_mask lists of int64 (prepare_data.py builds them as
// torch.long tensors), seq_len an int64.
var dsFeatures = map[string]any{
	"input_ids": map[string]any{"feature": map[string]any{"dtype": "int64", "_type": "Value"}, "_type": "List"},
	"loss_mask": map[string]any{"feature": map[string]any{"dtype": "int64", "_type": "Value"}, "_type": "List"},
	"seq_len":   map[string]any{"dtype": "int64", "_type": "Value"},
}

// A record batch is held in memory until written: it closes at
// arrowBatchRows rows (datasets' own writer batches 1,000) or, for long
// rows (1,000 of 64K tokens would be 1 GB), at arrowBatchValues ids and
// mask values (32 MB).
var (
	arrowBatchRows   = 1000
	arrowBatchValues = 4 << 20
)

// arrowRows writes speculators rows as the Arrow IPC stream that
// datasets' save_to_disk writes and load_from_disk memory-maps
// (data-00000-of-00001.arrow), hashing the bytes for the fingerprint.
type arrowRows struct {
	f    *os.File
	bw   *bufio.Writer
	h    hash.Hash
	w    *ipc.Writer
	b    *array.RecordBuilder
	rows int
	vals int // input_ids and loss_mask values in the open batch
	done bool
}

func dsSchema() (*arrow.Schema, error) {
	hf, err := json.Marshal(map[string]any{"info": map[string]any{"features": dsFeatures}})
	if err != nil {
		return nil, err
	}
	md := arrow.NewMetadata([]string{"huggingface"}, []string{string(hf)})
	return arrow.NewSchema([]arrow.Field{
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "loss_mask", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "seq_len", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, &md), nil
}

func createArrowRows(path string) (*arrowRows, error) {
	schema, err := dsSchema()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	a := &arrowRows{f: f, bw: bufio.NewWriterSize(f, 1<<20), h: newFingerprint()}
	a.w = ipc.NewWriter(io.MultiWriter(a.bw, a.h), ipc.WithSchema(schema))
	a.b = array.NewRecordBuilder(memory.DefaultAllocator, schema)
	return a, nil
}

// add appends a row: input_ids, loss_mask and their length.
func (a *arrowRows) add(row speculatorsRow) error {
	for i, vals := range [][]int32{row.InputIDs, row.LossMask} {
		lb := a.b.Field(i).(*array.ListBuilder)
		lb.Append(true)
		vb := lb.ValueBuilder().(*array.Int64Builder)
		for _, v := range vals {
			vb.Append(int64(v))
		}
	}
	a.b.Field(2).(*array.Int64Builder).Append(int64(len(row.InputIDs)))
	a.rows++
	a.vals += len(row.InputIDs) + len(row.LossMask)
	if a.rows == arrowBatchRows || a.vals >= arrowBatchValues {
		return a.flush()
	}
	return nil
}

func (a *arrowRows) flush() error {
	if a.rows == 0 {
		return nil
	}
	rec := a.b.NewRecordBatch()
	defer rec.Release()
	a.rows, a.vals = 0, 0
	if err := a.w.Write(rec); err != nil {
		return fmt.Errorf("arrow: %w", err)
	}
	return nil
}

// close writes the last batch and the stream's end, fsyncs the file and
// returns the hash of its bytes.
func (a *arrowRows) close() (hash.Hash, error) {
	err := a.flush()
	if err == nil {
		err = a.w.Close()
	}
	if err == nil {
		err = a.bw.Flush()
	}
	if err == nil {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.done = true
	a.b.Release()
	return a.h, err
}

// abort closes the file of an export that failed (its directory is removed).
func (a *arrowRows) abort() {
	if !a.done {
		a.done = true
		a.b.Release()
		_ = a.f.Close()
	}
}
