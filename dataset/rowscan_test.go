package dataset

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/synthgen/synthgen/dataset/internal/rawjson"
)

var flatRows = []string{
	`{"prompt":"Question 7: what is the sum of the first 10 odd numbers?"}`,
	`{"prompt":"x"}` + "\n",
	" \t{ \"a\" : \"b\" , \"n\" : -12.5e+3 , \"t\":true,\"f\":false,\"z\":null } \r\n",
	`{}`, `{ }`, `{"a":"1","a":"2"}`, `{"id":12345678901234567890123}`, `{"n":0}`, `{"n":-0.0e0}`,
	`{"esc":"a\"b\\c\/d\be\ff\ng\rh\ti"}`, `{"uni":"é 中文 🙂"}`, `{"":""}`,
	// What rawjson.Flat leaves to encoding/json, valid or not.
	`{"u":"\u00e9"}`, `{"u":"\ud83d\ude00"}`, `{"bad":"` + "\xff" + `"}`, `{"ctl":"` + "\x01" + `"}`,
	`{"n":01}`, `{"n":1.}`, `{"n":.5}`, `{"n":1e}`, `{"n":-}`, `{"n":+1}`, `{"a":[1,2]}`, `{"a":{"b":1}}`,
	`{"a":"b"} x`, `{"a":"b"}{}`, `{"a":"b",}`, `{"a" "b"}`, `{"a":tru}`, `{"a":nulll}`, `{a:"b"}`,
	`["a"]`, `"a"`, `1`, ``, `{`, `{"a":"b"`, `{"a":"b\`, `{"a":"\x"}`, `{"a":NaN}`, "{\"a\":\"b\"}\x00",
}

// checkFlat holds rawjson.Flat to encoding/json on b: what it takes,
// encoding/json decodes to the same row.
func checkFlat(t testing.TB, b []byte) {
	t.Helper()
	got, ok := rawjson.Flat(b)
	var rd bytes.Reader
	want, bad := decodeObjectJSON(&rd, b)
	if !ok {
		return
	}
	if bad != nil {
		t.Fatalf("%q: rawjson.Flat took %v, encoding/json refuses it: %v", b, got, bad.err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: rawjson.Flat %#v, encoding/json %#v", b, got, want)
	}
}

func TestScanFlatObjectMatchesEncodingJSON(t *testing.T) {
	taken := 0
	for _, s := range flatRows {
		checkFlat(t, []byte(s))
		if _, ok := rawjson.Flat([]byte(s)); ok {
			taken++
		}
	}
	if taken < 12 {
		t.Errorf("rawjson.Flat took %d of the flat rows: the fast path is not used", taken)
	}
	// Every cut of a valid row: a prefix is never taken for a whole row.
	row := []byte(" {\"a\":\"b\\n\",\"n\":-1.5E-3,\"t\":true,\"f\":false,\"z\":null} ")
	for i := range len(row) + 1 {
		checkFlat(t, row[:i])
	}
}

func FuzzScanFlatObject(f *testing.F) {
	for _, s := range flatRows {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFlat(t, b) })
}
