package sluice

import (
	"testing"
	"time"
)

// BenchmarkFormatPeriod names the periods of common limits, as every
// Limit.String (labels, messages, RateLimit-Policy fields) does.
func BenchmarkFormatPeriod(b *testing.B) {
	b.ReportAllocs()
	periods := []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour, 90 * time.Minute}
	for i := 0; b.Loop(); i++ {
		_ = formatPeriod(periods[i%len(periods)])
	}
}
