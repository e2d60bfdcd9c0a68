package sitedaemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/site"
)

// API is the site daemon's local HTTP API:
//
//	POST /v1/notifications       {"list","subject","body","instance","script"} → 202 {"id","status"}
//	GET  /v1/notifications/{id}  → 200 status, 404 unknown, 503 central unreachable
//	POST /v1/calls               {"system","method","params","instance","script"}
//	POST /v1/writes              {"connection","sql","args","instance","script"}
//	                             → 200 Delivered, 202 Pending (queued for retry), 502 Failed (the target refused it);
//	                             with "Prefer: respond-async", 202 Pending with the id before the attempt
//	GET  /v1/operations/{id}     → 200 tracking row (and, until delivered or discarded, the request,
//	                             secret params redacted), 404 unknown
//
// The POSTs answer 503 {"error","holder"} while another daemon with this
// site id holds the site (siteHold); the GETs answer from this daemon's store.
type API struct {
	client *site.Client
	log    *zap.Logger
	redact []string
}

// APIOptions configures the site API.
type APIOptions struct {
	// Hosts are names, beside localhost and IP addresses, that requests may
	// carry in their Host header (site.api_hosts and the host of
	// site.listen). Default none.
	Hosts []string
	// Tokens are the bearer tokens the API accepts (holder → token, from
	// site.api_tokens); none: no token is asked for.
	Tokens map[string]string
	// RedactFields are call params GET /v1/operations/{id} never shows
	// beside redact.DefaultFields (site.redact_fields).
	RedactFields []string
	// Traces, when set, receives a span per request that continues the
	// caller's traceparent header, and each buffered notification keeps
	// its span for the hand-off (telemetry.otlp_endpoint).
	Traces trace.TracerProvider
}

// NewAPI returns the HTTP handler of the site API. It refuses requests a
// web page could send (guardAPI).
func NewAPI(c *site.Client, opts APIOptions, log *zap.Logger) http.Handler {
	a := &API{client: c, log: log, redact: opts.RedactFields}
	mux := http.NewServeMux()
	tracer := tracerOf(opts.Traces)
	for pattern, h := range map[string]http.HandlerFunc{
		"POST /v1/notifications":     a.postNotification,
		"GET /v1/notifications/{id}": a.getNotification,
		"POST /v1/calls":             a.postCall,
		"POST /v1/writes":            a.postWrite,
		"GET /v1/operations/{id}":    a.getOperation,
	} {
		mux.HandleFunc(pattern, traced(tracer, pattern, h))
	}
	return guardAPI(mux, opts.Hosts, opts.Tokens)
}

// requestOverhead is room for the JSON around a body of the maximum size.
const requestOverhead = 8 << 10

// jsonEscapeFactor allows for a body sent as JSON escapes (\u00e9 is six
// bytes for one character): such a body under site.max_body_bytes must get
// through to the size check, which names the field and the limit.
const jsonEscapeFactor = 6

// Accepted is the answer to a buffered operation.
type Accepted struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (a *API) postNotification(w http.ResponseWriter, r *http.Request) {
	var n site.Notification
	limit := request{bytes: jsonEscapeFactor*a.client.MaxBodyBytes() + requestOverhead,
		note:  fmt.Sprintf("a notification body is limited to %d bytes by site.max_body_bytes", a.client.MaxBodyBytes()),
		known: "list, subject, body, instance, script, idempotencyKey"}
	if err := decodeStrict(w, r, limit, &n); err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	if err := takeIdempotencyKey(r, &n.IdempotencyKey); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	n.SubmittedBy = tokenHolder(r)
	n.TraceParent = traceParentOf(r.Context())
	id, err := a.client.Send(r.Context(), n)
	var invalid *site.InvalidError
	var unavailable *site.UnavailableError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.As(err, &unavailable):
		writeUnavailable(w, unavailable)
	case errors.Is(err, site.ErrIdempotencyConflict):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		a.log.Error("buffer notification", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "the site could not store the notification: "+err.Error())
	default:
		writeJSON(w, http.StatusAccepted, Accepted{ID: id, Status: string(contract.StatusForwarding)})
	}
}

