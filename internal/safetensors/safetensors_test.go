package safetensors

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func sample(t testing.TB, nan bool) []byte {
	t.Helper()
	hs := make([]byte, 2*3*2*4) // [3, 2, 4] bf16
	for i := 0; i < len(hs); i += 2 {
		binary.LittleEndian.PutUint16(hs[i:], 0x3f80) // 1.0
	}
	if nan {
		binary.LittleEndian.PutUint16(hs[10:], 0x7fc0)
	}
	var buf bytes.Buffer
	err := Write(&buf, []Data{
		{Name: "token_ids", DType: I64, Shape: []int64{3}, Bytes: Int64Bytes([]int64{7, 8, 9})},
		{Name: "hidden_states", DType: BF16, Shape: []int64{3, 2, 4}, Bytes: hs},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	b := sample(t, false)
	if (len(b)-8)%8 != 0 {
		t.Errorf("data not aligned: %d-byte file", len(b))
	}
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := f.Int64s("token_ids", 10)
	if err != nil || len(ids) != 3 || ids[0] != 7 || ids[2] != 9 {
		t.Fatalf("token_ids = %v, %v", ids, err)
	}
	hs := f.Tensors["hidden_states"]
	if hs.DType != BF16 || len(hs.Shape) != 3 || hs.Shape[1] != 2 {
		t.Errorf("hidden_states = %+v", hs)
	}
	if i, err := f.FirstNonFinite("hidden_states"); err != nil || i != -1 {
		t.Errorf("FirstNonFinite = %d, %v; want -1", i, err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata = %v", f.Metadata)
	}
	if _, err := f.Int64s("token_ids", 2); err == nil {
		t.Error("Int64s over its bound read without error")
	}
}

func TestNonFinite(t *testing.T) {
	b := sample(t, true)
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if i, err := f.FirstNonFinite("hidden_states"); err != nil || i != 5 {
		t.Errorf("FirstNonFinite = %d, %v; want 5", i, err)
	}
}

func withHeader(h string, data int) []byte {
	b := make([]byte, 8+len(h)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(h)))
	copy(b[8:], h)
	return b
}

func TestRejects(t *testing.T) {
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<40)
	cases := map[string]struct {
		file []byte
		want string
	}{
		"short":        {[]byte{1, 2}, "no header length"},
		"absurd":       {huge, "over the"},
		"past end":     {withHeader("{}", 0)[:9], "past the end"},
		"not object":   {withHeader(`[]`, 0), "not a JSON object"},
		"dtype":        {withHeader(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, 1), "not supported"},
		"size":         {withHeader(`{"a":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}}`, 8), "needs 16"},
		"out of range": {withHeader(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 4), "cover 8 bytes of a 4"},
		"overlap": {withHeader(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},`+
			`"b":{"dtype":"I64","shape":[1],"data_offsets":[4,12]}}`, 12), "overlap"},
		"hole":     {withHeader(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}}`, 16), "hole"},
		"negative": {withHeader(`{"a":{"dtype":"I64","shape":[-1],"data_offsets":[0,0]}}`, 0), "negative"},
		"overflow": {withHeader(`{"a":{"dtype":"I64","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, 0), "overflows"},
		"offsets":  {withHeader(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[8]}}`, 8), "want 2"},
		"unknown":  {withHeader(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8],"x":1}}`, 8), "unknown field"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Open(bytes.NewReader(c.file), int64(len(c.file)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// FuzzOpen feeds arbitrary bytes to the reader: it must never panic or
// allocate past its bounds, and a file it accepts must read back whole.
func FuzzOpen(f *testing.F) {
	f.Add(sample(f, false))
	f.Add(sample(f, true))
	f.Add(withHeader(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for name, ts := range st.Tensors {
			if st.DataStart+ts.End > int64(len(b)) {
				t.Fatalf("tensor %q ends past the file", name)
			}
			switch ts.DType {
			case I64:
				if _, err := st.Int64s(name, 1<<20); err != nil && ts.Elems() <= 1<<20 {
					t.Fatalf("Int64s(%q): %v", name, err)
				}
			default:
				if _, err := st.FirstNonFinite(name); err != nil {
					t.Fatalf("FirstNonFinite(%q): %v", name, err)
				}
			}
		}
	})
}
