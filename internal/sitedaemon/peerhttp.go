package sitedaemon

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// The nodes of a pair talk over their site APIs, under /v1/peer/, with the
// secret they share in peerSecretHeader on every request:
//
//	POST /v1/peer/heartbeat   heartbeat in, heartbeat out
//	GET  /v1/peer/changes     ?after=N&checksum=hex: the changes after
//	                          what the standby received (409: resync);
//	                          &applied=M&applied_checksum=hex
//	                          acknowledges what it applied
//	POST /v1/peer/applied     ?number=M&checksum=hex: acknowledges what
//	                          the standby applied, at once (sync mode)
//	GET  /v1/peer/snapshot    a full copy of the active node's store
//	POST /v1/peer/handover    a stepping-down node's operations to adopt
const peerSecretHeader = "X-Outpost-Peer-Secret"

// maxChangesPerAnswer bounds one answer to a standby.
const maxChangesPerAnswer = 512

// handoverLimit bounds a hand-over body: a node's whole buffer.
const handoverLimit = 1 << 30

// peerHandler serves the peer endpoints of a pair's node.
func peerHandler(p *pair, secret string, log *zap.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/peer/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var theirs heartbeat
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&theirs); err != nil {
			writeError(w, http.StatusBadRequest, "heartbeat: "+err.Error())
			return
		}
		ours, err := p.onHeartbeat(r.Context(), theirs)
		if err != nil {
			log.Error("refused a heartbeat from a misconfigured peer", zap.Error(err))
			writeError(w, http.StatusConflict, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, ours)
	})
	mux.HandleFunc("GET /v1/peer/changes", func(w http.ResponseWriter, r *http.Request) { serveChanges(p, w, r) })
	mux.HandleFunc("POST /v1/peer/applied", func(w http.ResponseWriter, r *http.Request) { serveApplied(p, w, r) })
	mux.HandleFunc("GET /v1/peer/snapshot", func(w http.ResponseWriter, r *http.Request) { serveSnapshot(p, w, r) })
	mux.HandleFunc("POST /v1/peer/handover", func(w http.ResponseWriter, r *http.Request) {
		if !requireActive(p, w) {
			return
		}
		var h sitestore.Handover
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, handoverLimit)).Decode(&h); err != nil {
			writeError(w, http.StatusBadRequest, "hand-over: "+err.Error())
			return
		}
		adopted, err := p.store.Adopt(r.Context(), h)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		log.Info("adopted operations handed over by the peer", zap.Int("operations", adopted), zap.Int("offered", len(h.Messages)))
		writeJSON(w, http.StatusOK, map[string]int{"adopted": adopted})
	})
	return requireSecret(mux, secret)
}

