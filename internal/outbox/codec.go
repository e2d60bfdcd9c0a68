package outbox

import (
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// codecServer serves the Temporal codec protocol (POST .../encode and
// .../decode) so the Web UI and `temporal --codec-endpoint` show encrypted
// payloads to whoever may see the page. The Web UI calls it from its own
// origin: CORS admits exactly the configured origins, with credentials, so
// the browser sends the page's session cookie ("Include cross-origin
// credentials" in the Web UI's codec settings).
func (h *handler) codecServer() http.Handler {
	if h.opts.Codec == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "payload encryption is off (temporal.encryption_keys is empty): payloads are plain and need no codec server", http.StatusNotFound)
		})
	}
	decode := converter.NewPayloadCodecHTTPHandler(h.opts.Codec)
	authed := h.require(RoleViewer, func(w http.ResponseWriter, r *http.Request, _ identity) { decode.ServeHTTP(w, r) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if !slices.Contains(h.opts.CodecOrigins, strings.TrimRight(origin, "/")) {
				http.Error(w, "codec server: origin "+origin+" is not in central.codec_origins", http.StatusForbidden)
				return
			}
			hd := w.Header()
			hd.Set("Access-Control-Allow-Origin", origin)
			hd.Set("Access-Control-Allow-Credentials", "true")
			hd.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			hd := w.Header()
			hd.Set("Access-Control-Allow-Methods", "POST")
			hd.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization, Caller-Type")
			hd.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		authed.ServeHTTP(w, r)
	})
}
