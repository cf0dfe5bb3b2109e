package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// publicDetail is err's text for an HTTP caller. Invalid input is the
// sluice.InvalidError's Detail without its Where (a hit index names
// nothing the caller sent), such as `cost 100 is greater than the rate of
// limit "3r/m" and could never pass`. Any other error (a missing key) is
// its text without the Go package and operation names that errors carry
// for logs ("memstore: check: ", "httplimit: ").
func publicDetail(err error) string {
	if ie, ok := errors.AsType[*sluice.InvalidError](err); ok {
		return ie.Detail(false)
	}
	parts := strings.Split(err.Error(), ": ")
	kept := parts[:0]
	for _, p := range parts {
		if !internalName(p) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ": ")
}

// internalName reports whether one ": "-separated part of an error text
// is a package or operation name, or a hit index.
func internalName(part string) bool {
	switch part {
	case "sluice", "memstore", "redisstore", "edge", "httplimit", "server", "check", "reset":
		return true
	}
	n, ok := strings.CutPrefix(part, "hit ")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

// unknownZone is the answer to a zone name that is not configured. It does
// not list the configured zones: a caller learns nothing of zones it does
// not already know the names of.
func unknownZone(name string) *apiProblem {
	return &apiProblem{http.StatusNotFound, "Unknown zone", fmt.Sprintf("no zone named %q is configured", truncate(name, 64))}
}
