package main

import (
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/mockserver"
)

// TestRunTLS: an https server whose certificate a private CA signed (here
// httptest's own) is refused until endpoint.ca_file names that CA, with a
// hint that says so; endpoint.insecure_skip_verify also passes, with a
// warning on stderr.
func TestRunTLS(t *testing.T) {
	ts := httptest.NewTLSServer(mockserver.New(mockserver.Options{MeanTokens: 16, Seed: 7}))
	t.Cleanup(ts.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	data := cliDataset(t, 4, 0)
	job := func() cliJob {
		return cliJob{baseURL: ts.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}
	}

	t.Run("untrusted", func(t *testing.T) {
		r := cliRun(t, job().args()...)
		if exitCode(r.err) != exitFailure || !strings.Contains(r.hint(), "endpoint.ca_file") || !strings.Contains(r.hint(), "endpoint.insecure_skip_verify") {
			t.Fatalf("exit %d (%v), hint %q: want exit %d and a hint naming endpoint.ca_file and endpoint.insecure_skip_verify", exitCode(r.err), r.err, r.hint(), exitFailure)
		}
		if strings.Contains(r.stderr, "waiting for the server") {
			t.Errorf("an untrusted certificate was waited for like a loading server:\n%s", r.stderr)
		}
	})
	t.Run("ca_file", func(t *testing.T) {
		j := job()
		r := cliRun(t, j.args("--endpoint.ca_file", ca)...)
		r.ok(t, "with endpoint.ca_file")
		wantIDs(t, "with endpoint.ca_file", cliRecords(t, j.dir), idRange(0, 4)...)
		if strings.Contains(r.stderr, "WARNING") {
			t.Errorf("a warning without insecure_skip_verify:\n%s", r.stderr)
		}
	})
	t.Run("ca_file from the environment", func(t *testing.T) {
		t.Setenv("SYNTHGEN_ENDPOINT_CA_FILE", ca)
		j := job()
		cliRun(t, j.args()...).ok(t, "with SYNTHGEN_ENDPOINT_CA_FILE")
	})
	t.Run("insecure_skip_verify", func(t *testing.T) {
		j := job()
		r := cliRun(t, j.args("--endpoint.insecure_skip_verify")...)
		r.ok(t, "with endpoint.insecure_skip_verify")
		wantIDs(t, "with endpoint.insecure_skip_verify", cliRecords(t, j.dir), idRange(0, 4)...)
		if !strings.Contains(r.stderr, "WARNING: endpoint.insecure_skip_verify") {
			t.Errorf("no warning on stderr:\n%s", r.stderr)
		}
	})
	t.Run("not a PEM file", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(bad, []byte("not a certificate\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cliRun(t, job().args("--endpoint.ca_file", bad)...)
		if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "endpoint.ca_file") {
			t.Errorf("exit %d (%v): want %d naming endpoint.ca_file", exitCode(r.err), r.err, exitUsage)
		}
	})
}
