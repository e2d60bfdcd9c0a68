package cluster

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/outpost-dev/outpost/internal/certgen"
)

// serverName is the name in the frontends' certificate, beside 127.0.0.1.
const serverName = "temporal.outpost.test"

// certValidity is long enough for any dev session or test run.
const certValidity = 30 * 24 * time.Hour

// writeCertificates makes a CA, the frontends' certificate (also what the
// servers' own system worker presents as client), and Outpost's client
// certificate, as PEM files in dir.
func writeCertificates(dir string) (TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return TLSFiles{}, fmt.Errorf("temporal cluster: certificates: %w", err)
	}
	ca, err := certgen.NewCA("outpost dev cluster CA", certValidity)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("temporal cluster: %w", err)
	}
	files := TLSFiles{CAFile: filepath.Join(dir, "ca.pem"), ServerName: serverName}
	if err := os.WriteFile(files.CAFile, ca.PEM, 0o600); err != nil {
		return TLSFiles{}, fmt.Errorf("temporal cluster: certificates: %w", err)
	}
	frontend, err := ca.Issue(certgen.Subject{
		Name: serverName, DNS: []string{serverName, "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, certValidity)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("temporal cluster: %w", err)
	}
	if _, _, err := certgen.WritePair(dir, "frontend", frontend); err != nil {
		return TLSFiles{}, fmt.Errorf("temporal cluster: %w", err)
	}
	client, err := ca.Issue(certgen.Subject{Name: "outpost", Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, certValidity)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("temporal cluster: %w", err)
	}
	if files.CertFile, files.KeyFile, err = certgen.WritePair(dir, "client", client); err != nil {
		return TLSFiles{}, fmt.Errorf("temporal cluster: %w", err)
	}
	return files, nil
}
