package synchronized

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mutexfx/mutexfx/component"
)

// Problem codes of the JSON problem bodies written by WriteProblem.
const (
	// CodeTimeout: the lock was not acquired in time (409).
	CodeTimeout = "E_MUTEX_TIMEOUT"
	// CodeLockName: the request lacks a field of the lock name, or its
	// values make a name longer than the store takes (400).
	CodeLockName = "E_MUTEX_LOCK_NAME"
	// CodeDriver: the lock store failed (503).
	CodeDriver = "E_MUTEX_DRIVER"
	// CodeClosed: the lock store is closed, the application stopping (503).
	CodeClosed = "E_MUTEX_CLOSED"
	// CodeRequestEnded: the request's ctx ended (its deadline passed) before
	// the lock was acquired (503).
	CodeRequestEnded = "E_MUTEX_REQUEST_ENDED"
	// CodeRoute: the lock name template names a field the route cannot
	// supply, a server bug (500).
	CodeRoute = "E_MUTEX_ROUTE"
	// CodeBody: the request body is not the JSON object expected (400),
	// or a key of the lock name is ambiguous in it (ErrAmbiguousKey).
	CodeBody = "E_MUTEX_BODY"
	// CodeBodyTooLarge: the request body exceeds the limit (413).
	CodeBodyTooLarge = "E_MUTEX_BODY_TOO_LARGE"
	// CodeInternal: any other error (500).
	CodeInternal = "E_MUTEX"
)

// Problem is the RFC 9457 body (application/problem+json) written by
// WriteProblem. It never contains the lock name or the store's error.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// ProblemOf maps an error of the middleware (or of the action wrapper) to
// its problem, testing in this order: ErrRequestEnded → 503, ErrRoute →
// 500, ErrBodyTooLarge → 413, ErrAmbiguousKey → 400, ErrBody → 400,
// component.ErrNameTooLong → 400, ErrLockName → 400, ErrClosed → 503,
// ErrDriver → 503, ErrTimeout → 409, anything else → 500. A store that did
// not answer in time fails with an error wrapping both
// component.ErrTimeout and ErrDriver: it is a store failure (503), not a
// lock held by another request.
func ProblemOf(err error) Problem {
	p := Problem{Type: "about:blank"}
	switch {
	case errors.Is(err, ErrRequestEnded):
		p.Status, p.Code, p.Detail = http.StatusServiceUnavailable, CodeRequestEnded, "the request ended before the lock of this resource was acquired; retry later"
	case errors.Is(err, ErrRoute):
		p.Status, p.Code, p.Detail = http.StatusInternalServerError, CodeRoute, "the server cannot name the lock of this resource"
	case errors.Is(err, ErrBodyTooLarge):
		p.Status, p.Code, p.Detail = http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the request body is too large"
	case errors.Is(err, ErrAmbiguousKey):
		p.Status, p.Code, p.Detail = http.StatusBadRequest, CodeBody, "the request body has a key of the lock name twice, or spelt in another letter case"
	case errors.Is(err, ErrBody):
		p.Status, p.Code, p.Detail = http.StatusBadRequest, CodeBody, "the request body is not a JSON object"
	case errors.Is(err, component.ErrNameTooLong):
		p.Status, p.Code, p.Detail = http.StatusBadRequest, CodeLockName, "a value naming the lock of this resource is too long"
	case errors.Is(err, ErrLockName):
		p.Status, p.Code, p.Detail = http.StatusBadRequest, CodeLockName, "the request lacks a value naming the lock of this resource"
	case errors.Is(err, component.ErrClosed):
		p.Status, p.Code, p.Detail = http.StatusServiceUnavailable, CodeClosed, "the service is stopping"
	case errors.Is(err, component.ErrDriver):
		p.Status, p.Code, p.Detail = http.StatusServiceUnavailable, CodeDriver, "the lock store is unavailable"
	case errors.Is(err, component.ErrTimeout):
		p.Status, p.Code, p.Detail = http.StatusConflict, CodeTimeout, "another request holds the lock of this resource; retry later"
	default:
		p.Status, p.Code, p.Detail = http.StatusInternalServerError, CodeInternal, "the lock could not be acquired"
	}
	p.Title = http.StatusText(p.Status)
	return p
}

// WriteProblem writes ProblemOf(err) as application/problem+json. A 503
// carries Retry-After: 1.
func WriteProblem(w http.ResponseWriter, _ *http.Request, err error) {
	p := ProblemOf(err)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
