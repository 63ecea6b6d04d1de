package main

// synthgen's own Prometheus endpoint (--metrics-addr): the figures of the
// progress line for a Prometheus server or a dashboard, read from
// runstats.Stats at scrape time. There is no second set of counters to
// keep in step: each scrape takes one Snapshot and turns it into metrics.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/synthgen/synthgen/generator/runstats"
)

// newSelfRegistry returns a registry of its own (not the global default, so
// tests and other code in the process cannot collide with it) holding the
// stats collector and the Go runtime and process collectors.
func newSelfRegistry(stats *runstats.Stats) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		runstats.NewCollector(stats),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// selfMetricsServer serves the registry on /metrics until Close.
type selfMetricsServer struct {
	srv  *http.Server
	addr string // the bound address: the port is known even for ":0"
	done chan struct{}
	reg  *prometheus.Registry // concurrency: auto adds its gauges (autoconc.go)
}

// startSelfMetrics listens on addr at once, so that a taken or malformed
// address fails the run before it sends a request, and serves in the
// background.
func startSelfMetrics(addr string, stats *runstats.Stats, warn io.Writer) (*selfMetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	if everyInterface(addr) {
		_, port, _ := net.SplitHostPort(addr)
		fmt.Fprintf(warn, "warning: --metrics-addr %s listens on every interface: whoever reaches this machine reads the run's figures and endpoint URLs; give 127.0.0.1:%s to keep them on this machine\n", addr, port)
	}
	mux := http.NewServeMux()
	reg := newSelfRegistry(stats)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &selfMetricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
		reg:  reg,
	}
	go func() {
		defer close(m.done)
		// Serve returns ErrServerClosed after Close; any other error leaves
		// the run without its metrics, which is not worth stopping it for.
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// URL is where the metrics are served.
func (m *selfMetricsServer) URL() string { return "http://" + m.addr + "/metrics" }

// Close stops the server, letting a scrape in progress finish for a moment.
func (m *selfMetricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = m.srv.Close()
	}
	<-m.done
	return err
}

// everyInterface says whether a listen address binds all of the machine's
// interfaces: no host (":9464"), or an unspecified one (0.0.0.0, ::).
func everyInterface(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