// maxCallRequestBytes bounds a call or write request.
const maxCallRequestBytes = 1 << 20

var (
	callRequest  = request{bytes: maxCallRequestBytes, note: "a call request is limited to 1 MiB", known: "system, method, params, instance, script, idempotencyKey"}
	writeRequest = request{bytes: maxCallRequestBytes, note: "a write request is limited to 1 MiB", known: "connection, sql, args, instance, script, idempotencyKey"}
)

func (a *API) postCall(w http.ResponseWriter, r *http.Request) {
	var req site.CallRequest
	if !decodeCached(w, r, callRequest, &req, &req.IdempotencyKey) {
		return
	}
	req.SubmittedBy, req.TraceParent = tokenHolder(r), traceParentOf(r.Context())
	id, attempt, err := a.client.BeginCall(r.Context(), req)
	a.runCachedCall(w, r, id, attempt, err)
}

func (a *API) postWrite(w http.ResponseWriter, r *http.Request) {
	var req site.WriteRequest
	if !decodeCached(w, r, writeRequest, &req, &req.IdempotencyKey) {
		return
	}
	req.SubmittedBy, req.TraceParent = tokenHolder(r), traceParentOf(r.Context())
	id, attempt, err := a.client.BeginWrite(r.Context(), req)
	a.runCachedCall(w, r, id, attempt, err)
}

// decodeCached reads a call or write request into req and the
// Idempotency-Key header into key; false when it answered the error.
func decodeCached(w http.ResponseWriter, r *http.Request, spec request, req any, key *string) bool {
	if err := decodeStrict(w, r, spec, req); err != nil {
		writeError(w, statusOf(err), err.Error())
		return false
	}
	if err := takeIdempotencyKey(r, key); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// runCachedCall makes a tracked call's immediate attempt (err is the
// tracking's failure). With "Prefer: respond-async" it answers 202 with the
// id as soon as the call is tracked and makes the attempt after: a caller
// that loses the connection mid-attempt still knows what to look up (GET
// /v1/operations/{id}).
func (a *API) runCachedCall(w http.ResponseWriter, r *http.Request, id string, attempt site.Attempt, err error) {
	if err != nil {
		a.writeCallResult(w, site.CallResult{}, err)
		return
	}
	if !prefersAsync(r) {
		res, err := attempt(r.Context())
		a.writeCallResult(w, res, err)
		return
	}
	go func() {
		// The outcome goes to the tracking row; a refusal by the target is
		// an outcome, not an error of the site.
		_, err := attempt(context.WithoutCancel(r.Context()))
		var target *site.TargetError
		if err != nil && !errors.As(err, &target) {
			a.log.Error("cached call", zap.String("operation", id), zap.Error(err))
		}
	}()
	w.Header().Set("Preference-Applied", "respond-async")
	w.Header().Set("Location", "/v1/operations/"+id)
	writeJSON(w, http.StatusAccepted, site.CallResult{ID: id, Status: contract.StatusPending})
}

// takeIdempotencyKey puts the request's Idempotency-Key header into the
// body's key; a request giving both must give the same one.
func takeIdempotencyKey(r *http.Request, bodyKey *string) error {
	header := r.Header.Get("Idempotency-Key")
	switch {
	case header == "":
		return nil
	case *bodyKey != "" && *bodyKey != header:
		return fmt.Errorf("the Idempotency-Key header %q and the body's idempotencyKey %q differ: give one, or the same in both", header, *bodyKey)
	}
	*bodyKey = header
	return nil
}

// prefersAsync reports a "Prefer: respond-async" request (RFC 7240).
func prefersAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(pref), "respond-async") {
				return true
			}
		}
	}
	return false
}

