package rls

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/keyname"
)

// Rules is a validated set of domains, read by LoadDir or Parse. It is
// immutable and safe for concurrent use.
type Rules struct {
	// Dir is the directory the rules were read from; empty for Parse.
	Dir     string
	domains map[string]*Domain
	// stamp is the DirStamp of Dir taken before its files were read.
	stamp string
}

// Stamp returns the DirStamp of the directory taken before the rules were
// read from it; empty for Parse.
func (r *Rules) Stamp() string { return r.stamp }

// Domain is one domain's descriptor tree and its sluice settings.
type Domain struct {
	// Name is the file's domain.
	Name string
	// File is the file that defines the domain.
	File string
	// Algorithm computes every limit of the domain: the file's sluice
	// field "algorithm". Default: sluice.SlidingWindow.
	Algorithm sluice.Algorithm
	// Failure is what the domain decides when the store cannot be
	// reached: the file's sluice field "failure". Default: open.
	Failure config.FailurePolicy
	root    level
}

// Domain returns the domain named name, or nil.
func (r *Rules) Domain(name string) *Domain {
	if r == nil {
		return nil
	}
	return r.domains[name]
}

// Domains returns the number of domains.
func (r *Rules) Domains() int {
	if r == nil {
		return 0
	}
	return len(r.domains)
}

// FailsClosed reports whether some domain's failure policy is closed:
// then its requests are denied while the store cannot be reached.
func (r *Rules) FailsClosed() bool {
	if r == nil {
		return false
	}
	for _, d := range r.domains {
		if d.Failure == config.FailClosed {
			return true
		}
	}
	return false
}

// level is one list of descriptors: the entries one request tuple is
// matched against.
type level struct {
	// exact maps "key_value" and, for descriptors without a value, "key"
	// to the descriptor, as envoyproxy/ratelimit's composite keys do.
	exact map[string]*rule
	// wildcards are the descriptors whose value has a '*', in file
	// order; the first that matches wins.
	wildcards []*rule
}

// rule is one descriptor of a file.
type rule struct {
	key, value string
	// parts are a wildcard's value split at each '*', each of which
	// matches any run of bytes, the empty one included.
	parts    []string
	wildcard bool
	// shareThreshold makes every value the wildcard matches count on one
	// counter (the wildcard's), instead of one counter per value.
	shareThreshold bool
	detailedMetric bool
	// valueToMetric puts the request's value in the metric path where the
	// descriptor has no value of its own (a wildcard: the whole value).
	valueToMetric bool
	limit         *limit
	children      level
	// metric is the descriptor's path for metrics, such as
	// "message_type_marketing.to_number".
	metric string
}

// limit is a descriptor's rate_limit.
type limit struct {
	// sl is the sluice limit; its Rate is zero for requests_per_unit: 0,
	// which denies every request without asking the store.
	sl        sluice.Limit
	unit      string
	perUnit   uint32
	unlimited bool
	name      string
	replaces  []string
	// current is the limit as responses report it, built once: responses
	// share it, and gRPC only reads it.
	current *pb.RateLimitResponse_RateLimit
}

// units are the rate_limit units envoyproxy/ratelimit accepts: its
// README lists second to day, its protos and code week, month and year.
var units = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    day,
	// Fixed lengths, as envoyproxy/ratelimit's code reads them
	// (utils.UnitToDivider), not calendar weeks, months or years.
	"week":  7 * day,
	"month": 30 * day,
	"year":  365 * day,
}

const day = 24 * time.Hour

// unitNames lists the units for messages.
const unitNames = "second, minute, hour, day, week, month or year"

// match is the rule a request descriptor selects, and the key of its
// counter.
type match struct {
	rule *rule
	// key identifies the counter: the entries' keys and values (for a
	// share_threshold wildcard, the wildcard in place of the value).
	key string
	// metric is the rule's metric path, with the digests of the request's
	// values where detailed_metric or value_to_metric asks for them.
	metric string
	// detailed is whether metric holds a request value's digest: such
	// labels are bounded by MaxMetricValues.
	detailed bool
}

// match finds the limit for a descriptor's entries the way
// envoyproxy/ratelimit does: at each level the exact key_value first, then
// the wildcards in file order, then the key alone; the limit applies only
// if the last entry lands on a descriptor that has one (a request with
// more or fewer entries than the configured depth matches nothing).
func (d *Domain) match(entries []entry) (match, bool) {
	lv := &d.root
	var key, metric strings.Builder
	detailed := false
	for i, e := range entries {
		r := lv.exact[e.key+"_"+e.value]
		if r == nil {
			for _, w := range lv.wildcards {
				if w.key == e.key && wildcardMatch(w.parts, e.value) {
					r = w
					break
				}
			}
		}
		if r == nil {
			r = lv.exact[e.key]
		}
		if r == nil {
			return match{}, false
		}
		value := e.value
		if r.wildcard && r.shareThreshold {
			value = r.value
		}
		appendEntry(&key, e.key, value)
		if metric.Len() > 0 {
			metric.WriteByte('.')
		}
		metric.WriteString(e.key)
		if v, runtime := r.metricValue(e.value); runtime {
			metric.WriteByte('_')
			metric.WriteString(keyname.Of(v))
			detailed = true
		} else if v != "" {
			metric.WriteByte('_')
			metric.WriteString(v)
		}
		if i == len(entries)-1 {
			if r.limit == nil {
				return match{}, false
			}
			return match{rule: r, key: key.String(), metric: metric.String(), detailed: detailed}, true
		}
		if len(r.children.exact) == 0 && len(r.children.wildcards) == 0 {
			return match{}, false
		}
		lv = &r.children
	}
	return match{}, false
}

