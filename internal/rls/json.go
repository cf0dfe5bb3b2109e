package rls

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// ServeJSON serves envoyproxy/ratelimit's POST /json: a RateLimitRequest
// in protobuf's JSON mapping (field names in either case) answered with
// the RateLimitResponse in the same mapping: 200 when OK, 429 when over
// the limit. response_headers_to_add stay in the body, as there: they are
// for Envoy to add to its response, not this one's. A malformed request gets 400, a body over the listener's
// limit 413, a store that could not decide 503, each with a plain-text
// reason. The server puts it behind the rules of its other POST
// endpoints (Content-Type: application/json, admin settings).
func (s *Service) ServeJSON(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "/json accepts POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	var req pb.RateLimitRequest
	if err == nil {
		err = protojson.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, "invalid RateLimitRequest JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		code := http.StatusServiceUnavailable
		if status.Code(err) == codes.InvalidArgument {
			code = http.StatusBadRequest
		}
		http.Error(w, status.Convert(err).Message(), code)
		return
	}
	out, err := protojson.Marshal(resp)
	if err == nil {
		// protojson varies its spacing on purpose; answer the same bytes
		// for the same response.
		var b bytes.Buffer
		if err = json.Compact(&b, out); err == nil {
			out = b.Bytes()
		}
	}
	if err != nil {
		http.Error(w, "encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}
