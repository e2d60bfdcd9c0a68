package httpserve

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Certificates serves a certificate and key from files, reloaded when
// either file changes: a renewed certificate is used from the next
// handshake on, without a restart.
type Certificates struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
}

// NewCertificates loads the pair once, so a wrong file fails at start-up.
func NewCertificates(certFile, keyFile string) (*Certificates, error) {
	c := &Certificates{certFile: certFile, keyFile: keyFile}
	if _, err := c.GetCertificate(nil); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCertificate is tls.Config.GetCertificate: the pair as the files hold
// it now; the last good one while a renewal is half written.
func (c *Certificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	latest, err := c.latestModTime()
	if err == nil && c.cert != nil && !latest.After(c.modTime) {
		return c.cert, nil
	}
	cert, loadErr := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if loadErr != nil {
		if c.cert != nil {
			return c.cert, nil // keep serving the last good pair
		}
		return nil, fmt.Errorf("site api tls: load %s and %s: %w", c.certFile, c.keyFile, loadErr)
	}
	c.cert, c.modTime = &cert, latest
	return c.cert, nil
}

func (c *Certificates) latestModTime() (time.Time, error) {
	var latest time.Time
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return time.Time{}, err
		}
		if fi.ModTime().After(latest) {
			latest = fi.ModTime()
		}
	}
	return latest, nil
}

// TLSConfig is a server TLS config on c (TLS 1.2 at least).
func (c *Certificates) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: c.GetCertificate, MinVersion: tls.VersionTLS12}
}
