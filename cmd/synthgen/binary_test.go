package main

// Helpers for the end-to-end tests of the built binary (chaos_test.go,
// e2e_test.go): the binary is built once per test process, without -race
// (prebuild_test.go), and run as a child process against a mock on
// loopback (in this process, or the binary's own `synthgen mock` where the
// mock streams thousands of answers: mockProcess), with real files in
// t.TempDir().

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// goTool is the go command of the toolchain running the tests, else the
// one on PATH.
func goTool() (string, error) {
	// The go on PATH is the one make test runs (runtime.GOROOT, the build's
	// root, is deprecated: it need not be this machine's).
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("find the go tool on PATH: %w", err)
	}
	return p, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// synthgenBinary returns the path of this package built once per test
// process (prebuild_test.go).
func synthgenBinary(t testing.TB) string {
	t.Helper()
	return e2eBinary.wait(t)
}

// mock is an in-process mock server on a loopback port.
type mock struct {
	*mockserver.Server
	BaseURL string // http://127.0.0.1:PORT/v1
}

func startMock(t testing.TB, opts mockserver.Options) *mock {
	t.Helper()
	s := mockserver.New(opts)
	ts := httptest.NewServer(s)
	// Requests of a killed client end when the server notices the closed
	// connection; Close waits for them.
	t.Cleanup(ts.Close)
	return &mock{Server: s, BaseURL: ts.URL + "/v1"}
}

// waitIdle waits until the mock runs and queues nothing, so that its
// counters are final: a handler counts an answer as completed after its
// last write, a moment after the client may have read it.
func (m *mock) waitIdle(t testing.TB) mockserver.Stats {
	t.Helper()
	return waitMockIdle(t, m.Stats)
}

// mockProcess is the built binary's `synthgen mock` in a process of its
// own, for a test whose mock streams thousands of answers: served from
// this race-instrumented process, each token's write cost several times
// what it costs the mock built without -race, and the chaos tests' mocks
// had been a third of the package's CPU. Its counters come from /metrics.
type mockProcess struct {
	BaseURL string
	addr    string
}

// startMockProcess starts `synthgen mock` on a free loopback port with
// args; it is killed at the end of the test.
func startMockProcess(t testing.TB, args ...string) *mockProcess {
	t.Helper()
	p := startSynthgen(t, "mock", append([]string{"mock", "--addr", "127.0.0.1:0"}, args...)...)
	p.waitForOutput(t, true, mockServingRe, 30*time.Second)
	addr := mockServingRe.FindStringSubmatch(p.stderr(t))[1]
	return &mockProcess{BaseURL: "http://" + addr + "/v1", addr: addr}
}

// stats reads the counters waitIdle needs off the mock's /metrics.
func (m *mockProcess) stats(t testing.TB) mockserver.Stats {
	t.Helper()
	resp, err := http.Get("http://" + m.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the mock's /metrics: %v", err)
	}
	value := func(name, reason string) int64 {
		fam, ok := fams[name]
		if !ok {
			t.Fatalf("the mock's /metrics has no %s", name)
		}
		for _, mt := range fam.GetMetric() {
			if !slices.ContainsFunc(mt.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == "finished_reason" && l.GetValue() != reason
			}) {
				return int64(mt.GetCounter().GetValue() + mt.GetGauge().GetValue())
			}
		}
		t.Fatalf("the mock's /metrics has no %s{finished_reason=%q}", name, reason)
		return 0
	}
	return mockserver.Stats{
		Requests:  value("mock_requests_total", ""),
		Completed: value("vllm:request_success_total", "stop") + value("vllm:request_success_total", "length"),
		Aborted:   value("vllm:request_success_total", "abort"),
		Running:   value("vllm:num_requests_running", ""),
		Waiting:   value("vllm:num_requests_waiting", ""),
	}
}

