package airgap

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// field is one named value of a signed statement.
type field struct{ name, value string }

// statement is what a signature covers: a header that names every value
// the file's signature binds.
type statement interface{ fields() []field }

// signStatement signs the JSON of s with key in a DSSE envelope of
// payloadType.
func signStatement(key PrivateKey, payloadType string, s statement) (*dsse.Envelope, error) {
	body, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode signed statement: %w", err)
	}
	signer, err := dsse.NewEnvelopeSigner(key)
	if err != nil {
		return nil, fmt.Errorf("dsse signer: %w", err)
	}
	env, err := signer.SignPayload(context.Background(), payloadType, body)
	if err != nil {
		return nil, fmt.Errorf("dsse sign: %w", err)
	}
	return env, nil
}

// signed is the signature part of a file, and what it must bind.
type signed struct {
	what        string // "bundle" or "receipt", for messages
	envelope    *dsse.Envelope
	signedBy    string
	payloadType string
	header      statement // the file's header, as it stands
	statement   statement // a pointer to decode the signed statement into
}

// checkSignature returns what is wrong with s's signature under opts:
// missing, by an untrusted key, not verifying, or over a statement that
// differs from the file's header. Nothing is wrong when it verifies.
func checkSignature(s signed, opts VerifyOptions) []string {
	if s.envelope == nil {
		if opts.AllowUnsigned {
			return nil
		}
		return []string{fmt.Sprintf("%s is not signed (use --allow-unsigned to accept it)", s.what)}
	}
	key, ok := findKey(opts.TrustedKeys, s.signedBy)
	if !ok {
		return []string{fmt.Sprintf("signed by untrusted key %s", s.signedBy)}
	}
	verifier, err := dsse.NewEnvelopeVerifier(key)
	if err != nil {
		return []string{fmt.Sprintf("signature cannot be checked: %v", err)}
	}
	_, body, err := verifier.VerifyAndDecode(context.Background(), s.envelope)
	if err != nil {
		return []string{fmt.Sprintf("signature does not verify with key %s", key.ID())}
	}
	if s.envelope.PayloadType != s.payloadType {
		return []string{fmt.Sprintf("signature is over a %q, want %q", s.envelope.PayloadType, s.payloadType)}
	}
	if err := decodeStrict(body, s.statement); err != nil {
		return []string{fmt.Sprintf("signed statement does not decode: %v", err)}
	}
	return statementMismatches(s.what, s.statement.fields(), s.header.fields())
}

// statementMismatches names every field the signed statement and the
// file's header disagree on, such as a bundleId changed after signing.
func statementMismatches(what string, signedFields, header []field) []string {
	var problems []string
	for i, f := range signedFields {
		if f.value != header[i].value {
			problems = append(problems, fmt.Sprintf("%s %s does not match its signature: file %q, signed %q",
				what, f.name, header[i].value, f.value))
		}
	}
	return problems
}

func findKey(keys []PublicKey, id string) (PublicKey, bool) {
	for _, k := range keys {
		if k.ID() == id {
			return k, true
		}
	}
	return PublicKey{}, false
}