// requireSecret refuses a request without the pair's secret.
func requireSecret(next http.Handler, secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(peerSecretHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
			writeError(w, http.StatusUnauthorized, "peer requests need the pair's secret (site.peer.secret_env) in "+peerSecretHeader)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func requireActive(p *pair, w http.ResponseWriter) bool {
	if role, _ := p.current(); role != pairActive {
		writeError(w, http.StatusServiceUnavailable, "this node is not the active node of the pair")
		return false
	}
	return true
}

func serveChanges(p *pair, w http.ResponseWriter, r *http.Request) {
	if !requireActive(p, w) {
		return
	}
	q := r.URL.Query()
	after, err := queryPosition(q.Get("after"), q.Get("checksum"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "changes: want after=<change number>&checksum=<hex>: "+err.Error())
		return
	}
	applied := after
	if q.Has("applied") {
		if applied, err = queryPosition(q.Get("applied"), q.Get("applied_checksum")); err != nil || applied.Number > after.Number {
			writeError(w, http.StatusBadRequest, "changes: want applied=<change number, at most after>&applied_checksum=<hex>")
			return
		}
	}
	wait, err := time.ParseDuration(q.Get("wait"))
	if err != nil || wait < 0 || wait > 10*time.Second {
		wait = time.Second
	}
	if err := p.feed.acknowledge(applied); errors.Is(err, sitestore.ErrResync) {
		writeError(w, http.StatusConflict, "resync: "+err.Error())
		return
	}
	changes, err := p.feed.after(r.Context(), after, wait, maxChangesPerAnswer)
	if errors.Is(err, sitestore.ErrResync) {
		writeError(w, http.StatusConflict, "resync: "+err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	last := after.Number
	if len(changes) > 0 {
		last = changes[len(changes)-1].Number
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Outpost-Behind", strconv.FormatInt(max(p.feed.headNumber()-last, 0), 10))
	if p.opts.Sync {
		w.Header().Set(peerAwaitsHeader, "1")
	}
	body := sitestore.MarshalChanges(changes)
	w.Header().Set("Content-Length", strconv.Itoa(len(body))) // the standby reads it into one buffer of that size
	_, _ = w.Write(body)
}

// peerAwaitsHeader on an answer with changes says the active node's writes
// wait for the standby (sync mode): the standby acknowledges each apply at
// once rather than with its next pull.
const peerAwaitsHeader = "X-Outpost-Awaits-Ack"

func serveApplied(p *pair, w http.ResponseWriter, r *http.Request) {
	if !requireActive(p, w) {
		return
	}
	pos, err := queryPosition(r.URL.Query().Get("number"), r.URL.Query().Get("checksum"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "applied: want number=<change number>&checksum=<hex>: "+err.Error())
		return
	}
	if err := p.feed.acknowledge(pos); err != nil {
		writeError(w, http.StatusConflict, "resync: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// queryPosition reads a change number and its checksum from a query.
func queryPosition(number, checksum string) (sitestore.Position, error) {
	n, err := strconv.ParseInt(number, 10, 64)
	if err != nil || n < 0 {
		return sitestore.Position{}, fmt.Errorf("change number %q", number)
	}
	sum, err := hex.DecodeString(checksum)
	if err != nil {
		return sitestore.Position{}, fmt.Errorf("checksum %q: %w", checksum, err)
	}
	return sitestore.Position{Number: n, Checksum: sum}, nil
}

func serveSnapshot(p *pair, w http.ResponseWriter, r *http.Request) {
	if !requireActive(p, w) {
		return
	}
	dir, err := os.MkdirTemp("", "outpost-snapshot-")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "site.db")
	if _, err := p.store.Snapshot(r.Context(), path); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	f, err := os.Open(path)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/vnd.sqlite3")
	_, _ = io.Copy(w, f)
}

// peerClient calls the other node of the pair.
type peerClient struct {
	base   string
	secret string
	http   *http.Client
}

func newPeerClient(address, secret, caFile string) (*peerClient, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("site.peer.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("site.peer.ca_file %s: no PEM certificate in it", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &peerClient{base: strings.TrimRight(address, "/"), secret: secret, http: &http.Client{Transport: transport}}, nil
}

func (c *peerClient) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(peerSecretHeader, c.secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// answerError is the error of a non-2xx answer, with its body.
func answerError(resp *http.Response, what string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("%s: the peer answered %s: %s", what, resp.Status, strings.TrimSpace(string(body)))
}

func (c *peerClient) heartbeat(ctx context.Context, ours heartbeat) (heartbeat, error) {
	body, err := json.Marshal(ours)
	if err != nil {
		return heartbeat{}, err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/peer/heartbeat", bytes.NewReader(body))
	if err != nil {
		return heartbeat{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return heartbeat{}, answerError(resp, "heartbeat")
	}
	var theirs heartbeat
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&theirs); err != nil {
		return heartbeat{}, fmt.Errorf("heartbeat answer: %w", err)
	}
	return theirs, nil
}

// pulled is one answer to a standby's pull.
type pulled struct {
	changes []sitestore.Change
	// behind is how many more changes the active node has.
	behind int64
	// awaited: the active node's writes wait for the standby's acknowledgement.
	awaited bool
}

// changes asks for the changes after received, waiting up to wait for
// one, and acknowledges applied. sitestore.ErrResync when either is not on
// the active node's stream.
func (c *peerClient) changes(ctx context.Context, received, applied sitestore.Position, wait time.Duration) (pulled, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	path := fmt.Sprintf("/v1/peer/changes?after=%d&checksum=%s&applied=%d&applied_checksum=%s&wait=%s", received.Number,
		hex.EncodeToString(received.Checksum), applied.Number, hex.EncodeToString(applied.Checksum), wait)
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return pulled{}, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		return pulled{}, sitestore.ErrResync
	default:
		return pulled{}, answerError(resp, "changes")
	}
	data, err := readBody(resp)
	if err != nil {
		return pulled{}, fmt.Errorf("changes: %w", err)
	}
	changes, err := sitestore.UnmarshalChanges(data)
	behind, _ := strconv.ParseInt(resp.Header.Get("X-Outpost-Behind"), 10, 64)
	return pulled{changes: changes, behind: behind, awaited: resp.Header.Get(peerAwaitsHeader) != ""}, err
}

// applied acknowledges the changes the standby applied, up to pos.
func (c *peerClient) applied(ctx context.Context, pos sitestore.Position) error {
	path := fmt.Sprintf("/v1/peer/applied?number=%d&checksum=%s", pos.Number, hex.EncodeToString(pos.Checksum))
	resp, err := c.do(ctx, http.MethodPost, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil
	case http.StatusConflict:
		return sitestore.ErrResync
	default:
		return answerError(resp, "applied")
	}
}

// handover gives the active node h and returns how many operations it adopted.
func (c *peerClient) handover(ctx context.Context, h sitestore.Handover) (int, error) {
	body, err := json.Marshal(h)
	if err != nil {
		return 0, err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/peer/handover", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, answerError(resp, "hand-over")
	}
	var out struct{ Adopted int }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("hand-over answer: %w", err)
	}
	return out.Adopted, nil
}

// restoreSnapshot fetches the active node's snapshot and restores store from it.
func (c *peerClient) restoreSnapshot(ctx context.Context, store *sitestore.Store) (sitestore.Position, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/peer/snapshot", nil)
	if err != nil {
		return sitestore.Position{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sitestore.Position{}, answerError(resp, "snapshot")
	}
	dir, err := os.MkdirTemp("", "outpost-resync-")
	if err != nil {
		return sitestore.Position{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "site.db")
	f, err := os.Create(path)
	if err != nil {
		return sitestore.Position{}, err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return sitestore.Position{}, fmt.Errorf("snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return sitestore.Position{}, err
	}
	return store.Restore(ctx, path)
}

// maxPresized bounds the buffer readBody makes before reading: an answer
// of changes is bounded by maxChangesPerAnswer, not by its length header.
const maxPresized = 64 << 20

// readBody reads resp's body into one buffer of its announced length:
// io.ReadAll grows its buffer by copying, which at sync replication's pace
// was an eighth of the bytes a standby allocated.
func readBody(resp *http.Response) ([]byte, error) {
	if resp.ContentLength < 0 || resp.ContentLength > maxPresized {
		return io.ReadAll(resp.Body)
	}
	data := make([]byte, resp.ContentLength)
	_, err := io.ReadFull(resp.Body, data) // net/http refuses a body shorter or longer than announced
	return data, err
}
