package server

import (
	"fmt"
	"net/http"
	"strconv"
)

// ModelVersionHeader names, on every answer of POST /v1/predict, the
// version of the model that tagged it (as the answer's model.version
// does), so that a client or a proxy can tell versions apart during a
// rollout without reading the body.
const ModelVersionHeader = "Nerflow-Model-Version"

// predictRetryAfter is the Retry-After, in seconds, of a prediction
// refused for now: a full queue drains in milliseconds, a model loads in
// seconds; one second spreads the clients' retries without idling the
// tagger for long.
const predictRetryAfter = 1

// unavailable answers 503 with Retry-After: the request may succeed if it
// is sent again later.
func unavailable(w http.ResponseWriter, format string, args ...any) {
	w.Header().Set("Retry-After", strconv.Itoa(predictRetryAfter))
	writeError(w, http.StatusServiceUnavailable, "%s", fmt.Sprintf(format, args...))
}
