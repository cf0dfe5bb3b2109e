package httplimit

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/httpfields"
)

// QuotaExceeded is the problem type of a denial, defined by the IETF
// RateLimit fields draft. Its extension member "violated-policies" lists
// the names of the policies whose quota is used up.
const QuotaExceeded = httpfields.QuotaExceeded

// A Problem is an RFC 9457 problem details object, written as
// application/problem+json: Type (a URI; empty means "about:blank"),
// Title, Status, Detail (optional) and ViolatedPolicies (the
// quota-exceeded extension member, omitted when empty). An Options.OnError
// can answer with one through WriteProblem.
type Problem = httpfields.Problem

// WriteProblem writes p as the response: the status, Content-Type
// application/problem+json, Cache-Control no-store, and the JSON body.
// Fields already set on w.Header(), such as Retry-After, are kept.
func WriteProblem(w http.ResponseWriter, p *Problem) {
	httpfields.WriteProblem(w, p)
}
