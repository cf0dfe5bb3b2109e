package server

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/wire"
)

// response fills r, whose Limits has room for every hit, with the /v1/check
// answer for zone z, the check c and its decision d. Its strings are the
// zone's and the check's own: nothing is copied or allocated.
func response(r *wire.Response, z *zone, c sluice.Check, d *sluice.Decision) {
	r.Allowed, r.Zone, r.Source, r.Shadowed = d.Allowed, z.cfg.Name, d.Source.String(), d.Shadowed
	r.RetryAfter = d.RetryAfter().Seconds()
	r.Limits = r.Limits[:0]
	for i, h := range d.Hits {
		l := i % len(z.cfg.Limits)
		r.Limits = append(r.Limits, wire.Limit{
			Key:        c.Hits[i].Key,
			Name:       z.labels[l],
			Limit:      z.specs[l],
			Algorithm:  string(z.cfg.Limits[l].Algo()),
			Allowed:    h.Allowed,
			Shadow:     h.Shadow,
			Used:       h.Used,
			Remaining:  h.Remaining,
			RetryAfter: h.RetryAfter.Seconds(),
			ResetAfter: h.ResetAfter.Seconds(),
		})
	}
}
