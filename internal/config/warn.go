package config

import "slices"

// Warnings returns what a valid configuration leaves open that an operator
// should know of, one sentence each: "sluice serve" logs them at start
// and "--check-config" prints them. Today that is POST /v1/reset open to
// every client of the api listeners, which it is unless reset is an admin
// endpoint and an admin listener or an admin token protects it (or no
// listener serves api).
func (c *Config) Warnings() []string {
	var out []string
	has := func(r Role) bool {
		return slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Serve == r })
	}
	if has(API) && (!c.Admin.IsAdmin(EndpointReset) || !has(AdminRole) && c.Admin.Token == "") {
		out = append(out, "POST /v1/reset is open to every client of the api listeners: anyone who can reach them can clear any key's counters. "+
			"Protect it with a serve: admin listener, or admin.token_file (or SLUICE_ADMIN_TOKEN), with reset in admin.endpoints")
	}
	return out
}
