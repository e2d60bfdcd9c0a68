package site

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"
)

// API is the site daemon's local HTTP API:
//
//	POST /v1/notifications       {"list","subject","body","instance","script"} → 202 {"id","status"}
//	GET  /v1/notifications/{id}  → 200 status, 404 unknown, 503 central unreachable
type API struct {
	client *Client
	log    *zap.Logger
}

// NewAPI returns the HTTP handler of the site API.
func NewAPI(c *Client, log *zap.Logger) http.Handler {
	a := &API{client: c, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/notifications", a.postNotification)
	mux.HandleFunc("GET /v1/notifications/{id}", a.getNotification)
	return mux
}

// requestOverhead is room for the JSON around a body of the maximum size.
const requestOverhead = 8 << 10

// Accepted is the answer to a buffered operation.
type Accepted struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (a *API) postNotification(w http.ResponseWriter, r *http.Request) {
	var n Notification
	if err := decodeStrict(w, r, a.client.opts.MaxBodyBytes+requestOverhead, &n); err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	id, err := a.client.Send(r.Context(), n)
	var invalid *InvalidError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		a.log.Error("buffer notification", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "the site could not store the notification: "+err.Error())
	default:
		writeJSON(w, http.StatusAccepted, Accepted{ID: id, Status: "Forwarding"})
	}
}

func (a *API) getNotification(w http.ResponseWriter, r *http.Request) {
	state, err := a.client.Status(r.Context(), r.PathValue("id"))
	var invalid *InvalidError
	var unreachable *UnreachableError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.As(err, &unreachable):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, state)
	}
}

type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func statusOf(err error) int {
	var re *requestError
	if errors.As(err, &re) {
		return re.status
	}
	return http.StatusBadRequest
}

// decodeStrict reads one JSON object into v: unknown fields, trailing data and
// oversize requests are errors that say what was wrong.
func decodeStrict(w http.ResponseWriter, r *http.Request, limit int, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, int64(limit)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeDecodeError(err, limit)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return &requestError{http.StatusBadRequest, "malformed JSON: unexpected data after the object"}
	}
	return nil
}

func describeDecodeError(err error, limit int) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request is over %d bytes: body is limited by site.max_body_bytes", limit)}
	case errors.Is(err, io.EOF):
		return &requestError{http.StatusBadRequest, "malformed JSON: empty request body"}
	case errors.As(err, &syntax):
		return &requestError{http.StatusBadRequest, fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err)}
	case errors.As(err, &typ):
		return &requestError{http.StatusBadRequest, fmt.Sprintf("field %q must be a %s, got %s", typ.Field, typ.Type, typ.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return &requestError{http.StatusBadRequest, strings.TrimPrefix(err.Error(), "json: ") + " (known: list, subject, body, instance, script)"}
	default:
		return &requestError{http.StatusBadRequest, "malformed JSON: " + err.Error()}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is every error answer of the API.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg})
}
