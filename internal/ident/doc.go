// Package ident is the one definition of "the same state" and the one
// table of sluice's algorithms. Every store, layer and protocol adapter
// (memstore, redisstore, edge, internal/rls, the conformance suite and the
// root package's Check.Validate) names a hit's stored state with State and
// looks an algorithm up in the table with Lookup or ByCode, so that they
// cannot disagree on when two hits share usage or on how an algorithm is
// spelled, coded or built.
//
// # Identity
//
// A state is identified by six things: the zone, the key, the check's
// group, the algorithm, the window and the bucket length (the window for
// every algorithm but buckets). A limit's Rate, Name and Shadow flag are
// not part of it: raising a limit keeps the usage counted so far, and a
// shadow limit counts the same usage as an enforced one. A layer that
// keys something else by a check (the edge deny cache keys whole checks,
// rate and cost included) says so; it is not a state identity.
//
// The package does not import package sluice (which uses it); callers
// build a State from a sluice.Hit with its fields, Limit.Algo and
// Limit.Bucket:
//
//	ident.State{Zone: h.Zone, Key: h.Key, Group: c.Group,
//		Limit: ident.LimitOf(string(h.Limit.Algo()), h.Limit.Window, h.Limit.Bucket())}
package ident
