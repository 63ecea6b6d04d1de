package main

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/dataset"
)

// The deployment files (the Dockerfile, examples/kubernetes, examples/slurm)
// are run where no test can follow them: on a cluster, by a container
// engine. These tests hold them to what synthgen needs from them.

// dockerfile is what the tests rely on in the Dockerfile.
type dockerfile struct {
	froms      []string // each stage's base image, in order
	buildEnv   []string // NAME=value before `go build` in the RUN line
	buildArgs  []string // the words after `go build`, -o and its value left out
	out        string   // go build's -o
	copies     []string // the last stage's COPY lines, as written
	user       string   // the last USER
	entrypoint string   // ENTRYPOINT, as written
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	d, err := parseDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// parseDockerfile reads ../../Dockerfile (also before the tests run: its
// build is started by TestMain).
func parseDockerfile() (dockerfile, error) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		return dockerfile{}, err
	}
	defer f.Close()
	var d dockerfile
	builds := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			d.froms = append(d.froms, strings.Fields(rest)[0])
			d.copies = nil
		case "COPY":
			d.copies = append(d.copies, rest)
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			d.entrypoint = rest
		case "RUN":
			words, err := shellWords(rest)
			if err != nil {
				return dockerfile{}, err
			}
			for i := 0; i+1 < len(words); i++ {
				if words[i] != "go" || words[i+1] != "build" {
					continue
				}
				builds++
				d.buildEnv = words[:i]
				for j := i + 2; j < len(words); j++ {
					if words[j] == "-o" && j+1 < len(words) {
						d.out = words[j+1]
						j++
						continue
					}
					d.buildArgs = append(d.buildArgs, words[j])
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return dockerfile{}, err
	}
	if builds != 1 {
		return dockerfile{}, fmt.Errorf("the Dockerfile has %d RUN lines with go build, want 1 (continued lines are not read here)", builds)
	}
	return d, nil
}

// shellWords splits a command line (a Dockerfile's RUN, a page's example)
// as sh would for plain words and single- or double-quoted ones; anything
// fancier is an error.
func shellWords(s string) ([]string, error) {
	if strings.ContainsAny(s, "\\`;&|") {
		return nil, fmt.Errorf("%s: quoting this test does not read", s)
	}
	var words []string
	var cur strings.Builder
	var in rune // the open quote
	quoted := false
	for _, r := range s {
		switch {
		case r == in:
			in = 0
		case in == 0 && (r == '"' || r == '\''):
			in, quoted = r, true
		case (r == ' ' || r == '\t') && in == 0:
			if cur.Len() > 0 || quoted {
				words = append(words, cur.String())
			}
			cur.Reset()
			quoted = false
		default:
			cur.WriteRune(r)
		}
	}
	if in != 0 {
		return nil, fmt.Errorf("%s: unbalanced quote", s)
	}
	if cur.Len() > 0 || quoted {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestDockerfileBuildsStatic: the Dockerfile's final stage has no libc, so
// the binary must be static, and it has no shell, so the ENTRYPOINT is the
// binary on the PATH. The test builds the binary with the Dockerfile's own go
// build line (environment, flags, package) and checks what the image needs:
// an ELF with no interpreter and no shared library, that runs and names the
// version it was given.
func TestDockerfileBuildsStatic(t *testing.T) {
	d := readDockerfile(t)

	if len(d.froms) < 2 {
		t.Fatalf("FROM %v: want a builder stage and a final stage", d.froms)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("no go directive in go.mod")
	}
	if want := "golang:" + string(m[1]); !strings.HasPrefix(d.froms[0], want) {
		t.Errorf("builder FROM %s, want %s (go.mod's go %s)", d.froms[0], want, m[1])
	}
	final := d.froms[len(d.froms)-1]
	if final != "scratch" && !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("final FROM %s: want distroless/static (CA certificates, a non-root user) or scratch", final)
	}
	if d.user == "" || d.user == "root" || strings.HasPrefix(d.user, "0") {
		t.Errorf("USER %q: the image must not run as root", d.user)
	}
	if d.entrypoint != `["synthgen"]` {
		t.Errorf(`ENTRYPOINT %s, want ["synthgen"] (exec form: the image has no shell)`, d.entrypoint)
	}
	copied := false
	for _, c := range d.copies {
		f := strings.Fields(c)
		if len(f) == 3 && f[0] == "--from=build" && f[1] == d.out && f[2] == "/usr/local/bin/synthgen" {
			copied = true
		}
	}
	if !copied {
		t.Errorf("the final stage does not COPY --from=build %s /usr/local/bin/synthgen (on distroless' PATH): %q", d.out, d.copies)
	}
	if !slices.Contains(d.buildEnv, "CGO_ENABLED=0") {
		t.Errorf("go build runs with %q: want CGO_ENABLED=0, the image has no libc", d.buildEnv)
	}
	if !slices.Contains(d.buildArgs, "-trimpath") {
		t.Errorf("go build %q: want -trimpath (no build machine paths in the binary)", d.buildArgs)
	}
	if n := len(d.buildArgs); n == 0 || d.buildArgs[n-1] != "./cmd/synthgen" {
		t.Fatalf("go build %q: want the package ./cmd/synthgen last", d.buildArgs)
	}
	ldflags := ""
	for i, a := range d.buildArgs {
		if a == "-ldflags" && i+1 < len(d.buildArgs) {
			ldflags = d.buildArgs[i+1]
		}
	}
	if !strings.Contains(ldflags, "-X main.version=${VERSION}") {
		t.Errorf("-ldflags %q: want -X main.version=${VERSION} (the build argument)", ldflags)
	}

	if runtime.GOOS != "linux" {
		t.Skip("the image is Linux; the binary check reads ELF")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// Built with the Dockerfile's line (prebuild_test.go), started before
	// the tests: the build shares no cache with the others. Waited for
	// among the parallel tests, so the sequential ones need not.
	t.Parallel()
	const ver = dockerVersion
	bin := dockerBinary.wait(t)

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter (PT_INTERP): it is dynamically linked and will not start on distroless/static")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Fatal(err)
	} else if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (DT_NEEDED)", libs)
	}

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("synthgen version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), ver) {
		t.Errorf("synthgen version says %q, want %s from -ldflags", out, ver)
	}
}

