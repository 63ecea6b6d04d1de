package hub

// The Hub settings read from huggingface_hub's environment variables.

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// hubSettings are read from the environment variables huggingface_hub reads,
// so that a machine set up for it works the same.
type hubSettings struct {
	endpoint string // HF_ENDPOINT without a trailing slash
	host     string // the endpoint's host: the token goes nowhere else
	token    string // HF_TOKEN; never logged or put in an error
	offline  bool   // HF_HUB_OFFLINE: cache only
	cacheDir string // SYNTHGEN_CACHE_DIR, else $HF_HOME/synthgen, else the user cache dir/synthgen
}

func hubSettingsFromEnv() (hubSettings, error) {
	var s hubSettings
	s.endpoint = strings.TrimRight(strings.TrimSpace(os.Getenv("HF_ENDPOINT")), "/")
	if s.endpoint == "" {
		s.endpoint = defaultHubEndpoint
	}
	u, err := url.Parse(s.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return s, fmt.Errorf("HF_ENDPOINT %q: want a URL such as %s", s.endpoint, defaultHubEndpoint)
	}
	s.host = u.Host
	s.token = strings.TrimSpace(os.Getenv("HF_TOKEN"))
	switch strings.ToLower(strings.TrimSpace(os.Getenv("HF_HUB_OFFLINE"))) {
	case "1", "true", "yes", "on":
		s.offline = true
	}
	switch {
	case os.Getenv("SYNTHGEN_CACHE_DIR") != "":
		s.cacheDir = os.Getenv("SYNTHGEN_CACHE_DIR")
	case os.Getenv("HF_HOME") != "":
		s.cacheDir = filepath.Join(os.Getenv("HF_HOME"), "synthgen")
	default:
		dir, err := os.UserCacheDir()
		if err != nil {
			return s, fmt.Errorf("no cache directory for hf:// datasets (%w): set SYNTHGEN_CACHE_DIR", err)
		}
		s.cacheDir = filepath.Join(dir, "synthgen")
	}
	return s, nil
}
