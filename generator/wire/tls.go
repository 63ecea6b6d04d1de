package wire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ClientTLS is the TLS configuration of the connections to the server:
// nil (Go's defaults: the system's roots) unless caFile names a PEM bundle
// of private CA certificates, which are trusted on top of the system's
// roots, or insecure turns certificate checks off.
func ClientTLS(caFile string, insecure bool) (*tls.Config, error) {
	if caFile == "" && !insecure {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // asked for by endpoint.insecure_skip_verify, and warned about
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("endpoint.ca_file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool() // no system roots here: the bundle alone
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("endpoint.ca_file: %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", caFile)
	}
	cfg.RootCAs = roots
	return cfg, nil
}

// IsCertificateError reports whether err is a server certificate that
// this machine does not trust (an unknown CA, another host's name).
func IsCertificateError(err error) bool {
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}