// k8sObject is the part of a Kubernetes manifest the tests read.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"` // ConfigMap
	Spec struct {
		AccessModes []string `yaml:"accessModes"` // PersistentVolumeClaim

		CompletionMode       string `yaml:"completionMode"` // Job
		Completions          *int   `yaml:"completions"`
		Parallelism          *int   `yaml:"parallelism"`
		BackoffLimit         *int   `yaml:"backoffLimit"`
		BackoffLimitPerIndex *int   `yaml:"backoffLimitPerIndex"`
		PodReplacementPolicy string `yaml:"podReplacementPolicy"`
		Template             struct {
			Spec k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sPodSpec struct {
	RestartPolicy                 string         `yaml:"restartPolicy"`
	TerminationGracePeriodSeconds *int           `yaml:"terminationGracePeriodSeconds"`
	Containers                    []k8sContainer `yaml:"containers"`
	Volumes                       []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		PersistentVolumeClaim *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
	} `yaml:"volumes"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// readK8s reads every document of every manifest in examples/kubernetes.
func readK8s(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob("../../examples/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/kubernetes: %v, %d manifests", err, len(files))
	}
	var objs []k8sObject
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				t.Fatalf("%s: %v", name, err)
			}
			if o.Kind == "" || o.APIVersion == "" {
				t.Errorf("%s: a document without kind or apiVersion", name)
			}
			objs = append(objs, o)
		}
		f.Close()
	}
	return objs
}

// varRef is Kubernetes' $(NAME) expansion in command, args and env values.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// underDir reports whether path is dir or inside it.
func underDir(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// TestKubernetesIndexedJob: examples/kubernetes runs one pod per shard. What
// a cluster would only show by running it wrong: pods that all run the same
// shard, or write into one directory; a --shard n that differs from the
// number of pods (rows no pod asks); a pod killed before synthgen has
// drained; a config that does not load or that names another key variable
// than the Secret sets; output off the shared volume, lost with the pod.
func TestKubernetesIndexedJob(t *testing.T) {
	objs := readK8s(t)
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	if len(byKind["Job"]) != 1 || len(byKind["ConfigMap"]) != 1 || len(byKind["PersistentVolumeClaim"]) != 1 {
		t.Fatalf("want one Job, one ConfigMap, one PersistentVolumeClaim; have %d, %d, %d",
			len(byKind["Job"]), len(byKind["ConfigMap"]), len(byKind["PersistentVolumeClaim"]))
	}
	job, cm, pvc := byKind["Job"][0], byKind["ConfigMap"][0], byKind["PersistentVolumeClaim"][0]

	if job.APIVersion != "batch/v1" || job.Spec.CompletionMode != "Indexed" {
		t.Errorf("Job %s, completionMode %q: want batch/v1, Indexed (each pod its own index)", job.APIVersion, job.Spec.CompletionMode)
	}
	if job.Spec.Completions == nil || job.Spec.Parallelism == nil || *job.Spec.Completions != *job.Spec.Parallelism || *job.Spec.Completions < 2 {
		t.Fatalf("completions %s, parallelism %s: want the same N >= 2, one pod per shard at once", intOrNone(job.Spec.Completions), intOrNone(job.Spec.Parallelism))
	}
	n := *job.Spec.Completions
	pod := job.Spec.Template.Spec
	// A new pod with the same index resumes the shard: the Job must retry.
	if pod.RestartPolicy != "Never" && pod.RestartPolicy != "OnFailure" {
		t.Errorf("restartPolicy %q: want Never or OnFailure", pod.RestartPolicy)
	}
	if (job.Spec.BackoffLimit != nil && *job.Spec.BackoffLimit < 1) || (job.Spec.BackoffLimitPerIndex != nil && *job.Spec.BackoffLimitPerIndex < 1) {
		t.Error("a backoff limit of 0: a pod that fails never resumes its shard")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	// $(NAME) is expanded only for a variable of the container's env
	// defined before; any other stays as written, and would reach synthgen.
	defined := map[string]string{}
	for _, e := range c.Env {
		for _, m := range varRef.FindAllStringSubmatch(e.Value, -1) {
			if _, ok := defined[m[1]]; !ok {
				t.Errorf("env %s=%s: $(%s) is not defined before it, Kubernetes leaves it as is", e.Name, e.Value, m[1])
			}
		}
		defined[e.Name] = e.Value
	}
	if e, ok := defined["JOB_COMPLETION_INDEX"]; ok && e != "" {
		t.Errorf("JOB_COMPLETION_INDEX is set to %q: it must come from the pod's index", e)
	}
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
			e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']") {
			t.Error("JOB_COMPLETION_INDEX must come from the downward API: metadata.annotations['batch.kubernetes.io/job-completion-index']")
		}
	}
	defined["JOB_COMPLETION_INDEX"] = "" // the Job controller sets it too

	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(c.Command) > 0 && filepath.Base(c.Command[0]) != "synthgen" {
		t.Fatalf("command %q: the image has no shell, run synthgen (or leave command to the ENTRYPOINT)", c.Command)
	}
	if len(c.Command) > 0 {
		argv = argv[1:]
	}
	for _, a := range argv {
		for _, m := range varRef.FindAllStringSubmatch(a, -1) {
			if _, ok := defined[m[1]]; !ok {
				t.Errorf("argument %q: $(%s) is not in the container's env, Kubernetes leaves it as is", a, m[1])
			}
		}
		if strings.Contains(a, "${") || strings.HasPrefix(a, "$") && !varRef.MatchString(a) {
			t.Errorf("argument %q: no shell expands this, use $(NAME)", a)
		}
	}
	if len(argv) == 0 || argv[0] != "run" {
		t.Fatalf("arguments %q: want synthgen run ...", argv)
	}
	flag := func(name string) string {
		for i, a := range argv {
			if a == name && i+1 < len(argv) {
				return argv[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
		t.Fatalf("arguments %q: no %s", argv, name)
		return ""
	}
	shard, outDir, cfgPath := flag("--shard"), flag("--output.dir"), flag("--config")

	// Each index runs shard index/N into a directory of its own.
	dirs := map[string]int{}
	for i := 0; i < n; i++ {
		expand := func(s string) string {
			return strings.ReplaceAll(s, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i))
		}
		sh, err := dataset.ParseShard(expand(shard))
		if err != nil {
			t.Fatalf("--shard %s for index %d: %v", shard, i, err)
		}
		if want := fmt.Sprintf("%d/%d", i, n); expand(shard) != want {
			t.Errorf("--shard %s is %s for index %d, want %s (N = completions)", shard, sh, i, want)
		}
		d := filepath.Clean(expand(outDir))
		if j, ok := dirs[d]; ok {
			t.Errorf("indexes %d and %d write into the same --output.dir %s", j, i, d)
		}
		dirs[d] = i
	}

	mounts := map[string]string{} // volume name -> mount path
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	var pvcMount, cmMount string
	for _, v := range pod.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Metadata.Name:
			pvcMount = mounts[v.Name]
		case v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name:
			cmMount = mounts[v.Name]
		}
	}
	if pvcMount == "" || !underDir(outDir, pvcMount) || filepath.Clean(outDir) == filepath.Clean(pvcMount) {
		t.Errorf("--output.dir %s is not a directory on the claim %s (mounted at %q): the output would die with the pod", outDir, pvc.Metadata.Name, pvcMount)
	}
	if !slices.Equal(pvc.Spec.AccessModes, []string{"ReadWriteMany"}) {
		t.Errorf("the claim's accessModes %q: want ReadWriteMany, the pods run on several nodes at once", pvc.Spec.AccessModes)
	}
	if cmMount == "" || filepath.Dir(cfgPath) != filepath.Clean(cmMount) {
		t.Fatalf("--config %s is not in the ConfigMap %s's mount %q", cfgPath, cm.Metadata.Name, cmMount)
	}
	text, ok := cm.Data[filepath.Base(cfgPath)]
	if !ok {
		t.Fatalf("the ConfigMap has no key %s (--config %s)", filepath.Base(cfgPath), cfgPath)
	}

	// The config the pods read: it loads (no unknown key, valid values).
	tmp := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(nil, tmp)
	if err != nil {
		t.Fatalf("the ConfigMap's %s: %v", filepath.Base(cfgPath), err)
	}
	if u, err := url.Parse(cfg.Endpoint.BaseURL); err != nil || u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1" {
		t.Errorf("endpoint.base_url %s: a pod's localhost is not the vLLM server; use its Service name", cfg.Endpoint.BaseURL)
	}
	if cfg.Output.Dir != "" && !underDir(cfg.Output.Dir, pvcMount) {
		t.Errorf("the config's output.dir %s is off the claim's mount %s", cfg.Output.Dir, pvcMount)
	}

	// The job split N ways: only what its header says may differ from
	// examples/perfectblend-by-file.yaml, and never what changes the answers.
	base, err := config.Load(nil, "../../"+shardedJob)
	if err != nil {
		t.Fatal(err)
	}
	a, b := map[string]any{}, map[string]any{}
	flatten("", base.Redacted(), a)
	flatten("", cfg.Redacted(), b)
	for k := range a {
		if _, ok := b[k]; !ok {
			b[k] = nil
		}
	}
	for k, v := range b {
		switch k {
		case "endpoint.base_url", "concurrency", "output.dir":
			continue // the ConfigMap's header says why
		}
		if fmt.Sprint(v) != fmt.Sprint(a[k]) {
			t.Errorf("the ConfigMap's %s is %v, %s's %v: the shards would not be its job", k, v, shardedJob, a[k])
		}
	}
	if cfg.Concurrency*n != base.Concurrency {
		t.Errorf("concurrency %d in each of %d pods: %d on the server, the job has %d", cfg.Concurrency, n, cfg.Concurrency*n, base.Concurrency)
	}
	if cfg.Dataset.ShardBy == "files" && n > shardedJobFiles {
		t.Errorf("%d pods split %s by file: it has %d files, the pods past them would get none", n, cfg.Dataset.Path, shardedJobFiles)
	}

	// SIGTERM drains for shutdown.grace; SIGKILL must not come sooner.
	if pod.TerminationGracePeriodSeconds == nil {
		t.Error("no terminationGracePeriodSeconds: the default 30s cuts the drain short")
	} else if g := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; g < cfg.Shutdown.Grace+10*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v: want more than shutdown.grace %v plus a margin to close the shard", g, cfg.Shutdown.Grace)
	}

	// The key reaches synthgen under the name the config gives it.
	if cfg.Endpoint.APIKeyEnv == "" {
		t.Error("the config names no endpoint.api_key_env")
	}
	fromSecret := false
	for _, e := range c.Env {
		if e.Name == cfg.Endpoint.APIKeyEnv && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fromSecret = true
		}
	}
	if !fromSecret {
		t.Errorf("no env %s from a Secret (the config's endpoint.api_key_env)", cfg.Endpoint.APIKeyEnv)
	}
	// Two processes must not download into one Hub cache.
	if strings.HasPrefix(cfg.Dataset.Path, "hf://") && !strings.Contains(defined["SYNTHGEN_CACHE_DIR"], "$(JOB_COMPLETION_INDEX)") {
		t.Errorf("SYNTHGEN_CACHE_DIR %q: the pods would download %s into one cache at once; give each index its own", defined["SYNTHGEN_CACHE_DIR"], cfg.Dataset.Path)
	}
}

// shardedJob is the job examples/kubernetes and examples/slurm split, by
// file; shardedJobFiles its dataset's files (open-perfectblend's six
// Parquet files, as dataset/hub's split test lists them).
const (
	shardedJob      = "examples/perfectblend-by-file.yaml"
	shardedJobFiles = 6
)

func intOrNone(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

// TestSlurmArray: examples/slurm/synthgen-array.sh runs one array task per
// shard. Its #SBATCH lines must agree with the --shard it passes and with
// the config's shutdown.grace, and the script, run as Slurm would run task
// I (with a stand-in for synthgen), must pass --shard I/N and a directory
// of its own.
func TestSlurmArray(t *testing.T) {
	const script = "../../examples/slurm/synthgen-array.sh"
	text, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	sbatch := map[string]string{}
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			if strings.TrimSpace(line) != "" {
				break // sbatch reads directives up to the first command
			}
			continue
		}
		if opt, ok := strings.CutPrefix(line, "#SBATCH "); ok {
			name, value, _ := strings.Cut(strings.TrimSpace(opt), "=")
			sbatch[name] = value
		}
	}
	m := regexp.MustCompile(`^0-(\d+)(%\d+)?$`).FindStringSubmatch(sbatch["--array"])
	if m == nil {
		t.Fatalf("--array=%s: want 0-(N-1), one task per shard", sbatch["--array"])
	}
	last, _ := strconv.Atoi(m[1])
	n := last + 1
	if n > shardedJobFiles {
		t.Errorf("--array=%s: %d tasks split %s by file, which has %d files: the tasks past them would get none", sbatch["--array"], n, shardedJob, shardedJobFiles)
	}

	cfg, err := config.Load(nil, "../../"+shardedJob) // the script's default
	if err != nil {
		t.Fatal(err)
	}
	sig := regexp.MustCompile(`^(B:)?TERM@(\d+)$`).FindStringSubmatch(sbatch["--signal"])
	if sig == nil {
		t.Fatalf("--signal=%s: want TERM@SECONDS before the time limit", sbatch["--signal"])
	}
	if secs, _ := strconv.Atoi(sig[2]); time.Duration(secs)*time.Second < cfg.Shutdown.Grace+10*time.Second {
		t.Errorf("--signal=%s: synthgen drains for shutdown.grace %v after SIGTERM, and needs a margin to close its shard", sbatch["--signal"], cfg.Shutdown.Grace)
	}
	// Without B: the signal goes to job steps only, not to a program the
	// batch script runs itself.
	if sig[1] == "" && !strings.Contains(string(text), "srun ") {
		t.Errorf("--signal=%s reaches job steps only, and synthgen is not run with srun: use B:TERM", sbatch["--signal"])
	}
	if sig[1] == "B:" && !regexp.MustCompile(`(?m)^exec "\$bin" run`).Match(text) {
		t.Error("--signal=B:TERM goes to the batch shell: it must exec synthgen, or synthgen never drains")
	}
	if _, ok := sbatch["--requeue"]; !ok {
		t.Error("no #SBATCH --requeue: a preempted task would not come back to resume its shard")
	}
	if out := sbatch["--output"]; sbatch["--open-mode"] != "append" && !strings.Contains(out, "%a") {
		t.Errorf("--output=%s: tasks would write one log, and a requeued task would truncate it", out)
	}

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	tmp := t.TempDir()
	fake := filepath.Join(tmp, "fake-synthgen")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\nenv | grep '^SYNTHGEN_' | sort | sed 's/^/env /'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	caches := map[string]bool{}
	for i := 0; i < n; i++ {
		cmd := exec.Command(bash, script)
		// The environment sbatch would give it, and no more.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp,
			"SLURM_ARRAY_TASK_ID=" + strconv.Itoa(i), "SLURM_ARRAY_TASK_COUNT=" + strconv.Itoa(n),
			"SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX=" + strconv.Itoa(last), "SLURM_SUBMIT_DIR=../..",
			"VLLM_URL=http://gpu-node-01:8000/v1", "SYNTHGEN_BIN=" + fake, "JOB_OUT=" + out}
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("task %d: %v\n%s", i, err, msg)
		}
		logs, _ := filepath.Glob(filepath.Join(out, "logs", "*.log"))
		if len(logs) != i+1 {
			t.Fatalf("task %d: logs %q, want one per task so far", i, logs)
		}
		// The script's own follow-up, synthgen inspect OUT/shard-*, must
		// find the shard directories and nothing else.
		if err := os.MkdirAll(filepath.Join(out, fmt.Sprintf("shard-%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		shards, _ := filepath.Glob(filepath.Join(out, "shard-*"))
		for _, p := range shards {
			if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
				t.Errorf("task %d: %s matches OUT/shard-*, the glob of the shard directories, and is not one", i, p)
			}
		}
		b, err := os.ReadFile(filepath.Join(out, "logs", fmt.Sprintf("shard-%d.log", i)))
		if err != nil {
			t.Fatalf("task %d: its log: %v", i, err)
		}
		var args, env []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if kv, ok := strings.CutPrefix(line, "env "); ok {
				env = append(env, kv)
			} else {
				args = append(args, line)
			}
		}
		// What synthgen would warn about: a SYNTHGEN_* variable it does not read.
		for _, e := range config.UnknownEnv(env, append([]string{cfg.Endpoint.APIKeyEnv}, otherEnv...)...) {
			t.Errorf("task %d: %v", i, e)
		}
		get := func(name string) string {
			for k, a := range args {
				if a == name && k+1 < len(args) {
					return args[k+1]
				}
			}
			t.Fatalf("task %d runs synthgen %q: no %s", i, args, name)
			return ""
		}
		if args[0] != "run" {
			t.Fatalf("task %d runs synthgen %q, want run", i, args)
		}
		if got, want := get("--shard"), fmt.Sprintf("%d/%d", i, n); got != want {
			t.Errorf("task %d: --shard %s, want %s", i, got, want)
		}
		if got, want := get("--output.dir"), filepath.Join(out, fmt.Sprintf("shard-%d", i)); got != want {
			t.Errorf("task %d: --output.dir %s, want %s", i, got, want)
		}
		if got := get("--endpoint.base_url"); got != "http://gpu-node-01:8000/v1" {
			t.Errorf("task %d: --endpoint.base_url %s, want $VLLM_URL", i, got)
		}
		if _, err := config.Load(nil, get("--config")); err != nil {
			t.Errorf("task %d: --config: %v", i, err)
		}
		if c, err := strconv.Atoi(get("--concurrency")); err != nil || c*n != cfg.Concurrency {
			t.Errorf("task %d: --concurrency %s in each of %d tasks: want %d on the server in all, as %s", i, get("--concurrency"), n, cfg.Concurrency, shardedJob)
		}
		cache := ""
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "SYNTHGEN_CACHE_DIR="); ok {
				cache = v
			}
		}
		if cache == "" {
			t.Errorf("task %d: no SYNTHGEN_CACHE_DIR of its own", i)
		}
		if caches[cache] {
			t.Errorf("task %d: %s is another task's too: two downloads into one Hub cache", i, cache)
		}
		caches[cache] = true
	}
}