// wildcardMatch reports whether value matches a wildcard split at its
// '*'s into parts: it starts with the first part, ends with the last and
// holds the others in order between them, without overlap, as
// envoyproxy/ratelimit's main branch matches ("foo*" is a prefix, in
// "/api/*/action" the '*' any run of bytes, the empty one too).
func wildcardMatch(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}

// metricValue is the value part of the rule's metric path for a request
// value, as envoyproxy/ratelimit describes detailed_metric,
// value_to_metric and share_threshold: the runtime value (fromRequest
// true; the caller writes its digest) when either flag asks for it, the
// configured value otherwise; values that share a threshold always show
// the wildcard (such as "api/*"), as its code does.
func (r *rule) metricValue(runtime string) (v string, fromRequest bool) {
	switch {
	case r.shareThreshold, r.value != "" && !r.wildcard:
		// A shared wildcard, or an exact value: the configured one.
		return r.value, false
	case r.detailedMetric, r.valueToMetric:
		return runtime, true
	}
	return r.value, false
}

// entriesKey is the counter key of a descriptor's entries, values as sent.
func entriesKey(entries []entry) string {
	var b strings.Builder
	for _, e := range entries {
		appendEntry(&b, e.key, e.value)
	}
	return b.String()
}

// override builds the limit a request descriptor carries itself
// (RateLimitDescriptor.limit, which Envoy fills from route configuration
// or dynamic metadata). As in envoyproxy/ratelimit it replaces any rule,
// is never in shadow mode and replaces nothing. Its rule label is
// "override:" and the entries' keys, without their values.
func (d *Domain) override(o *rlv3.RateLimitDescriptor_RateLimitOverride, entries []entry) (*limit, error) {
	unit, ok := overrideUnits[o.GetUnit()]
	if !ok {
		return nil, fmt.Errorf("limit override unit %v is not supported (want SECOND, MINUTE, HOUR, DAY, MONTH or YEAR)", o.GetUnit())
	}
	mult := uint32(1)
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 0 {
		mult = m.GetValue()
	}
	var label strings.Builder
	label.WriteString("override:")
	for i, e := range entries {
		if i > 0 {
			label.WriteByte('.')
		}
		label.WriteString(e.key)
	}
	l := &limit{unit: strings.ToLower(unit.name.String()), perUnit: o.GetRequestsPerUnit()}
	rate, window := scale(l.perUnit, unit.d*time.Duration(mult))
	l.sl = sluice.Limit{Name: label.String(), Rate: rate, Window: window, Algorithm: d.Algorithm}
	l.current = &pb.RateLimitResponse_RateLimit{RequestsPerUnit: l.perUnit, Unit: unit.name, UnitMultiplier: o.GetUnitMultiplier()}
	if l.perUnit > 0 {
		if err := l.sl.Validate(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// scale is the sluice rate and window of a limit of perUnit requests per
// window. Above sluice.MaxRate, it is the same average rate, MaxRate per a
// window shortened in proportion (whole microseconds): 2e9 per day is
// enforced as 1e9 per 12 hours, limit_remaining is requests_per_unit less the usage of that window.
func scale(perUnit uint32, window time.Duration) (int64, time.Duration) {
	if perUnit <= sluice.MaxRate {
		return int64(perUnit), window
	}
	w := time.Duration(float64(window) * sluice.MaxRate / float64(perUnit))
	return sluice.MaxRate, max(w.Truncate(time.Microsecond), time.Microsecond)
}

// overrideUnits are the units of a limit override (the protos' type.v3
// RateLimitUnit has no WEEK), with the lengths of the rule files' units.
var overrideUnits = map[typev3.RateLimitUnit]struct {
	d    time.Duration
	name pb.RateLimitResponse_RateLimit_Unit
}{
	typev3.RateLimitUnit_SECOND: {time.Second, pb.RateLimitResponse_RateLimit_SECOND},
	typev3.RateLimitUnit_MINUTE: {time.Minute, pb.RateLimitResponse_RateLimit_MINUTE},
	typev3.RateLimitUnit_HOUR:   {time.Hour, pb.RateLimitResponse_RateLimit_HOUR},
	typev3.RateLimitUnit_DAY:    {day, pb.RateLimitResponse_RateLimit_DAY},
	typev3.RateLimitUnit_MONTH:  {units["month"], pb.RateLimitResponse_RateLimit_MONTH},
	typev3.RateLimitUnit_YEAR:   {units["year"], pb.RateLimitResponse_RateLimit_YEAR},
}

// appendEntry writes one entry to a counter key, length-prefixed so that
// no key or value, whatever its bytes, can make two descriptors share a
// key.
func appendEntry(b *strings.Builder, k, v string) {
	var num [20]byte
	b.Write(strconv.AppendInt(num[:0], int64(len(k)), 10))
	b.WriteByte(':')
	b.WriteString(k)
	b.Write(strconv.AppendInt(num[:0], int64(len(v)), 10))
	b.WriteByte(':')
	b.WriteString(v)
}

// entry is one (key, value) of a request descriptor.
type entry struct{ key, value string }
