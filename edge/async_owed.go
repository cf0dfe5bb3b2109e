package edge

// owedParts is the most parts a key's pending cost is kept in.
const owedParts = 4

// A part is cost admitted between two instants (ns since the limiter's
// base).
type part struct{ cost, first, last int64 }

// owed is a key's pending cost by age, oldest part first, so that only
// cost older than the key's window is dropped. A part spans at most a
// quarter window, so while the store answers a key owes one part; past
// owedParts the two oldest merge, and a long outage may then send some
// cost up to half a window late (under-admission, never over).
type owed struct {
	n     int
	parts [owedParts]part
}

// add records cost admitted at now on a key of the given window (ns).
func (o *owed) add(cost, now, window int64) {
	if o.n > 0 && now-o.parts[o.n-1].first < window/owedParts {
		p := &o.parts[o.n-1]
		p.cost, p.last = p.cost+cost, max(p.last, now)
		return
	}
	o.push(part{cost: cost, first: now, last: now})
}

// push appends p, merging the two oldest parts when full.
func (o *owed) push(p part) {
	if o.n == owedParts {
		a, b := o.parts[0], o.parts[1]
		o.parts[0] = part{cost: a.cost + b.cost, first: a.first, last: max(a.last, b.last)}
		copy(o.parts[1:], o.parts[2:o.n])
		o.n--
	}
	o.parts[o.n] = p
	o.n++
}

// dropOlder forgets the parts whose last admission is more than window
// before now, and returns their cost.
func (o *owed) dropOlder(now, window int64) (dropped int64) {
	k := 0
	for k < o.n && now-o.parts[k].last > window {
		dropped += o.parts[k].cost
		k++
	}
	copy(o.parts[:], o.parts[k:o.n])
	o.n -= k
	return dropped
}

// restore puts back older, the parts of a flush that failed, before the
// parts owed since.
func (o *owed) restore(older owed) {
	for i := range o.n {
		older.push(o.parts[i])
	}
	*o = older
}
