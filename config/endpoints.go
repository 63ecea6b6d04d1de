package config

import "strings"

// List splits a list key's value (endpoint.base_url, endpoint.metrics_url)
// into its entries: comma-separated, spaces around each trimmed, empty
// entries kept (Validate refuses them). "" is no entry at all.
func List(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// BaseURLs are the endpoints the requests go to: one, or several replicas
// of one model (each request goes to the healthy one with the fewest
// requests in flight).
func (e EndpointConfig) BaseURLs() []string { return List(e.BaseURL) }

// MetricsURLs are the endpoint.metrics_url entries as written: none (each
// derived from its base_url), or one per base_url in the same order.
func (e EndpointConfig) MetricsURLs() []string { return List(e.MetricsURL) }
