package config

import "strings"

// Warnings returns what a valid configuration leaves open that an operator
// should know of, one sentence each: "sluice serve" logs them at start
// and "--check-config" prints them. With neither an admin listener nor
// an admin token, that is every admin endpoint the api listeners serve
// to any client (the top lists, and with Admin.Open the endpoints that
// change counters), and the counter-changing endpoints that are off.
// POST /v1/reset, when not an admin endpoint and served (Admin.Open), is
// named whatever protects the others.
func (c *Config) Warnings() []string {
	if !c.has(API) {
		return c.zoneWarnings()
	}
	var open, off []string
	resetOpen := c.ServesReset() && !(c.Admin.IsAdmin(EndpointReset) && c.adminProtected())
	switch {
	case resetOpen:
		open = append(open, "POST /v1/reset")
	case !c.ServesReset():
		off = append(off, "POST /v1/reset")
	}
	if !c.adminProtected() {
		if c.Admin.IsAdmin(EndpointCheck) {
			open = append(open, "POST /v1/check")
		}
		if c.Admin.IsAdmin(EndpointMetrics) {
			open = append(open, "GET /metrics")
		}
		if !c.Top.Disabled {
			if c.ServesTopReset() {
				open = append(open, "POST /v1/top/reset")
			} else {
				off = append(off, "POST /v1/top/reset")
			}
			open = append(open, "GET /v1/top", "GET /ui")
		}
	}
	out := c.zoneWarnings()
	if len(open) > 0 {
		w := "open to every client of the api listeners: " + strings.Join(open, ", ") + "."
		if resetOpen || c.Admin.Open && !c.adminProtected() {
			w += " Anyone who can reach them can clear any key's counters (admin.open: true)."
		}
		out = append(out, w+" Protect the admin endpoints with a serve: admin listener, or admin.token_file (or SLUICE_ADMIN_TOKEN), with reset in admin.endpoints")
	}
	if len(off) > 0 {
		out = append(out, "off, answered 403: "+strings.Join(off, ", ")+
			"; they change counters and nothing protects them. Enable them with an admin token or a serve: admin listener, or for every client with admin.open: true")
	}
	return out
}

// zoneWarnings names the zone options that load but do nothing.
func (c *Config) zoneWarnings() []string {
	var out []string
	for _, z := range c.Zones {
		if z.FirstSight != 0 {
			out = append(out, "zone "+z.Name+": first_sight has no effect: a key's first check of an async zone asks the store")
		}
	}
	return out
}
