// Command scale measures inspect and export at scale (make bench-scale): it
// writes a dataset of -dirs JSONL files and, for each, the output directory
// of one worker of a job split by file (--shard i/dirs, dataset.shard_by
// files), -records records in all, straight through the sink package (the
// records a run against the mock would write, small answers: driving the
// engine for ten million requests takes hours on two cores), then runs
// `synthgen inspect` and `synthgen export` on the directories as one
// dataset and reports each one's time per record and peak RSS. With
// -records A,B it does so at both sizes, and the slope of peak RSS between
// them (bytes per record) says whether memory grows with the records.
//
//	go run ./bench/scale -records 1000000,10000000 -dirs 100
//
// Every synthgen is its own process, measured by its own rusage. The
// figures go to stdout and to -json.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/sink"
)

// result is one size's figures.
type result struct {
	Records          int64   `json:"records"`
	Dirs             int     `json:"dirs"`
	WriteSeconds     float64 `json:"write_s"`
	InspectSeconds   float64 `json:"inspect_s"`
	InspectCPU       float64 `json:"inspect_cpu_s"` // user + system
	InspectCPUPerRec float64 `json:"inspect_cpu_ns_per_record"`
	InspectNsPerRec  float64 `json:"inspect_ns_per_record"`
	InspectRSS       int64   `json:"inspect_peak_rss_bytes"`
	ExportSeconds    float64 `json:"export_s"`
	ExportCPU        float64 `json:"export_cpu_s"`
	ExportCPUPerRec  float64 `json:"export_cpu_ns_per_record"`
	ExportNsPerRec   float64 `json:"export_ns_per_record"`
	ExportRSS        int64   `json:"export_peak_rss_bytes"`
	OutputBytes      int64   `json:"output_dir_bytes"`
	DatasetBytes     int64   `json:"dataset_bytes"`
	ExportBytes      int64   `json:"export_bytes"`
}

