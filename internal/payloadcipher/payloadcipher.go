// Package payloadcipher encrypts every Temporal payload Outpost writes (workflow
// inputs, signals, query answers, activity inputs and results, memos) with
// AES-256-GCM, so nothing of a notification or call is readable in a
// workflow history without the key. Several keys may be configured: the
// first encrypts, every one decrypts (rotation); a payload names its key.
package payloadcipher

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
const (
	// Encoding marks a payload this codec encrypted.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key that encrypted it.
	MetadataKeyID = "encryption-key-id"
)

// Key is one AES-256 key and its id.
type Key struct {
	ID string
	// Secret is 32 bytes, or their standard base64 (as a key file holds it).
	Secret []byte
}

// ParseSecret reads a key as a file or variable holds it: the standard
// base64 of 32 random bytes (`head -c 32 /dev/urandom | base64`).
func ParseSecret(text string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != 32 {
		return nil, errors.New("an encryption key must be the base64 of 32 bytes (head -c 32 /dev/urandom | base64)")
	}
	return b, nil
}

// NewSecret makes a key as ParseSecret reads it: the standard base64 of 32
// random bytes.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make an encryption key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// AESGCM is a converter.PayloadCodec.
type AESGCM struct {
	active string
	aeads  map[string]cipher.AEAD
}

// New returns a codec that encrypts with keys[0] and decrypts with any of
// keys.
func New(keys []Key) (*AESGCM, error) {
	if len(keys) == 0 {
		return nil, errors.New("no encryption key")
	}
	c := &AESGCM{active: keys[0].ID, aeads: map[string]cipher.AEAD{}}
	for _, k := range keys {
		if k.ID == "" {
			return nil, errors.New("an encryption key needs an id")
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("encryption key id %q given twice", k.ID)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("encryption key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("encryption key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

// Encode encrypts each payload whole (metadata and data) with the active
// key.
func (c *AESGCM) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aead := c.aeads[c.active]
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encode payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("encrypt payload: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte(c.active)},
			Data:     aead.Seal(nonce, nonce, plain, []byte(c.active)),
		}
	}
	return out, nil
}

// Decode decrypts the payloads this codec encrypted, with the key each
// names; others (written before encryption was turned on) pass unchanged.
func (c *AESGCM) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("decrypt payload: no key %q is configured (temporal.encryption_keys)", id)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, errors.New("decrypt payload: too short")
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("decrypt payload with key %q: %w", id, err)
		}
		var decoded commonpb.Payload
		if err := proto.Unmarshal(plain, &decoded); err != nil {
			return nil, fmt.Errorf("decode decrypted payload: %w", err)
		}
		out[i] = &decoded
	}
	return out, nil
}

// DataConverter is the default data converter with payloads encrypted by c.
func DataConverter(c *AESGCM) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

var _ converter.PayloadCodec = (*AESGCM)(nil)
