package sluice

import (
	"errors"
	"fmt"
)

// Errors a caller can branch on with errors.Is. A denial is never an error.
var (
	// ErrInvalid marks bad input: a malformed limit, an empty key, a
	// negative cost, a cost greater than a limit's Rate. Retrying the same
	// call cannot succeed. The HTTP layer answers it with 400.
	ErrInvalid = errors.New("sluice: invalid input")
	// ErrUnavailable marks a store that could not be reached or did not
	// answer in time. The failure policy decides what happens next.
	ErrUnavailable = errors.New("sluice: store unavailable")
	// ErrBadState marks a check that failed on the stored state of one of
	// its keys: the store answered, but what it holds there is not state
	// sluice wrote, such as a key of another type under a Redis store's
	// prefix. It applies to that check alone: the store is healthy and
	// other keys' checks go on, so it does not wrap ErrUnavailable, and
	// failure policies and breakers (package edge) do not count it. The
	// same check fails again until the key expires or is deleted (Reset
	// deletes it).
	ErrBadState = errors.New("sluice: bad stored state")
)

// InvalidError is bad input, said once: which field and why. errors.Is(err,
// ErrInvalid) holds for it, and errors.As finds it through any wrapping, so
// every layer can print Detail (for a client) or Error (for a log) without
// cutting prefixes out of the text.
type InvalidError struct {
	// Where locates Field in a larger input, such as "hit 1" of a check or
	// `limits "1r/s, 0r/m": element 2`; empty when there is nothing larger.
	Where string
	// Field names the input at fault, such as `limit "1r/1500ns"` or
	// "algorithm"; empty when the reason names it ("cost must be >= 0").
	Field string
	// Reason says what is wrong, such as "window must be a whole number of
	// microseconds, got 1.5µs".
	Reason string
}

// invalid returns an *InvalidError of field with the formatted reason.
func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Error returns "sluice: invalid input: ", Where, Field and Reason joined
// by ": ", leaving out the empty ones.
func (e *InvalidError) Error() string {
	return ErrInvalid.Error() + ": " + e.Detail(true)
}

// Detail returns Field and Reason joined by ": " (Field left out when
// empty), with Where before them when where is true: the error without the
// package's prefix, for a client that sent the input. A client of a layer
// that built the larger input itself (an HTTP zone's hits) is given
// Detail(false).
func (e *InvalidError) Detail(where bool) string {
	s := e.Reason
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	if where && e.Where != "" {
		s = e.Where + ": " + s
	}
	return s
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// at returns err with where set, when err is an *InvalidError without one;
// any other error is returned as is.
func at(where string, err error) error {
	var ie *InvalidError
	if errors.As(err, &ie) && ie.Where == "" {
		c := *ie
		c.Where = where
		return &c
	}
	return err
}