// waitIdle is mock.waitIdle's, for the counters /metrics has.
func (m *mockProcess) waitIdle(t testing.TB) mockserver.Stats {
	t.Helper()
	return waitMockIdle(t, func() mockserver.Stats { return m.stats(t) })
}

// waitMockIdle polls a mock's counters until it runs and queues nothing
// and every request it accepted has ended.
func waitMockIdle(t testing.TB, stats func() mockserver.Stats) mockserver.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := stats()
		if st.Running == 0 && st.Waiting == 0 && st.Completed+st.Aborted == st.Requests {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("mock still busy after 10s: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// promptText is the user turn of dataset row i; records are checked
// against it. The wording varies so that the mock's answer lengths (a
// function of the prompt) vary.
func promptText(i int) string {
	return fmt.Sprintf("question %d: explain <%s> & \"why\" in %d words ✓", i, strings.Repeat("x", i%17), 10+i*7%90)
}

// writeShareGPT writes n ShareGPT rows (the open-perfectblend shape) and
// returns the file's path.
func writeShareGPT(t testing.TB, dir string, n int) string {
	t.Helper()
	return writeShareGPTTurns(t, dir, n, 1)
}

// turnText is the user turn k (0-based) of row i of a multi-turn dataset.
func turnText(i, k int) string {
	if k == 0 {
		return promptText(i)
	}
	return fmt.Sprintf("follow-up %d of question %d: and then?", k, i)
}

// writeShareGPTTurns writes n ShareGPT rows of turns user turns, each
// followed by the dataset's own answer, and returns the file's path.
func writeShareGPTTurns(t testing.TB, dir string, n, turns int) string {
	t.Helper()
	type turn struct {
		From  string `json:"from"`
		Value string `json:"value"`
	}
	type row struct {
		Conversations []turn `json:"conversations"`
		Source        string `json:"source"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range n {
		r := row{Source: []string{"MetaMath", "code", "chat"}[i%3]}
		for k := range turns {
			r.Conversations = append(r.Conversations, turn{"human", turnText(i, k)}, turn{"gpt", "the dataset's own answer"})
		}
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "prompts.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// proc is one run of the binary, stdout and stderr to files (not a TTY,
// like a job under nohup).
type proc struct {
	cmd        *exec.Cmd
	stdoutPath string
	stderrPath string
	started    time.Time
	done       chan struct{} // closed when the process has been waited for
	waitErr    error
	ended      time.Time
}

// startSynthgen starts the binary with args; name tells the output files
// of several runs in one test apart. The process is killed at the end of
// the test if it still runs.
func startSynthgen(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	bin := synthgenBinary(t)
	logs := filepath.Join(t.TempDir(), name)
	stdout, err := os.Create(logs + ".stdout")
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(logs + ".stderr")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = childEnv()
	dieWithTest(cmd)
	p := &proc{cmd: cmd, stdoutPath: stdout.Name(), stderrPath: stderr.Name(), done: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	// The child holds its own copies of the descriptors.
	_ = stdout.Close()
	_ = stderr.Close()
	go func() {
		p.waitErr = cmd.Wait()
		p.ended = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// childEnv is this process's environment without SYNTHGEN_* variables
// (config keys of a developer's shell, or this suite's own knobs) so that
// only the flags of a test configure the child.
func childEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SYNTHGEN_")
	})
}

// wait waits up to timeout for the process to end and returns its exit
// code (-1 when a signal ended it).
func (p *proc) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not end within %s; stderr:\n%s", p.cmd.Path, timeout, p.stderr(t))
	}
	return p.cmd.ProcessState.ExitCode()
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the running process.
func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v: %v", sig, err)
	}
}

func (p *proc) stdout(t testing.TB) string { t.Helper(); return readText(t, p.stdoutPath) }
func (p *proc) stderr(t testing.TB) string { t.Helper(); return readText(t, p.stderrPath) }

func readText(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitForOutput polls the process's stderr (or stdout) until re matches,
// and fails when the process ends or timeout passes first.
func (p *proc) waitForOutput(t testing.TB, stderr bool, re *regexp.Regexp, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		text := p.stdout(t)
		if stderr {
			text = p.stderr(t)
		}
		if re.MatchString(text) {
			return
		}
		if p.exited() {
			t.Fatalf("process ended (%v) before its output matched %q; stderr:\n%s", p.waitErr, re, p.stderr(t))
		}
		if time.Now().After(deadline) {
			t.Fatalf("output did not match %q within %s; stderr:\n%s", re, timeout, p.stderr(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// progressLine is the part of a --log-format json progress object the
// tests read.
type progressLine struct {
	Event    string    `json:"event"`
	Time     time.Time `json:"time"`
	Done     int64     `json:"done"`
	Total    int64     `json:"total"`
	Errors   int64     `json:"errors"`
	InFlight int64     `json:"in_flight"`
}

// progressLines parses the JSON progress objects of a stdout file. A kill
// can cut the last line mid-write: bytes after the last newline are
// ignored, every complete line must parse.
func progressLines(t testing.TB, stdout string) []progressLine {
	t.Helper()
	if i := strings.LastIndexByte(stdout, '\n'); i >= 0 {
		stdout = stdout[:i+1]
	} else {
		return nil
	}
	var out []progressLine
	for n, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue // the final summary is plain text
		}
		var pl progressLine
		if err := json.Unmarshal([]byte(line), &pl); err != nil {
			t.Fatalf("stdout:%d: %v: %q", n+1, err, line)
		}
		if pl.Event == "progress" {
			out = append(out, pl)
		}
	}
	return out
}

// resumingRe is the line a run prints when it finds records on disk.
var resumingRe = regexp.MustCompile(`(?m)^resuming: (\d+) records already in `)

// resumedCount returns the count of the "resuming" line of stderr, and
// whether there was one.
func resumedCount(stderr string) (int, bool) {
	m := resumingRe.FindStringSubmatch(stderr)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	return n, true
}

// Temporary suffixes of the output directory (ARCHITECTURE.md: temporary names
// never end in .jsonl or .parquet).
var tempSuffixes = []string{".open", ".journal", ".tmp"}

func isTemp(name string) bool {
	return slices.ContainsFunc(tempSuffixes, func(s string) bool { return strings.HasSuffix(name, s) })
}

var shardRe = regexp.MustCompile(`^part-(\d{6,})\.(jsonl|parquet)(\.open|\.journal|\.tmp)?$`)

// inventory is what an output directory holds, read the way a resume must
// see it but independently of the sink's code: every complete record of
// final shards and of the temporaries a crash leaves (.open, .journal),
// where a journal beside its final Parquet file is superseded by it.
type inventory struct {
	Records map[sink.Key]sink.Record
	Where   map[sink.Key]string // the file each key was found in
	Finals  map[string]int      // final data shard -> rows
	Temps   []string            // temporary files anywhere in the directory, relative
	Errors  int                 // error records under errors/
	Torn    int                 // files whose last line was torn (a kill mid-write)
}

// readInventory reads dir. Any key found twice (invariant 2), a final file
// that does not parse or ends torn (invariant 3), or a complete line that
// is not a record is an error naming the file.
func readInventory(dir string) (*inventory, error) {
	inv := &inventory{
		Records: map[sink.Key]sink.Record{},
		Where:   map[sink.Key]string{},
		Finals:  map[string]int{},
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return inv, nil // killed before it made the directory
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isTemp(d.Name()) {
			rel, _ := filepath.Rel(dir, path)
			inv.Temps = append(inv.Temps, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	entries, err := os.ReadDir(dataDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	add := func(file string, recs []sink.Record) error {
		for _, r := range recs {
			k := r.Key()
			if prev, dup := inv.Where[k]; dup {
				return fmt.Errorf("key id=%q sample=%d is in both %s and %s", k.ID, k.Sample, prev, file)
			}
			inv.Where[k] = file
			inv.Records[k] = r
		}
		return nil
	}
	for _, e := range entries {
		m := shardRe.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("data/%s: not a shard name", e.Name())
		}
		path := filepath.Join(dataDir, e.Name())
		final := strings.TrimSuffix(e.Name(), m[3])
		switch m[3] {
		case "":
			recs, err := finalShards.read(path, m[2])
			if err != nil {
				return nil, err
			}
			inv.Finals[e.Name()] = len(recs)
			if err := add(e.Name(), recs); err != nil {
				return nil, err
			}
		case ".open", ".journal":
			recs, torn, err := readJSONLShard(path)
			if err != nil {
				return nil, err
			}
			if torn {
				inv.Torn++
			}
			if m[3] == ".journal" && names[final] {
				// The final file appeared by rename of a complete file:
				// it holds these rows, recovery drops the journal.
				continue
			}
			if err := add(e.Name(), recs); err != nil {
				return nil, err
			}
		case ".tmp":
			// A conversion cut short: its rows are in the journal.
		}
	}
	errEntries, err := os.ReadDir(filepath.Join(dir, "errors"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range errEntries {
		data, err := os.ReadFile(filepath.Join(dir, "errors", e.Name()))
		if err != nil {
			return nil, err
		}
		inv.Errors += bytes.Count(data, []byte("\n"))
	}
	return inv, nil
}

// finalShards caches what final shards decoded to, keyed by the file's
// identity (device, inode, size, modification time): a final shard is
// never written again, and the chaos tests read the whole directory after
// each of their kills, which decoded each shard up to ten times under
// -race (a seventh of the package's CPU). A shard rewritten, renamed over
// or truncated has another identity and is decoded again.
var finalShards = &shardCache{recs: map[shardID][]sink.Record{}}

type shardID struct {
	path       string
	dev, ino   uint64
	size, nsec int64
}

type shardCache struct {
	mu   sync.Mutex
	recs map[shardID][]sink.Record
}

// read is a final shard's records (format "parquet" or "jsonl"); a JSONL
// one that ends in a torn line is an error.
func (c *shardCache) read(path, format string) ([]sink.Record, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	id := shardID{path: path, size: fi.Size(), nsec: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
	}
	c.mu.Lock()
	recs, ok := c.recs[id]
	c.mu.Unlock()
	if ok {
		return recs, nil
	}
	if format == "parquet" {
		recs, err = readParquetShard(path)
	} else {
		var torn bool
		recs, torn, err = readJSONLShard(path)
		if err == nil && torn {
			err = fmt.Errorf("%s: a final file ends in a torn line", path)
		}
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.recs[id] = recs
	c.mu.Unlock()
	return recs, nil
}

// readJSONLShard decodes every complete line of a JSONL shard (or journal)
// as a sink.Record, refusing unknown fields; torn reports bytes after the
// last newline.
func readJSONLShard(path string) (recs []sink.Record, torn bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return recs, len(line) > 0, nil
		}
		if err != nil {
			return nil, false, err
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var r sink.Record
		if err := dec.Decode(&r); err != nil {
			return nil, false, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		recs = append(recs, r)
	}
}

// readParquetShard reads a whole Parquet shard with parquet-go's generic
// reader: a file without a footer or with bad pages fails here.
func readParquetShard(path string) ([]sink.Record, error) {
	recs, err := parquet.ReadFile[sink.Record](path)
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable parquet file: %w", path, err)
	}
	// parquet-go reads an absent list as an empty one; the JSONL line
	// omits it (nil): the same record either way.
	for i := range recs {
		recs[i].Messages = turnsNilCalls(recs[i].Messages)
		if len(recs[i].ToolCalls) == 0 {
			recs[i].ToolCalls = nil
		}
	}
	return recs, nil
}

// checkComplete asserts what a finished job directory must be: every key
// (0..n-1, sample 0) exactly once in final shards, no temporary file, no
// error record, the manifest listing exactly the shards on disk, and
// records that answer the prompts of their ids.
func checkComplete(t testing.TB, dir string, n int, model string) *inventory {
	t.Helper()
	return checkCompleteWith(t, dir, n, func(r sink.Record, i int) { checkRecord(t, r, i, model) })
}

// checkCompleteWith is checkComplete with check asserting that record r
// answers dataset row i.
func checkCompleteWith(t testing.TB, dir string, n int, check func(r sink.Record, i int)) *inventory {
	t.Helper()
	inv, err := readInventory(dir)
	if err != nil {
		t.Fatalf("read output: %v", err)
	}
	if len(inv.Temps) > 0 {
		t.Errorf("temporary files left after a clean exit: %v", inv.Temps)
	}
	if inv.Errors > 0 {
		t.Errorf("%d error records; the mock never fails", inv.Errors)
	}
	missing := 0
	for i := range n {
		k := sink.Key{ID: strconv.Itoa(i)}
		r, ok := inv.Records[k]
		if !ok {
			if missing++; missing <= 5 {
				t.Errorf("key %d missing", i)
			}
			continue
		}
		check(r, i)
	}
	if missing > 5 {
		t.Errorf("... %d keys missing in all", missing)
	}
	if len(inv.Records) != n {
		t.Errorf("%d records on disk, want %d (keys 0..%d once each)", len(inv.Records), n, n-1)
	}

	man, err := sink.ReadManifest(dir)
	if err != nil {
		t.Fatalf("read manifest: %v", err)
	}
	listed := map[string]int{}
	for _, sh := range man.Parts {
		if _, dup := listed[sh.Name]; dup {
			t.Errorf("manifest lists %s twice", sh.Name)
		}
		listed[sh.Name] = sh.Records
	}
	for name, rows := range inv.Finals {
		if want, ok := listed[name]; !ok {
			t.Errorf("data/%s is on disk but not in the manifest", name)
		} else if want != rows {
			t.Errorf("data/%s has %d rows, the manifest says %d", name, rows, want)
		}
	}
	for name := range listed {
		if _, ok := inv.Finals[name]; !ok {
			t.Errorf("manifest lists %s, which is not on disk", name)
		}
	}
	if last := man.Runs[len(man.Runs)-1]; last.EndedAt == nil {
		t.Errorf("the manifest's last run has no ended_at after a clean exit")
	}
	return inv
}

// checkRecord asserts that r is the answer to dataset row i.
func checkRecord(t testing.TB, r sink.Record, i int, model string) {
	t.Helper()
	want := []chat.Message{{Role: "user", Content: promptText(i)}}
	switch {
	case !reflect.DeepEqual(turnsNilCalls(r.Messages), want):
		t.Errorf("record %d: messages %+v, want %+v", i, r.Messages, want)
	case r.Source != []string{"MetaMath", "code", "chat"}[i%3]:
		t.Errorf("record %d: source %q", i, r.Source)
	case r.Content == "" && r.Reasoning == "":
		t.Errorf("record %d: no reasoning and no content", i)
	case r.FinishReason != "stop" && r.FinishReason != "length":
		t.Errorf("record %d: finish_reason %q", i, r.FinishReason)
	case r.Model != model:
		t.Errorf("record %d: model %q, want %q", i, r.Model, model)
	case r.CompletionTokens <= 0 || r.PromptTokens <= 0:
		t.Errorf("record %d: usage %d/%d", i, r.PromptTokens, r.CompletionTokens)
	case r.Attempts < 1:
		t.Errorf("record %d: attempts %d", i, r.Attempts)
	case r.CreatedAt.IsZero() || r.LatencyMS <= 0:
		t.Errorf("record %d: created_at %v latency %v", i, r.CreatedAt, r.LatencyMS)
	}
}
