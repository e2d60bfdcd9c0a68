package sitedaemon

import (
	"context"
	"crypto/subtle"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/outpost-dev/outpost/internal/httpserve"
)

// The site API runs operations a web page must never be able to run: any
// page open in a browser on the site host can send requests to 127.0.0.1,
// and a DNS-rebinding page can even read the answers. guardAPI lets through
// only what a script or tool sends:
//   - a Host header that names this API (httpserve.HostAllowed): localhost,
//     an IP address, the host of site.listen or one of site.api_hosts (a
//     rebound DNS name is none of those);
//   - no cross-site browser request (Sec-Fetch-Site, Origin against Host),
//     the checks of net/http's CrossOriginProtection;
//   - a POST body declared application/json, which no HTML form can send
//     and no page can send across sites without a CORS preflight this API
//     never answers.
func guardAPI(next http.Handler, hosts []string, tokens map[string]string) http.Handler {
	crossOrigin := http.NewCrossOriginProtection()
	crossOrigin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-site request refused: the site API serves scripts and tools, "+
			"not web pages (the request's Origin or Sec-Fetch-Site names another site)")
	}))
	checked := crossOrigin.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !isJSON(r.Header.Get("Content-Type")) {
			writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf(
				"Content-Type %q refused: send the JSON body with Content-Type: application/json", r.Header.Get("Content-Type")))
			return
		}
		next.ServeHTTP(w, r)
	}))
	authorized := requireToken(checked, tokens)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !httpserve.HostAllowed(r.Host, hosts) {
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf(
				"host %q is not a name of this site API: use localhost or an IP address, or add the name to site.api_hosts", r.Host))
			return
		}
		authorized.ServeHTTP(w, r)
	})
}

// requireToken lets through requests with "Authorization: Bearer <token>"
// for one of tokens (holder → token), compared in constant time, with the
// token's holder in their context (tokenHolder); others get 401 and a
// WWW-Authenticate challenge. No tokens: everything passes (a loopback-only
// API; configuration refuses a wider listen without one).
func requireToken(next http.Handler, tokens map[string]string) http.Handler {
	if len(tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if holder, known := holderOf(strings.TrimSpace(given), tokens); ok && known {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), holderKey{}, holder)))
			return
		}
		challenge, msg := `Bearer realm="outpost-site"`, "a token is required: send Authorization: Bearer <token> (one of site.api_tokens)"
		if ok {
			challenge, msg = challenge+`, error="invalid_token"`, "the token is not one of site.api_tokens"
		}
		w.Header().Set("WWW-Authenticate", challenge)
		writeError(w, http.StatusUnauthorized, msg)
	})
}

// holderOf is the holder of token given, compared with every token, each
// in constant time, so the answer's timing tells nothing of how much of a
// token matched or which one did.
func holderOf(given string, tokens map[string]string) (string, bool) {
	holder, found := "", 0
	for name, t := range tokens {
		match := subtle.ConstantTimeCompare([]byte(given), []byte(t))
		if match == 1 {
			holder = name
		}
		found |= match
	}
	return holder, found == 1
}

// holderKey keys the token's holder in a request's context.
type holderKey struct{}

// tokenHolder is the holder of the token r came with; "" when the API asks
// for none.
func tokenHolder(r *http.Request) string {
	holder, _ := r.Context().Value(holderKey{}).(string)
	return holder
}

// isJSON reports a media type of application/json, parameters aside.
func isJSON(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}
