// Package certgen makes a private CA and the certificates it signs, for
// mutual TLS between Outpost and a Temporal cluster that a test or
// `outpost dev --cluster` runs on this machine.
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA signs certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is Cert, PEM-encoded (what a tls_ca_file holds).
	PEM []byte
}

// NewCA makes a CA named name, valid from an hour ago for validFor.
func NewCA(name string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA %q: generate key: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validFor),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %q: sign: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("CA %q: parse: %w", name, err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Subject says whom a certificate names and what it may be used for.
type Subject struct {
	Name  string
	DNS   []string
	IPs   []net.IP
	Usage []x509.ExtKeyUsage
}

// Issue signs a certificate for s, valid from an hour ago for validFor.
func (ca *CA) Issue(s Subject, validFor time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate %q: generate key: %w", s.Name, err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate %q: serial: %w", s.Name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: s.Name}, DNSNames: s.DNS, IPAddresses: s.IPs,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validFor),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: s.Usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate %q: sign: %w", s.Name, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// WritePair writes c and its key as PEM files dir/name.pem and
// dir/name-key.pem, readable by the owner only.
func WritePair(dir, name string, c tls.Certificate) (certFile, keyFile string, err error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return "", "", fmt.Errorf("certificate %s: encode key: %w", name, err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		return "", "", fmt.Errorf("certificate %s: %w", name, err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("certificate %s: %w", name, err)
	}
	return certFile, keyFile, nil
}
