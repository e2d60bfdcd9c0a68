package airgap

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PrivateKey is an ed25519 signing key; it is a dsse.Signer.
type PrivateKey struct {
	key ed25519.PrivateKey
	id  string
}

// PublicKey is an ed25519 verification key; it is a dsse.Verifier.
type PublicKey struct {
	key ed25519.PublicKey
	id  string
}

func newPrivateKey(key ed25519.PrivateKey) PrivateKey {
	return PrivateKey{key: key, id: keyID(key.Public().(ed25519.PublicKey))}
}

func newPublicKey(key ed25519.PublicKey) PublicKey {
	return PublicKey{key: key, id: keyID(key)}
}

// keyID is "ed25519:" and the first 16 hex digits of SHA-256(public key):
// short enough to read out, long enough not to collide among a fleet's keys.
func keyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:])[:16]
}

// ID is the key's id, as a signed file's signedBy names it.
func (k PrivateKey) ID() string { return k.id }

// Public is the verification key of k.
func (k PrivateKey) Public() PublicKey {
	return newPublicKey(k.key.Public().(ed25519.PublicKey))
}

// Sign signs data (the DSSE pre-authentication encoding).
func (k PrivateKey) Sign(_ context.Context, data []byte) ([]byte, error) {
	if len(k.key) != ed25519.PrivateKeySize {
		return nil, errors.New("no private key loaded")
	}
	return ed25519.Sign(k.key, data), nil
}

// KeyID is ID, for dsse.
func (k PrivateKey) KeyID() (string, error) { return k.id, nil }

// ID is the key's id, as a signed file's signedBy names it.
func (k PublicKey) ID() string { return k.id }

// Verify checks sig over data.
func (k PublicKey) Verify(_ context.Context, data, sig []byte) error {
	if len(k.key) != ed25519.PublicKeySize || !ed25519.Verify(k.key, data, sig) {
		return fmt.Errorf("ed25519 signature does not verify with key %s", k.id)
	}
	return nil
}

// KeyID is ID, for dsse.
func (k PublicKey) KeyID() (string, error) { return k.id, nil }

// Public is the ed25519.PublicKey, for dsse.
func (k PublicKey) Public() crypto.PublicKey { return k.key }

// GenerateKey writes a new key pair to dir: <name>.key (PKCS#8 PEM, readable
// by the owner only) and <name>.pub (PKIX PEM). It never overwrites a file,
// so a signing key in use cannot be lost to a repeated command.
func GenerateKey(dir, name string) (privPath, pubPath string, err error) {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return "", "", fmt.Errorf("key name %q: want a plain file name", name)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate ed25519 key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", fmt.Errorf("encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", "", fmt.Errorf("encode public key: %w", err)
	}
	privPath = filepath.Join(dir, name+".key")
	pubPath = filepath.Join(dir, name+".pub")
	if err := writeNewPEM(privPath, "PRIVATE KEY", privDER, 0o600); err != nil {
		return "", "", err
	}
	if err := writeNewPEM(pubPath, "PUBLIC KEY", pubDER, 0o644); err != nil {
		os.Remove(privPath) // no half pair: the name stays free for a retry
		return "", "", err
	}
	return privPath, pubPath, nil
}

// writeNewPEM creates path, refusing an existing file, and writes one PEM
// block to it.
func writeNewPEM(path, blockType string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("create key file: %w", err)
	}
	err = pem.Encode(f, &pem.Block{Type: blockType, Bytes: der})
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write key file %s: %w", path, err)
	}
	return nil
}

// LoadPrivateKey reads an ed25519 private key written by GenerateKey.
func LoadPrivateKey(path string) (PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return PrivateKey{}, err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return PrivateKey{}, fmt.Errorf("private key %s: %w", path, err)
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return PrivateKey{}, fmt.Errorf("private key %s: a %T, want ed25519", path, parsed)
	}
	return newPrivateKey(key), nil
}

// LoadPublicKey reads an ed25519 public key written by GenerateKey.
func LoadPublicKey(path string) (PublicKey, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return PublicKey{}, err
	}
	parsed, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key %s: %w", path, err)
	}
	key, ok := parsed.(ed25519.PublicKey)
	if !ok {
		return PublicKey{}, fmt.Errorf("public key %s: a %T, want ed25519", path, parsed)
	}
	return newPublicKey(key), nil
}

// LoadTrustedKeys reads every *.pub file in dir. One file that is not an
// ed25519 public key fails the whole load: a trust store silently missing a
// key would refuse bundles for a reason nobody sees.
func LoadTrustedKeys(dir string) ([]PublicKey, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read trusted keys: %w", err)
	}
	var keys []PublicKey
	for _, f := range files {
		if f.IsDir() || !strings.HasSuffix(f.Name(), ".pub") {
			continue
		}
		key, err := LoadPublicKey(filepath.Join(dir, f.Name()))
		if err != nil {
			return nil, fmt.Errorf("read trusted keys: %w", err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// readPEM reads the single PEM block of blockType in path.
func readPEM(path, blockType string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != blockType {
		return nil, fmt.Errorf("key file %s: no %q PEM block", path, blockType)
	}
	return block.Bytes, nil
}
