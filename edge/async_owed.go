package edge

// owedParts is the most parts a key's pending cost is kept in, each with
// the time of its first and last admission, so that only the cost older
// than the key's window is dropped (see owed.dropOlder).
const owedParts = 4

// A part is cost admitted between two instants (ns since the limiter's
// base).
type part struct{ cost, first, last int64 }

// owed is a key's pending cost by age, oldest part first. A new part is
// begun when the last one began a quarter window ago or more, so while
// the store answers (and pending cost is sent every SyncInterval, which is
// shorter than the window) a key owes one part. Past owedParts the two
// oldest parts are merged: cost is then dropped only when the newest of
// the merged part is older than the window, never sooner, so a long
// outage may send some cost up to half a window older than the window
// (it then counts in a later window: under-admission, never more than
// what was admitted).
type owed struct {
	n     int
	parts [owedParts]part
}

// add records cost admitted at now on a key of the given window (ns).
func (o *owed) add(cost, now, window int64) {
	if o.n > 0 && now-o.parts[o.n-1].first < window/owedParts {
		p := &o.parts[o.n-1]
		p.cost += cost
		p.last = max(p.last, now)
		return
	}
	if o.n == owedParts {
		o.mergeOldest()
	}
	o.parts[o.n] = part{cost: cost, first: now, last: now}
	o.n++
}

func (o *owed) mergeOldest() {
	a, b := o.parts[0], o.parts[1]
	o.parts[0] = part{cost: a.cost + b.cost, first: a.first, last: max(a.last, b.last)}
	copy(o.parts[1:], o.parts[2:o.n])
	o.n--
	o.parts[o.n] = part{}
}

// dropOlder forgets the parts whose last admission is more than window
// before now, and returns their cost.
func (o *owed) dropOlder(now, window int64) (dropped int64) {
	k := 0
	for k < o.n && now-o.parts[k].last > window {
		dropped += o.parts[k].cost
		k++
	}
	if k > 0 {
		copy(o.parts[:], o.parts[k:o.n])
		for i := o.n - k; i < o.n; i++ {
			o.parts[i] = part{}
		}
		o.n -= k
	}
	return dropped
}

// restore puts back older, the parts of a flush that failed, before the
// parts owed since, merging the oldest to stay within owedParts.
func (o *owed) restore(older owed) {
	if older.n == 0 {
		return
	}
	all := older
	for i := range o.n {
		if all.n == owedParts {
			all.mergeOldest()
		}
		all.parts[all.n] = o.parts[i]
		all.n++
	}
	*o = all
}