func main() {
	records := flag.String("records", "1000000", "records in all, or several sizes separated by commas")
	dirs := flag.Int("dirs", 100, "workers: output directories, one dataset file each")
	bin := flag.String("bin", "", "the synthgen binary (empty: go build ./cmd/synthgen)")
	work := flag.String("work", "", "where to write (empty: a temp dir, removed at the end)")
	out := flag.String("json", "", "write the figures here too")
	keep := flag.Bool("keep", false, "keep the directories written (under -work)")
	flag.Parse()
	if err := benchMain(*records, *dirs, *bin, *work, *out, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func benchMain(records string, dirs int, bin, work, out string, keep bool) error {
	if work == "" {
		tmp, err := os.MkdirTemp("", "synthgen-bench-scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	if bin == "" {
		bin = filepath.Join(work, "synthgen")
		build := exec.Command("go", "build", "-o", bin, "./cmd/synthgen")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	var results []result
	for _, s := range strings.Split(records, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < int64(dirs) {
			return fmt.Errorf("-records %q: want a number of at least -dirs", s)
		}
		r, err := measure(bin, filepath.Join(work, s), n, dirs)
		if err != nil {
			return err
		}
		results = append(results, r)
		fmt.Printf("%d records in %d dirs: write %.1fs; inspect %.1fs wall, %.1fs CPU (%.0f ns CPU/record), peak RSS %.1f MB; export %.1fs wall, %.1fs CPU (%.0f ns CPU/record), peak RSS %.1f MB; output %.2f GB, export %.2f GB\n",
			r.Records, r.Dirs, r.WriteSeconds, r.InspectSeconds, r.InspectCPU, r.InspectCPUPerRec, float64(r.InspectRSS)/1e6,
			r.ExportSeconds, r.ExportCPU, r.ExportCPUPerRec, float64(r.ExportRSS)/1e6, float64(r.OutputBytes)/1e9, float64(r.ExportBytes)/1e9)
		if !keep {
			_ = os.RemoveAll(filepath.Join(work, s))
		}
	}
	doc := map[string]any{"results": results}
	if len(results) >= 2 {
		a, b := results[0], results[len(results)-1]
		dn := float64(b.Records - a.Records)
		slope := map[string]float64{
			"inspect_rss_bytes_per_record": float64(b.InspectRSS-a.InspectRSS) / dn,
			"export_rss_bytes_per_record":  float64(b.ExportRSS-a.ExportRSS) / dn,
		}
		doc["slope"] = slope
		fmt.Printf("peak RSS slope from %d to %d records: inspect %.2f bytes/record, export %.2f bytes/record\n",
			a.Records, b.Records, slope["inspect_rss_bytes_per_record"], slope["export_rss_bytes_per_record"])
	}
	if out != "" {
		data, _ := json.MarshalIndent(doc, "", "  ")
		return os.WriteFile(out, append(data, '\n'), 0o644)
	}
	return nil
}

// measure writes n records into dirs directories under root and runs
// inspect and export on them.
func measure(bin, root string, n int64, dirs int) (result, error) {
	r := result{Records: n, Dirs: dirs}
	data := filepath.Join(root, "dataset")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return r, err
	}
	t0 := time.Now()
	var paths []string
	for i := range dirs {
		p := filepath.Join(data, fmt.Sprintf("part-%03d.jsonl", i))
		if err := writeRows(p, rowsOf(n, dirs, i)); err != nil {
			return r, err
		}
		paths = append(paths, p)
	}
	glob := filepath.Join(data, "part-*.jsonl")
	var outDirs []string
	for i := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("shard-%03d", i))
		if err := writeDir(dir, glob, i, dirs, paths[i], rowsOf(n, dirs, i)); err != nil {
			return r, err
		}
		outDirs = append(outDirs, dir)
	}
	r.WriteSeconds = time.Since(t0).Seconds()
	r.DatasetBytes, r.OutputBytes = duBytes(data), 0
	for _, d := range outDirs {
		r.OutputBytes += duBytes(d)
	}

	ins, err := run(bin, append([]string{"inspect", "--json"}, outDirs...)...)
	if err != nil {
		return r, err
	}
	if !strings.Contains(ins.stdout, fmt.Sprintf(`"selected_keys": %d`, n)) || !strings.Contains(ins.stdout, `"pending": 0`) {
		return r, fmt.Errorf("inspect does not find the job of %d keys complete:\n%.3000s", n, ins.stdout)
	}
	r.InspectSeconds, r.InspectRSS = ins.wall.Seconds(), ins.maxRSS
	r.InspectNsPerRec = float64(ins.wall.Nanoseconds()) / float64(n)
	r.InspectCPU, r.InspectCPUPerRec = ins.cpu.Seconds(), float64(ins.cpu.Nanoseconds())/float64(n)

	exportOut := filepath.Join(root, "train.jsonl")
	exp, err := run(bin, append(append([]string{"export"}, outDirs...), "--format", "specforge", "--out", exportOut)...)
	if err != nil {
		return r, err
	}
	r.ExportSeconds, r.ExportRSS = exp.wall.Seconds(), exp.maxRSS
	r.ExportNsPerRec = float64(exp.wall.Nanoseconds()) / float64(n)
	r.ExportCPU, r.ExportCPUPerRec = exp.cpu.Seconds(), float64(exp.cpu.Nanoseconds())/float64(n)
	if st, err := os.Stat(exportOut); err == nil {
		r.ExportBytes = st.Size()
	}
	if lines, err := countLines(exportOut); err != nil || lines != n {
		return r, fmt.Errorf("export wrote %d rows (%v), want %d", lines, err, n)
	}
	return r, nil
}

// rowsOf is how many rows worker i's file has: n split as evenly as it goes.
func rowsOf(n int64, dirs, i int) int64 {
	rows := n / int64(dirs)
	if int64(i) < n%int64(dirs) {
		rows++
	}
	return rows
}

func writeRows(path string, rows int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for r := range rows {
		fmt.Fprintf(w, `{"messages":[{"role":"user","content":"question %d"}]}`+"\n", r)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeDir writes the output directory of worker i of dirs: a record for
// every row of its file, as a run would (a small answer each, in an order
// shuffled within windows of 4096, as answers complete out of order).
func writeDir(dir, glob string, i, dirs int, file string, rows int64) error {
	// The job a run of this configuration would write: config.Job, as
	// the command builds it, not a copy of it.
	cfg := config.Default()
	cfg.Dataset.Path, cfg.Dataset.Format, cfg.Dataset.ShardBy = glob, dataset.FormatMessages, string(dataset.ShardFiles)
	cfg.Endpoint.Model = "mock-model"
	cfg.Generation.MaxTokens, cfg.Generation.Temperature, cfg.Generation.TopP, cfg.Generation.N = 64, 0.6, 0.95, 1
	j := cfg.Job(dataset.Shard{Index: i, Count: dirs})
	opts := dataset.Options{Selection: j.Selection}
	var err error
	if j.Selection.Files, err = dataset.List(opts); err != nil {
		return err
	}
	if j.Selection.ShardContent, err = dataset.Stamp(opts); err != nil {
		return err
	}
	entry, err := j.ManifestEntry("bench", nil)
	if err != nil {
		return err
	}
	s, err := sink.Open(sink.Options{Dir: dir, Format: sink.FormatJSONL, PartSize: 1000, SyncInterval: time.Hour, Job: entry, Check: j.Check(dir, false)})
	if err != nil {
		return err
	}
	name := filepath.Base(file)
	rng := rand.New(rand.NewPCG(uint64(i), 1))
	at := time.Unix(1_800_000_000, 0).UTC()
	const window = 4096
	order := make([]int64, 0, window)
	for lo := int64(0); lo < rows; lo += window {
		order = order[:0]
		for r := lo; r < min(lo+window, rows); r++ {
			order = append(order, r)
		}
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, row := range order {
			rec := &sink.Record{
				ID: name + ":" + strconv.FormatInt(row, 10), Sample: 0,
				Messages: []chat.Message{{Role: "user", Content: "question " + strconv.FormatInt(row, 10)}},
				Content:  "answer " + strconv.FormatInt(row, 10), FinishReason: "stop", Model: "mock-model",
				PromptTokens: 9, CompletionTokens: 3 + int(row%13), LatencyMS: 12, Attempts: 1, CreatedAt: at,
			}
			if err := s.Write(rec); err != nil {
				s.Close()
				return err
			}
		}
	}
	return s.Close()
}

// usage is one child's wall time, peak RSS and stdout.
type usage struct {
	wall   time.Duration
	cpu    time.Duration // user + system
	maxRSS int64
	stdout string
}

func run(bin string, args ...string) (usage, error) {
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	var errb tailBuf
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	u := usage{wall: time.Since(t0), stdout: out.String()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if err != nil {
		return u, fmt.Errorf("synthgen %s: %w\n%s", args[0], err, errb.b)
	}
	return u, nil
}

type tailBuf struct{ b []byte }

func (t *tailBuf) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = t.b[len(t.b)-4<<10:]
	}
	return len(p), nil
}

func duBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func countLines(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	buf := make([]byte, 1<<20)
	for {
		k, err := f.Read(buf)
		for _, c := range buf[:k] {
			if c == '\n' {
				n++
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
