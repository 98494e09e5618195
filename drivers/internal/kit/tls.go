package kit

import (
	"crypto/x509"
	"fmt"
	"os"

	"github.com/mutexfx/mutexfx/drivers"
)

// CAPool reads file, a PEM file of CA certificates (the tlsCAFile option
// of the drivers that have one), into a pool. Its errors are invalid
// options at tlsCAFile.
func CAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: tlsCAFile: %v", drivers.ErrOptions, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: tlsCAFile: no PEM certificate in %s", drivers.ErrOptions, file)
	}
	return pool, nil
}
