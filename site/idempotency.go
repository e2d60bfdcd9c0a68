package site

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// MaxIdempotencyKeyChars bounds an idempotency key.
const MaxIdempotencyKeyChars = 200

// ErrIdempotencyConflict refuses a request whose idempotency key was
// already used, within the site's retention, for a different request:
// nothing was buffered. Use a new key for a new request.
var ErrIdempotencyConflict = sitestore.ErrIdempotencyConflict

// checkIdempotencyKey refuses a key no one could retype or log safely.
func checkIdempotencyKey(key string) error {
	switch {
	case key == "":
		return nil
	case utf8.RuneCountInString(key) > MaxIdempotencyKeyChars:
		return &InvalidError{"idempotencyKey", fmt.Sprintf("longer than %d characters", MaxIdempotencyKeyChars)}
	case !utf8.ValidString(key) || strings.IndexFunc(key, unicode.IsControl) >= 0:
		return &InvalidError{"idempotencyKey", "must be printable UTF-8 text"}
	}
	return nil
}

// operationID is the id of a new operation: derived from key when the
// caller gave one, new otherwise.
func (c *Client) operationID(kind, key string) (string, error) {
	if key != "" {
		return contract.IdempotentOperationID(c.opts.SiteID, kind, key), nil
	}
	return NewID()
}

// requestHash identifies what a keyed request asked for (nil without a
// key): a retry of it with the same key must ask for the same thing.
func requestHash(key string, request any) ([]byte, error) {
	if key == "" {
		return nil, nil
	}
	b, err := json.Marshal(request) // map keys sort: the same request, the same bytes
	if err != nil {
		return nil, fmt.Errorf("hash request: %w", err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// conflictError names the key in ErrIdempotencyConflict, and turns a
// write refused by a standby's store into an UnavailableError.
func conflictError(err error, key string) error {
	if errors.Is(err, sitestore.ErrIdempotencyConflict) {
		return fmt.Errorf("key %q: %w (use a new key for a new request)", key, ErrIdempotencyConflict)
	}
	if errors.Is(err, sitestore.ErrStandby) {
		// The node stepped down between admitting the request and writing it.
		return &UnavailableError{Reason: err.Error() + "; send the operation to the active node"}
	}
	return err
}
