// Package config reads the sluice server's YAML configuration into
// validated values: the store, logging, listeners, zones and proxy rules.
//
// Parse is pure: it takes the bytes and a name for messages and does no
// I/O; Load is the one wrapper that reads files: the configuration, the
// admin token file it names (admin.token_file) and the digest secret file
// (top.digest_secret_file), whose problems are
// reported with the others. Every problem is an
// *Error that names the file, the line and the path of the value, such as
//
//	sluice.yaml:12: zones[2].limits[0]: limit "0r/m": rate must be > 0
//
// and all problems found in one pass are reported together (at most 20).
// The reference of every option, with its default, is docs/server.md.
//
// Decisions where the design was silent:
//
//   - The file is walked as a yaml.Node tree rather than decoded into
//     tagged structs, so that every problem carries its line, unknown
//     fields are errors (a typo never silently means "default"), and
//     repeated fields are errors. Anchors and aliases work; the walk
//     counts nodes after alias expansion and stops at 100,000.
//   - Every check runs in one pass, so one run reports everything "sluice
//     serve" would refuse, including what the stores check when they open
//     (a Redis URL, the store timeout's 1ms minimum, a prefix with a
//     brace). Cross-section checks (unknown zones in rules, duplicate
//     names, groups) skip a value already reported, so one typo does not
//     cascade into derived messages.
//   - An empty value is a problem, never the default: nothing (null), "",
//     [] and {} are refused wherever a field is given (omit the field to
//     get its default); the one exception is trusted_proxies: [], which
//     means "trust no proxy", and a rule's zones: [], "no limit".
//     Booleans are true or false (not yes, on or "true"); integers are
//     YAML integers > 0.
//   - YAML is read with go.yaml.in/yaml/v4, which reports a syntax error
//     at the line where the parser found it; a second document in the
//     file is an error.
//   - Rule hosts are DNS names (non-empty labels, no trailing dot) or
//     IPv4 addresses; limit names are printable ASCII, as a
//     RateLimit-Policy field carries them.
//   - A zone's limits inherit the zone's algorithm, resolution and shadow
//     flag; a limit's own setting wins. Two limits of one zone that would
//     share counters (same algorithm and window) or the same label are an
//     error, because headers and metrics tell limits apart by label.
//   - A key source is a list of parts combined in order (httplimit.Combine),
//     or with first_of the first part present (httplimit.FirstOf). Zones
//     use the global trusted_proxies list unless their key names its own;
//     an explicit empty list trusts no proxy.
//   - store.url accepts every URL form of package redisstore (standalone,
//     Sentinel, Cluster); the sentinel and cluster fields are a structured
//     alternative. The URL itself is parsed when the store is opened.
//   - A store timeout longer than 5s is rejected: store calls should take
//     milliseconds, and the failure policy exists for slow stores.
//   - Zone names are letters, digits, '.', '_' and '-' (at most 64 bytes):
//     they appear in URLs, metric labels and Redis keys.
//   - The admin token is at least 16 bytes of visible ASCII; an error
//     about it never quotes it. SLUICE_ADMIN_TOKEN (Overrides.AdminToken)
//     wins over the file, as every environment setting does; so is the
//     top digest secret (SLUICE_TOP_DIGEST_SECRET).
//   - Endpoints that change counters are off while nothing protects them
//     unless admin.open says otherwise (Config.ServesReset); Warnings
//     names what is open and what is off.
//   - Configuring proxy rules without a proxy listener, or a proxy listener
//     without rules or upstream, is an error rather than a silent no-op.
package config
