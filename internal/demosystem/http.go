package demosystem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	apiPrefix = "/api"
	// maxBody bounds a request body so a runaway script cannot exhaust the dev stack's memory.
	maxBody = 1 << 20
	// pageRequests is how many requests the page lists.
	pageRequests = 50
)

func (s *System) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(apiPrefix+"/", s.serveAPI)
	mux.HandleFunc("POST /control/fail", s.serveFail)
	mux.HandleFunc("POST /control/recover", s.serveRecover)
	mux.HandleFunc("GET /requests", s.serveRequests)
	mux.HandleFunc("GET /{$}", s.servePage)
	return mux
}

// apiReply is a successful API answer.
type apiReply struct {
	OK       bool            `json:"ok"`
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Received json.RawMessage `json:"received"`
	ID       int             `json:"id"`
}

func (s *System) serveAPI(w http.ResponseWriter, r *http.Request) {
	req := Request{At: time.Now(), Method: r.Method, Path: strings.TrimPrefix(r.URL.Path, apiPrefix),
		Query: r.URL.RawQuery, Header: r.Header.Clone()}
	body, refused := readJSON(w, r)
	req.Body = body
	req, a := s.admit(req, refused)
	if a.status != http.StatusOK {
		writeJSON(w, a.status, map[string]string{"error": a.reason})
		return
	}
	writeJSON(w, http.StatusOK, apiReply{OK: true, Method: req.Method, Path: req.Path, Received: req.Body, ID: req.ID})
}

// readJSON reads the body, nil when empty. A body that is too large or not
// JSON is refused the way a real system would: the caller's mistake, a 4xx.
func readJSON(w http.ResponseWriter, r *http.Request) (json.RawMessage, answer) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, answer{http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", maxBody)}
	case err != nil:
		return nil, answer{http.StatusBadRequest, "read body: " + err.Error()}
	case len(bytes.TrimSpace(raw)) == 0:
		return nil, answer{}
	case !json.Valid(raw):
		return nil, answer{http.StatusBadRequest, "body is not JSON"}
	}
	return raw, answer{}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client has gone; nothing to tell it
}

// serveFail is FailNext for curl: n defaults to -1 (until recover), status to 503.
func (s *System) serveFail(w http.ResponseWriter, r *http.Request) {
	n, err := intParam(r, "n", -1)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	status, err := intParam(r, "status", http.StatusServiceUnavailable)
	if err == nil && !isErrorStatus(status) {
		err = fmt.Errorf("status: %d is not a 4xx or 5xx status", status)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.FailNext(n, status)
	fmt.Fprintf(w, "failure mode: %s\n", s.mode())
}

// intParam reads an integer from the query or a form body, def when absent.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.FormValue(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", name, v)
	}
	return n, nil
}

func (s *System) serveRecover(w http.ResponseWriter, _ *http.Request) {
	s.Recover()
	fmt.Fprintf(w, "failure mode: %s\n", s.mode())
}

func (s *System) serveRequests(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.Requests()) // the client has gone; nothing to tell it
}