// writeCallResult answers 200 Delivered, 202 Pending, 502 Failed (the
// target's refusal, with its status and message), 400 for bad input.
func (a *API) writeCallResult(w http.ResponseWriter, res site.CallResult, err error) {
	var invalid *site.InvalidError
	var target *site.TargetError
	var unavailable *site.UnavailableError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.As(err, &unavailable):
		writeUnavailable(w, unavailable)
	case errors.As(err, &target):
		writeJSON(w, http.StatusBadGateway, res)
	case errors.Is(err, site.ErrIdempotencyConflict):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		a.log.Error("cached call", zap.Error(err))
		writeError(w, http.StatusInternalServerError, err.Error())
	case res.Status == contract.StatusPending:
		writeJSON(w, http.StatusAccepted, res)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

func (a *API) getOperation(w http.ResponseWriter, r *http.Request) {
	row, err := a.client.Tracking().Details(r.Context(), r.PathValue("id"), a.redact)
	var invalid *site.InvalidError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, site.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, row)
	}
}

func (a *API) getNotification(w http.ResponseWriter, r *http.Request) {
	state, err := a.client.Status(r.Context(), r.PathValue("id"))
	var invalid *site.InvalidError
	var unreachable *site.UnreachableError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, site.ErrNotFound):
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

// request describes what an endpoint accepts, for its error messages.
type request struct {
	bytes int    // the largest request read
	note  string // why, for the 413 message
	known string // the fields, for the unknown-field message
}

// decodeStrict reads one JSON object into v: unknown fields, trailing data,
// oversize requests, and what decoding would quietly change (checkJSONText)
// are errors that say what was wrong.
func decodeStrict(w http.ResponseWriter, r *http.Request, req request, v any) error {
	var body bytes.Buffer
	dec := json.NewDecoder(io.TeeReader(http.MaxBytesReader(w, r.Body, int64(req.bytes)), &body))
	dec.DisallowUnknownFields()
	dec.UseNumber() // integer arguments stay integers
	if err := dec.Decode(v); err != nil {
		return describeDecodeError(err, req)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return &requestError{http.StatusBadRequest, "malformed JSON: unexpected data after the object"}
	}
	if err := checkJSONText(body.Bytes()); err != nil {
		return err
	}
	return checkFieldNames(body.Bytes(), req.known)
}

// checkFieldNames refuses a field named like a known one but for case
// ("List"): encoding/json would quietly take it for "list".
func checkFieldNames(body []byte, known string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return &requestError{http.StatusBadRequest, "malformed JSON: " + err.Error()}
	}
	names := strings.Split(known, ", ")
	for name := range fields {
		if !slices.Contains(names, name) {
			return &requestError{http.StatusBadRequest, fmt.Sprintf("unknown field %q (known: %s; names are case-sensitive)", name, known)}
		}
	}
	return nil
}

func describeDecodeError(err error, req request) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request is over %d bytes (%s)", req.bytes, req.note)}
	case errors.Is(err, io.EOF):
		return &requestError{http.StatusBadRequest, "malformed JSON: empty request body"}
	case errors.As(err, &syntax):
		return &requestError{http.StatusBadRequest, fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err)}
	case errors.As(err, &typ) && typ.Field == "":
		return &requestError{http.StatusBadRequest, fmt.Sprintf("request body must be a JSON object, got %s", typ.Value)}
	case errors.As(err, &typ):
		return &requestError{http.StatusBadRequest, fmt.Sprintf("field %q must be %s, got %s", typ.Field, jsonKind(typ.Type), typ.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return &requestError{http.StatusBadRequest, strings.TrimPrefix(err.Error(), "json: ") + " (known: " + req.known + ")"}
	default:
		return &requestError{http.StatusBadRequest, "malformed JSON: " + err.Error()}
	}
}

// jsonKind names a Go type as the JSON a client must send for it.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is every error answer of the API.
type ErrorBody struct {
	Error string `json:"error"`
	// Holder, on a 503 from a daemon that waits, names the daemon that
	// holds the site.
	Holder string `json:"holder,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg})
}

// writeUnavailable answers 503 for an operation refused because another
// daemon holds the site.
func writeUnavailable(w http.ResponseWriter, err *site.UnavailableError) {
	writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: err.Error(), Holder: err.Holder})
}
