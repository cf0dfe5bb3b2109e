package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
)

// Error is one problem in a configuration, located by file, line and path.
type Error struct {
	// File is the configuration's name; may be empty.
	File string
	// Line is the 1-based line of the offending node, or 0 when unknown
	// (a value given by a flag or an environment variable).
	Line int
	// Path locates the value, such as "zones[2].limits[0]".
	Path string
	// Problem says what is wrong.
	Problem string
}

// Error formats e as "file:line: path: problem", omitting what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// maxErrors bounds the problems reported for one file: past it, the rest
// are summarized in one line.
const maxErrors = 20

// errorList collects problems in the order they are found.
type errorList struct {
	file string
	errs []*Error
	// failedPaths holds the path of every problem and each path that
	// contains it ("zones[0]" and "zones" for "zones[0].name").
	failedPaths map[string]bool
}

func (l *errorList) add(line int, path, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Path: path, Problem: fmt.Sprintf(format, args...)})
	if l.failedPaths == nil {
		l.failedPaths = map[string]bool{}
	}
	for p := path; p != "" && !l.failedPaths[p]; {
		l.failedPaths[p] = true
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
}

// failed reports whether a problem was already recorded at path or inside
// it ("zones[0]" covers "zones[0].limits[1]"), so that checks made after
// the walk do not report a second, derived problem for the same value.
func (l *errorList) failed(path string) bool { return l.failedPaths[path] }

// err returns nil, or every problem joined, sorted by line; each is an
// *Error for errors.As.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	// In the order of the file: problems found after the walk (references,
	// bounds) take their place among those found during it.
	slices.SortStableFunc(l.errs, func(a, b *Error) int { return a.Line - b.Line })
	n := min(len(l.errs), maxErrors)
	errs := make([]error, 0, n+1)
	for _, e := range l.errs[:n] {
		errs = append(errs, e)
	}
	if len(l.errs) > n {
		errs = append(errs, fmt.Errorf("%s: %d more problems not shown", l.file, len(l.errs)-n))
	}
	return errors.Join(errs...)
}

// problem turns an error from package sluice into the text of an Error:
// an *sluice.InvalidError's Detail (the input at fault and why, without the
// package's generic prefix), any other error's own text.
func problem(err error) string {
	if ie, ok := errors.AsType[*sluice.InvalidError](err); ok {
		return ie.Detail(true)
	}
	return err.Error()
}
