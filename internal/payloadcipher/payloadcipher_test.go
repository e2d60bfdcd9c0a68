package payloadcipher

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func key(t *testing.T, id string) Key {
	t.Helper()
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	return Key{ID: id, Secret: secret}
}

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

// A payload comes back whole; its ciphertext shows nothing of it; a key
// rotated out still decrypts what it encrypted; a payload written before
// encryption passes; a tampered one or one of an unknown key fails.
func TestAESGCM(t *testing.T) {
	t.Parallel()
	old, cur := key(t, "k1"), key(t, "k2")
	before, err := New([]Key{old})
	require.NoError(t, err)
	after, err := New([]Key{cur, old})
	require.NoError(t, err)

	plain := payload(t, map[string]string{"subject": "Pump 3 tripped", "body": "Pressure low"})
	enc, err := before.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.Equal(t, Encoding, string(enc[0].Metadata[converter.MetadataEncoding]))
	require.Equal(t, "k1", string(enc[0].Metadata[MetadataKeyID]))
	require.False(t, bytes.Contains(enc[0].Data, []byte("Pump 3")), "nothing readable")

	for _, c := range []*AESGCM{before, after} {
		dec, err := c.Decode(enc)
		require.NoError(t, err)
		require.Equal(t, plain.Data, dec[0].Data)
		require.Equal(t, plain.Metadata, dec[0].Metadata)
	}
	enc2, err := after.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.Equal(t, "k2", string(enc2[0].Metadata[MetadataKeyID]), "the first key encrypts")
	_, err = before.Decode(enc2)
	require.ErrorContains(t, err, `no key "k2" is configured`)

	passed, err := after.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.Equal(t, plain, passed[0], "a payload from before encryption passes")

	enc[0].Data[len(enc[0].Data)-1] ^= 1
	_, err = before.Decode(enc)
	require.ErrorContains(t, err, "decrypt payload with key")
}

func TestKeysAreChecked(t *testing.T) {
	t.Parallel()
	_, err := New(nil)
	require.Error(t, err)
	k := key(t, "k1")
	_, err = New([]Key{k, k})
	require.ErrorContains(t, err, "given twice")
	_, err = ParseSecret("c2hvcnQ=")
	require.ErrorContains(t, err, "base64 of 32 bytes")
	b, err := ParseSecret(base64.StdEncoding.EncodeToString(k.Secret) + "\n")
	require.NoError(t, err)
	require.Equal(t, k.Secret, b)
}
