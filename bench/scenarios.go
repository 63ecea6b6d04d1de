package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// sizes is one size of the scenarios.
type sizes struct {
	inFlight int

	littlesN       int64         // requests of littles-law
	littlesLatency time.Duration // each answer's latency (the mock's TTFT)

	zeroN int64 // requests of zero-latency

	streamN      int64         // streams of streaming
	streamMean   int           // mean tokens (chunks) of one stream
	streamPerTok time.Duration // the mock's time per token

	smallRows, bigRows int64 // the two jobs of the scale scenarios
	// midRows is a third job of scale-id: bytes a key are the slope from
	// it to bigRows, past the costs that stop growing (see scale).
	midRows int64

	// rounds of zero-latency and streaming, synthgen and the yardstick in
	// turn: their figures are the medians, as a run of a few seconds on a
	// shared machine moves with what else runs.
	rounds int

	// requests, streams and rounds of instructions (under valgrind, about
	// 40 times slower than a run of its own).
	instrN       int64
	instrStreams int64
	instrRounds  int
}

var sizeByName = map[string]sizes{
	"full": {
		inFlight: 200,
		littlesN: 8_000, littlesLatency: 200 * time.Millisecond,
		zeroN:   50_000,
		streamN: 4_000, streamMean: 90, streamPerTok: time.Millisecond,
		smallRows: 25_000, bigRows: 1_000_000, midRows: 250_000,
		rounds: 5,
		instrN: 5_000, instrStreams: 1_000, instrRounds: 3,
	},
	"tiny": {
		inFlight: 50,
		littlesN: 500, littlesLatency: 20 * time.Millisecond,
		zeroN:   1_000,
		streamN: 200, streamMean: 20, streamPerTok: time.Millisecond,
		smallRows: 500, bigRows: 4_000, midRows: 2_000,
		rounds: 1,
		instrN: 200, instrStreams: 50, instrRounds: 1,
	},
}

type scenario struct {
	name   string
	run    func(context.Context, *config) ([]row, error)
	paired bool // runs -base's build in turn with this one (pair.go)
	alone  bool // runs only when -only names it
}

var scenarios = []scenario{
	{name: "littles-law", run: littlesLaw},
	{name: "zero-latency", run: zeroLatency, paired: true},
	{name: "streaming", run: streaming, paired: true},
	{name: "streaming-tokens", run: streamingTokens},
	{name: "scale-index", run: func(ctx context.Context, c *config) ([]row, error) { return scale(ctx, c, false) }},
	{name: "scale-id", run: func(ctx context.Context, c *config) ([]row, error) { return scale(ctx, c, true) }},
	{name: "prefix", run: prefix},
	{name: "tail", run: tailScenario},
	{name: "instructions", run: instructions, paired: true, alone: true},
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	return names
}

// answerTokens is max_tokens of the plain scenarios' requests: the mock's
// answers average 64 tokens, about 400 bytes of body.
const answerTokens = 64

// job is one `synthgen run`.
type job struct {
	data      string
	ids       bool
	limit     int64
	stream    bool
	format    string // jsonl or parquet
	maxTokens int
	shardSize int // 0: the default
	dir       string
	extra     []string // more flags
	bin       string   // the synthgen binary (empty: -bin's)
}

func (c *config) synthgen(ctx context.Context, m *mock, j job) *exec.Cmd {
	args := []string{"run", "--quiet",
		"--endpoint.base_url", m.base + "/v1",
		"--dataset.path", j.data, "--dataset.format", "prompt", "--dataset.prompt_field", "prompt",
		"--dataset.limit", strconv.FormatInt(j.limit, 10),
		"--generation.max_tokens", strconv.Itoa(j.maxTokens),
		"--generation.stream=" + strconv.FormatBool(j.stream),
		"--concurrency", strconv.Itoa(c.size.inFlight),
		"--output.dir", j.dir, "--output.format", j.format,
	}
	if j.ids {
		args = append(args, "--dataset.id_field", "id")
	}
	if j.shardSize > 0 {
		args = append(args, "--output.shard_size", strconv.Itoa(j.shardSize))
	}
	args = append(args, j.extra...)
	bin := cmp.Or(j.bin, c.bin)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SYNTHGEN_ENDPOINT_BASE_URL=") // the flags alone say where
	return cmd
}

