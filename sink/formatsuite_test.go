package sink

import "testing"

// The conformance suite of the part formats, as restic runs one backend
// suite over every backend: every test here takes the format it runs on,
// and TestFormatConformance runs each over every format the sink
// registers (Formats), so a new format gets the whole suite by
// registering, not by being added to a list in each test.
var formatSuite = []struct {
	name string
	test func(t *testing.T, format string)
}{
	{"WriteCloseReopen", testWriteCloseReopen},
	{"RecordsReadBack", testRecordsReadBack},
	{"TokensReadBack", testTokensReadBack},
	{"ToolCallsReadBack", testToolCallsReadBack},
	{"ReadRecordsAt", testReadRecordsAt},
	{"CrashExactlyOnce", testCrashExactlyOnce},
	{"NormalRunDiskOrder", testNormalRunDiskOrder},
	{"KilledRunCountsWhatItLeft", testKilledRunCountsWhatItLeft},
	{"ResumeReadsSummaries", testResumeReadsSummaries},
	{"ChangedPartRefused", testChangedPartRefused},
}

func TestFormatConformance(t *testing.T) {
	formats := Formats()
	if len(formats) < 2 {
		t.Fatalf("Formats() = %v: the suite would run over fewer formats than the sink has", formats)
	}
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			for _, c := range formatSuite {
				t.Run(c.name, func(t *testing.T) { c.test(t, format) })
			}
		})
	}
}
