package sim

import (
	"fmt"
	"strings"
)

// profile is the mix of a generated trace: the share of sources and of
// requests in each special class (the background has the rest), and how
// dense a background source may be.
type profile struct {
	sourceShare  [numClasses]float64
	requestShare [numClasses]float64
	// backgroundMax bounds a background source: its session averages at
	// most this many thresholds per window, and its size at most this many
	// thresholds per window over the whole duration.
	backgroundMax float64
}

// The profiles, by name.
const (
	// Harsh is the default profile: 55% of the requests come from sources
	// built to sit near the threshold or to cross it (2% of the sources
	// each steady under, steady over and bursty, with 20%, 20% and 15% of
	// the requests), and background sources may average up to 50 times
	// the threshold.
	Harsh = "harsh"
	// Cloudflare is a profile shaped like the traffic of Cloudflare's
	// report: most sources far below their threshold. 98.6% of the sources
	// are background sources that average at most a quarter of the
	// threshold over their session, with 94% of the requests; 1% of the
	// sources (5% of the requests) poll steadily just under it, 0.2% (0.5%)
	// steadily just over it and 0.2% (0.5%) burst across it.
	Cloudflare = "cloudflare"
)

// Profiles returns the names of the trace profiles, the default first.
func Profiles() []string { return []string{Harsh, Cloudflare} }

// profileOf returns the named profile; "" is Harsh.
func profileOf(name string) (profile, error) {
	switch name {
	case "", Harsh:
		return profile{
			sourceShare:   [numClasses]float64{SteadyUnder: 0.02, SteadyOver: 0.02, Bursty: 0.02},
			requestShare:  [numClasses]float64{SteadyUnder: 0.20, SteadyOver: 0.20, Bursty: 0.15},
			backgroundMax: 50,
		}, nil
	case Cloudflare:
		return profile{
			sourceShare:   [numClasses]float64{SteadyUnder: 0.01, SteadyOver: 0.002, Bursty: 0.002},
			requestShare:  [numClasses]float64{SteadyUnder: 0.05, SteadyOver: 0.005, Bursty: 0.005},
			backgroundMax: 0.25,
		}, nil
	}
	return profile{}, fmt.Errorf("sim: unknown trace profile %q (want %s)", name, strings.Join(Profiles(), " or "))
}
