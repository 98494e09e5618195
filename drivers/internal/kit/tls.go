package kit

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/mutexfx/mutexfx/drivers"
)

// TLSConfig applies the TLS options the networked drivers share to tc, or
// to a new TLS 1.2+ configuration when tc is nil: serverName and
// skipVerify when set (unset, they leave tc's), and the CAs of caFile
// (CAPool) in place of the system pool.
func TLSConfig(tc *tls.Config, caFile, serverName string, skipVerify bool) (*tls.Config, error) {
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if serverName != "" {
		tc.ServerName = serverName
	}
	if skipVerify {
		tc.InsecureSkipVerify = true //nolint:gosec // an explicit option
	}
	if caFile != "" {
		pool, err := CAPool(caFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// CAPool reads file, a PEM file of CA certificates (the tlsCAFile option
// of the drivers that have one), into a pool. Its errors are invalid
// options at tlsCAFile.
func CAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, drivers.OptionErrorf("tlsCAFile", "%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, drivers.OptionErrorf("tlsCAFile", "no PEM certificate in %s", file)
	}
	return pool, nil
}