// The yardsticks' kinds (yardstick.go).
const (
	bareLoop   = "bare"
	openaiLoop = "go-openai"
)

// loopRuns is one yardstick kind of a scenario's rounds and its runs.
type loopRuns struct {
	kind string
	runs *[]usage
}

func (c *config) yardstick(ctx context.Context, m *mock, kind string, n int64, maxTokens int, stream bool) (*exec.Cmd, error) {
	return selfCommand(ctx, "-client", kind, "-url", m.base+"/v1"+chatPath, "-n", strconv.FormatInt(n, 10),
		"-c", strconv.Itoa(c.size.inFlight), "-max-tokens", strconv.Itoa(maxTokens),
		"-stream="+strconv.FormatBool(stream))
}

// dataset writes n rows into the work dir once per (n, ids).
func (c *config) dataset(n int64, ids bool) (string, error) {
	name := fmt.Sprintf("rows-%d.jsonl", n)
	if ids {
		name = fmt.Sprintf("rows-%d-ids.jsonl", n)
	}
	path := filepath.Join(c.work, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	return path, writeDataset(path, n, ids)
}

// littlesLaw: answers that each take a fixed latency, inFlight at once.
// The ideal wall time is n/inFlight latencies; the yardstick shows what a
// client that does nothing else gets, synthgen writes JSONL, then Parquet.
func littlesLaw(ctx context.Context, c *config) ([]row, error) {
	const name = "littles-law"
	sz := c.size
	data, err := c.dataset(sz.littlesN, false)
	if err != nil {
		return nil, err
	}
	m, err := startMock(ctx, c.bin, "--ttft", sz.littlesLatency.String(), "--mean-tokens", strconv.Itoa(answerTokens))
	if err != nil {
		return nil, err
	}
	defer m.stop()
	// The yardstick runs before and after each synthgen run, and each is
	// compared with the mean of the two around it: a drift of the shared
	// machine over the minute this takes falls on both sides alike.
	type watched struct {
		u usage
		spans
	}
	yardstick := func() (watched, error) {
		loop, err := c.yardstick(ctx, m, bareLoop, sz.littlesN, answerTokens, false)
		if err != nil {
			return watched{}, err
		}
		u, sp, err := runWatched(ctx, m, loop, sz.littlesN, int64(sz.inFlight))
		return watched{u, sp}, err
	}
	before, err := yardstick()
	if err != nil {
		return nil, err
	}
	ideal := time.Duration(float64(sz.littlesLatency) * float64(sz.littlesN) / float64(sz.inFlight))
	var rows []row
	var rss = map[string]float64{}
	yWall := before.u.wall.Seconds()
	for _, format := range []string{"jsonl", "parquet"} {
		j := job{data: data, limit: sz.littlesN, format: format, maxTokens: answerTokens,
			dir: filepath.Join(c.work, name+"-"+format)}
		su, ss, err := runWatched(ctx, m, c.synthgen(ctx, m, j), sz.littlesN, int64(sz.inFlight))
		if err != nil {
			return nil, err
		}
		after, err := yardstick()
		if err != nil {
			return nil, err
		}
		mean := func(f func(w watched) time.Duration) float64 { return (f(before) + f(after)).Seconds() / 2 }
		wall := mean(func(w watched) time.Duration { return w.u.wall })
		first := mean(func(w watched) time.Duration { return w.first })
		last := mean(func(w watched) time.Duration { return w.last })
		// The wall mixes three costs (docs/decisions/2026-12-littles-law-split.md):
		// the launch to the first request (reading the config, opening
		// the dataset and the output dir, once a run), the steady state
		// after it up to the mock's last answer, which is what the rate of
		// answers owes the client, and the close after it (the last
		// Parquet part's conversion, the manifest, the report), once a run.
		rows = append(rows,
			compare(name, fmt.Sprintf("%s: wall s (ideal %.1f s)", format, ideal.Seconds()),
				su.wall.Seconds(), wall, nil),
			compare(name, format+": first request to last answer, s", (ss.last-ss.first).Seconds(), last-first, atMostX(1.005)),
			absolute(name, format+": launch to first request, s", ss.first.Seconds(), atMost(0.1)),
			absolute(name, format+": last answer to exit, s", (su.wall-ss.last).Seconds(), atMost(0.1)),
			absolute(name, format+": yardstick's launch to first request, s", first, nil),
			absolute(name, format+": yardstick's last answer to exit, s", wall-last, nil))
		rss[format] = mb(su.maxRSS)
		yWall += after.u.wall.Seconds()
		before = after
	}
	rows = append(rows,
		absolute(name, "yardstick: wall / ideal (mean of 3 runs)", yWall/3/ideal.Seconds(), nil),
		compare(name, "peak RSS MB: parquet vs jsonl", rss["parquet"], rss["jsonl"], atMostX(1.5)))
	return rows, nil
}

// zeroLatency: the mock answers at once, so the client's own cost per
// request is what limits the rate. Each round runs the go-openai loop (the
// floor the issue measured against and the target's), the bare loop (the
// floor of a client that decodes nothing) and synthgen, in turn.
func zeroLatency(ctx context.Context, c *config) ([]row, error) {
	const name = "zero-latency"
	sz := c.size
	data, m, err := c.zeroMock(ctx, sz.zeroN)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	var oa, bare []usage
	sg := make([][]usage, len(c.bins())) // this build's runs, then the base's
	for round := range sz.rounds {
		for _, l := range []loopRuns{{openaiLoop, &oa}, {bareLoop, &bare}} {
			loop, err := c.yardstick(ctx, m, l.kind, sz.zeroN, answerTokens, false)
			if err != nil {
				return nil, err
			}
			u, err := run(loop, nil)
			if err != nil {
				return nil, err
			}
			*l.runs = append(*l.runs, u)
		}
		if err := c.eachBin(round, func(i int, bin string) error {
			j := zeroJob(data, sz.zeroN, bin, filepath.Join(c.work, fmt.Sprintf("%s-%d-%d", name, round, i)))
			su, err := run(c.synthgen(ctx, m, j), nil)
			sg[i] = append(sg[i], su)
			return err
		}); err != nil {
			return nil, err
		}
	}
	n := float64(sz.zeroN)
	rate := func(u usage) float64 { return n / u.wall.Seconds() }
	cpu := func(u usage) float64 { return us(u.cpu) / n }
	rows := []row{
		compare(name, fmt.Sprintf("plain, JSONL: req/s vs the go-openai loop (median of %d)", sz.rounds), median(sg[0], rate), median(oa, rate), atLeastX(0.95)),
		compare(name, "CPU us/request vs the go-openai loop", median(sg[0], cpu), median(oa, cpu), atMostX(1.05)),
		compare(name, "req/s vs the bare loop (no JSON)", median(sg[0], rate), median(bare, rate), nil),
		compare(name, "CPU us/request vs the bare loop", median(sg[0], cpu), median(bare, cpu), nil),
	}
	return paired(name, rows, sg, []func(usage) float64{rate, cpu, rate, cpu},
		figure{"CPU us/request", cpu}, figure{"req/s", rate}), nil
}

// zeroMock writes n prompts and starts a mock that answers at once: the
// job of zero-latency, which the instructions scenario counts too.
func (c *config) zeroMock(ctx context.Context, n int64) (data string, m *mock, err error) {
	if data, err = c.dataset(n, false); err != nil {
		return "", nil, err
	}
	m, err = startMock(ctx, c.bin, "--mean-tokens", strconv.Itoa(answerTokens))
	return data, m, err
}

// zeroJob is synthgen's run of zeroMock's n prompts, into JSONL in dir.
func zeroJob(data string, n int64, bin, dir string) job {
	return job{data: data, limit: n, format: "jsonl", maxTokens: answerTokens, bin: bin, dir: dir}
}

// streamMock is streaming's mock (a token every streamPerTok, streamMean
// tokens on average) and a dataset of its n prompts; its answers are the
// mock's own lengths, so a job asks them with streamMaxTokens.
func (c *config) streamMock(ctx context.Context, n int64) (data string, cc *chunkCount, err error) {
	if data, err = c.dataset(n, false); err != nil {
		return "", nil, err
	}
	m, err := startMock(ctx, c.bin, "--token-delay", c.size.streamPerTok.String(), "--mean-tokens", strconv.Itoa(c.size.streamMean))
	if err != nil {
		return "", nil, err
	}
	return data, &chunkCount{mock: m}, nil
}

const streamMaxTokens = 4096 // the long tail is kept

// chunkCount counts the token chunks the mock generated during each run
// (one generated token, one chunk) and holds the runs of a scenario to the
// same work: every one sends the same prompts, so a count that differs
// means one of them skipped or repeated some.
type chunkCount struct {
	*mock
	chunks float64
}

// run runs cmd (who names it in an error) and counts its chunks.
func (cc *chunkCount) run(cmd *exec.Cmd, who string) (usage, error) {
	before, err := cc.metric(genTokensMetric)
	if err != nil {
		return usage{}, err
	}
	u, err := run(cmd, nil)
	if err != nil {
		return u, err
	}
	after, err := cc.metric(genTokensMetric)
	if err != nil {
		return u, err
	}
	if got := after - before; cc.chunks != 0 && got != cc.chunks {
		return u, fmt.Errorf("%s was sent %.0f token chunks and the runs before %.0f, for the same prompts: not the same work", who, got, cc.chunks)
	} else {
		cc.chunks = got
	}
	return u, nil
}

// median is the median of f over the runs (the upper one of an even count).
func median(runs []usage, f func(usage) float64) float64 {
	v := make([]float64, len(runs))
	for i, u := range runs {
		v[i] = f(u)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// streaming: many short streams with a per-token pace; the figures are per
// chunk, counted by the mock (one generated token, one chunk).
func streaming(ctx context.Context, c *config) ([]row, error) {
	const name = "streaming"
	sz := c.size
	data, m, err := c.streamMock(ctx, sz.streamN)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	var ys, oa []usage
	sg := make([][]usage, len(c.bins())) // this build's runs, then the base's
	for round := range sz.rounds {
		for _, l := range []loopRuns{{bareLoop, &ys}, {openaiLoop, &oa}} {
			loop, err := c.yardstick(ctx, m.mock, l.kind, sz.streamN, streamMaxTokens, true)
			if err != nil {
				return nil, err
			}
			u, err := m.run(loop, "the "+l.kind+" loop")
			if err != nil {
				return nil, err
			}
			*l.runs = append(*l.runs, u)
		}
		if err := c.eachBin(round, func(i int, bin string) error {
			j := job{data: data, limit: sz.streamN, stream: true, format: "jsonl", maxTokens: streamMaxTokens, bin: bin,
				dir: filepath.Join(c.work, fmt.Sprintf("%s-%d-%d", name, round, i))}
			su, err := m.run(c.synthgen(ctx, m.mock, j), "synthgen "+bin)
			sg[i] = append(sg[i], su)
			return err
		}); err != nil {
			return nil, err
		}
	}
	chunks := m.chunks
	rate := func(u usage) float64 { return chunks / u.wall.Seconds() }
	cpu := func(u usage) float64 { return us(u.cpu) / chunks }
	rows := []row{
		compare(name, fmt.Sprintf("%.0f chunks: chunks/s vs the bare reader (median of %d)", chunks, sz.rounds), median(sg[0], rate), median(ys, rate), atLeastX(0.95)),
		compare(name, "CPU us/chunk vs the bare reader", median(sg[0], cpu), median(ys, cpu), atMostX(1.2)),
		compare(name, "CPU us/chunk vs go-openai's own stream loop", median(sg[0], cpu), median(oa, cpu), nil),
	}
	return paired(name, rows, sg, []func(usage) float64{rate, cpu, cpu},
		figure{"CPU us/chunk", cpu}, figure{"chunks/s", rate}), nil
}

// tokenFlags ask for the token ids and 20 logprobs a token.
var tokenFlags = []string{"--generation.return_token_ids", "--generation.logprobs", "20"}

// streamingTokens: half the streaming scenario's streams, asked without
// tokens, with ids, and with ids and 20 logprobs a token, into JSONL (each
// round all three in turn, medians of at most 3 rounds) and once with and
// without into Parquet, the default format, whose parts are converted as
// the run goes. The figures are per chunk the mock generated, and the peak
// RSS; the yardstick is the same run without tokens.
func streamingTokens(ctx context.Context, c *config) ([]row, error) {
	const name = "streaming-tokens"
	sz := c.size
	sz.streamN /= 2
	sz.rounds = min(sz.rounds, 3)
	data, m, err := c.streamMock(ctx, sz.streamN)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	measure := func(j job) (usage, error) { return m.run(c.synthgen(ctx, m.mock, j), j.dir) }
	var with, ids, without []usage
	rss := map[string][2]float64{} // format: without, with
	for round := range sz.rounds {
		for _, k := range []struct {
			extra []string
			runs  *[]usage
		}{{nil, &without}, {tokenFlags[:1], &ids}, {tokenFlags, &with}} {
			j := job{data: data, limit: sz.streamN, stream: true, format: "jsonl", maxTokens: streamMaxTokens, extra: k.extra,
				dir: filepath.Join(c.work, fmt.Sprintf("%s-%d-%d", name, round, len(k.extra)))}
			u, err := measure(j)
			if err != nil {
				return nil, err
			}
			*k.runs = append(*k.runs, u)
		}
	}
	var parquet [2]usage
	for i, tokens := range []bool{false, true} {
		j := job{data: data, limit: sz.streamN, stream: true, format: "parquet", maxTokens: streamMaxTokens,
			dir: filepath.Join(c.work, fmt.Sprintf("%s-parquet-%v", name, tokens))}
		if tokens {
			j.extra = tokenFlags
		}
		if parquet[i], err = measure(j); err != nil {
			return nil, err
		}
	}
	chunks := m.chunks
	rss["jsonl"] = [2]float64{median(without, func(u usage) float64 { return mb(u.maxRSS) }), median(with, func(u usage) float64 { return mb(u.maxRSS) })}
	rss["parquet"] = [2]float64{mb(parquet[0].maxRSS), mb(parquet[1].maxRSS)}
	cpu := func(u usage) float64 { return us(u.cpu) / chunks }
	rate := func(u usage) float64 { return chunks / u.wall.Seconds() }
	return []row{
		compare(name, fmt.Sprintf("%.0f chunks, ids vs none: CPU us/chunk, JSONL (median of %d)", chunks, sz.rounds),
			median(ids, cpu), median(without, cpu), atMostX(1.15)),
		compare(name, "ids + 20 logprobs vs none: CPU us/chunk, JSONL", median(with, cpu), median(without, cpu), atMostX(4)),
		compare(name, "ids + 20 logprobs vs none: chunks/s, JSONL", median(with, rate), median(without, rate), nil),
		compare(name, "ids + 20 logprobs vs none: peak RSS MB, JSONL", rss["jsonl"][1], rss["jsonl"][0], atMostX(1.5)),
		compare(name, "ids + 20 logprobs vs none: CPU us/chunk, Parquet", cpu(parquet[1]), cpu(parquet[0]), atMostX(5)),
		compare(name, "ids + 20 logprobs vs none: peak RSS MB, Parquet", rss["parquet"][1], rss["parquet"][0], atMostX(2)),
	}, nil
}

// scale: the cost of a job's size. Each job (small, then big) is filled to
// half (dataset.limit at 50%), then grown to the whole (exactly a job at
// 50%: only the new rows are asked), then run again once finished (nothing
// left to ask). The zero-latency mock makes the fill cheap; the shards are
// big so that their number does not dominate.
func scale(ctx context.Context, c *config, ids bool) ([]row, error) {
	name := "scale-index"
	if ids {
		name = "scale-id"
	}
	sz := c.size
	data, err := c.dataset(sz.bigRows, ids)
	if err != nil {
		return nil, err
	}
	const tokens = 8
	m, err := startMock(ctx, c.bin, "--mean-tokens", strconv.Itoa(tokens))
	if err != nil {
		return nil, err
	}
	defer m.stop()
	chain := func(rows int64) (scalePhases, error) {
		j := job{data: data, ids: ids, limit: rows / 2, format: "jsonl", maxTokens: 2 * tokens,
			shardSize: 100_000, dir: filepath.Join(c.work, fmt.Sprintf("%s-%d", name, rows))}
		return c.scaleChain(ctx, m, j, rows)
	}
	small, err := chain(sz.smallRows)
	if err != nil {
		return nil, err
	}
	big, err := chain(sz.bigRows)
	if err != nil {
		return nil, err
	}
	bigK, smallK := count(sz.bigRows), count(sz.smallRows)
	// The RSS target is for row-index ids; string ids have theirs per key.
	rssTarget := atMostX(1.3)
	if ids {
		rssTarget = nil
	}
	rows := []row{
		absolute(name, fmt.Sprintf("rerun of the finished %s job: wall s", bigK), big.rerun.wall.Seconds(), atMost(3)),
		absolute(name, fmt.Sprintf("resume at 50%% of %s: launch to first request, s", bigK), big.firstRequest.Seconds(), atMost(3)),
		compare(name, fmt.Sprintf("peak RSS MB of the run that completes the job, %s vs %s", bigK, smallK),
			mb(big.resume.maxRSS), mb(small.resume.maxRSS), rssTarget),
		compare(name, fmt.Sprintf("peak RSS MB of the rerun, %s vs %s", bigK, smallK), mb(big.rerun.maxRSS), mb(small.rerun.maxRSS), nil),
	}
	if ids {
		// Bytes a key for every run of a string-id job: the fill writes
		// half from empty, the run that completes loads that half and
		// writes the other, the rerun loads all. The target is on the
		// slope from the mid job to the big one, which is what a key
		// costs as a job grows: a difference from the small job also
		// counts costs that stop growing between it and the big one (the
		// latency percentiles' reservoirs, 3 MB at most; each packed
		// store's offsets and tail, about 1 MB), and is shown beside it.
		mid, err := chain(sz.midRows)
		if err != nil {
			return nil, err
		}
		rows = append(rows, perKeyRows(name, sz, big, mid, small)...)
	}
	return rows, nil
}

// scalePhases are the three runs of one job size: the fill of its first
// half, the resume that completes it (and how long it took to its first
// request), the rerun of the finished job.
type scalePhases struct {
	fill, resume, rerun usage
	firstRequest        time.Duration
}

// scaleChain runs j to half of rows, then to all of them, then again, and
// fails if the rerun of the finished job asked the mock anything.
func (c *config) scaleChain(ctx context.Context, m *mock, j job, rows int64) (scalePhases, error) {
	var p scalePhases
	var err error
	if p.fill, err = run(c.synthgen(ctx, m, j), nil); err != nil {
		return p, err
	}
	j.limit = rows
	var sp spans
	p.resume, sp, err = runWatched(ctx, m, c.synthgen(ctx, m, j), 0, 0)
	p.firstRequest = sp.first
	if err != nil {
		return p, fmt.Errorf("the resume of %d rows at 50%%: %w", rows, err)
	}
	after, err := m.metric(promptTokensMetric)
	if err != nil {
		return p, err
	}
	p.rerun, err = run(c.synthgen(ctx, m, j), nil)
	if err != nil {
		return p, err
	}
	if again, err := m.metric(promptTokensMetric); err != nil || again != after {
		return p, fmt.Errorf("the rerun of the finished %d-row job asked the mock (prompt tokens %v -> %v, %v)", rows, after, again, err)
	}
	return p, nil
}

// perKeyRows are the bytes of RSS a key costs in each run of a string-id
// job, from the mid size to the big one (the target) and from the small
// one (fixed costs in, shown beside it).
func perKeyRows(name string, sz sizes, big, mid, small scalePhases) []row {
	perKey := func(big, small usage, bigKeys, smallKeys int64) float64 {
		return float64(big.maxRSS-small.maxRSS) / float64(bigKeys-smallKeys)
	}
	runs := []struct {
		what               string
		big, mid, small    usage
		bigK, midK, smallK int64
	}{
		{"the fill from empty (keys written)", big.fill, mid.fill, small.fill, sz.bigRows / 2, sz.midRows / 2, sz.smallRows / 2},
		{"the run that completes the job (keys held)", big.resume, mid.resume, small.resume, sz.bigRows, sz.midRows, sz.smallRows},
		{"the rerun (keys loaded)", big.rerun, mid.rerun, small.rerun, sz.bigRows, sz.midRows, sz.smallRows},
	}
	var rows []row
	for _, r := range runs {
		rows = append(rows,
			absolute(name, fmt.Sprintf("bytes of RSS per key, %s, %s to %s", r.what, count(r.midK), count(r.bigK)),
				perKey(r.big, r.mid, r.bigK, r.midK), atMost(16)),
			absolute(name, fmt.Sprintf("bytes of RSS per key, %s, %s to %s (fixed costs in)", r.what, count(r.smallK), count(r.bigK)),
				perKey(r.big, r.small, r.bigK, r.smallK), nil))
	}
	return rows
}

// count writes a number of rows as 25K or 1M when it is round.
func count(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	case n >= 1000 && n%100 == 0:
		return fmt.Sprintf("%.1fK", float64(n)/1000)
	}
	return strconv.FormatInt(n, 10)
}

func mb(b int64) float64         { return float64(b) / (1 << 20) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
