package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// MaxRecordBatch is the most records one record.lua call carries: about a
// millisecond of Redis's time for sliding windows, short beside the
// checks waiting behind it.
const MaxRecordBatch = 512

// RecordUnsent is RecordBatch's outcome of a record whose call failed.
const RecordUnsent = -2

// recordWorkers bounds the record.lua calls under way at once for one
// RecordBatch in a Cluster (one call per hash slot).
const recordWorkers = 8

// RecordBatch adds the cost of each of checks to the state of its one hit
// without deciding anything: cost already admitted elsewhere (an
// edge.Async's first sight) and sent later. A record's cost is written
// where it fits at the time Redis runs it, as a check of that cost alone
// would be, and nothing is written where it does not: the store never
// holds more than its limit (a shadow limit records either way). Records
// go in record.lua calls of up to MaxRecordBatch, one hash slot per call
// in a Cluster; each call is bounded by Options.Timeout.
//
// recorded[i] is set to checks[i].Cost when recorded, 0 when it did not
// fit, -1 when the script failed on its key (a key of another type under
// the prefix: sending it again cannot help), and RecordUnsent when its
// call failed. An error wraps sluice.ErrInvalid (a check of more or fewer
// than one hit, a cost of 0, a bad limit: nothing is sent) or
// sluice.ErrUnavailable (a call failed: the caller sends the records left
// RecordUnsent again; a call that timed out may still have been recorded,
// which can only over-count).
//
// created, when not nil (of at least len(checks)), has created[i] set when
// checks[i] created its key's state: Redis held nothing of it, so it holds
// exactly that cost as of the call, as the reply to a check of that cost
// would say. Only the plain SET ... NX of a sliding window not stored yet
// tells; a record that went through record.lua leaves it false.
func (s *Store) RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error {
	if created != nil && len(created) < len(checks) {
		return fmt.Errorf("redisstore: record: %w: %d created flags for %d records", sluice.ErrInvalid, len(created), len(checks))
	}
	if created != nil {
		clear(created[:len(checks)])
	}
	recs, err := s.records(checks, recorded)
	if err != nil {
		return err
	}
	if p, ok := s.sc.(pipeliner); ok {
		rest, err := s.recordNew(ctx, p, recs, recorded, created)
		if err != nil {
			return recordFailure(ctx, len(checks), err)
		}
		recs = rest
	}
	batches := s.recordBatches(recs)
	errs := make([]error, len(batches))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(recordWorkers, len(batches)) {
		wg.Go(func() {
			for j := next.Add(1) - 1; j < int64(len(batches)); j = next.Add(1) - 1 {
				errs[j] = s.recordCall(ctx, batches[j], recorded)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return recordFailure(ctx, len(checks), err)
	}
	return nil
}

// records validates checks and returns them as records, each recorded
// entry set to RecordUnsent.
func (s *Store) records(checks []sluice.Check, recorded []int64) ([]record, error) {
	if len(recorded) < len(checks) {
		return nil, fmt.Errorf("redisstore: record: %w: %d results for %d records", sluice.ErrInvalid, len(recorded), len(checks))
	}
	recs := make([]record, len(checks))
	for i := range checks {
		c := &checks[i]
		if len(c.Hits) != 1 || c.Cost <= 0 {
			return nil, fmt.Errorf("redisstore: record %s: %w: a record has one hit and a cost > 0", describe(*c), sluice.ErrInvalid)
		}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("redisstore: record %s: %w", describe(*c), err)
		}
		h := c.Hits[0]
		st := stateOf(h, c.Group)
		key, tag := stateKey(s.prefix, st)
		recs[i] = record{i: i, key: key, spec: specOf(h, st, c.Shadow), cost: c.Cost}
		if s.cluster {
			recs[i].slot = slot(tag)
		}
		recorded[i] = RecordUnsent
	}
	return recs, nil
}

// recordBatches splits recs into record.lua calls of up to MaxRecordBatch,
// one hash slot per call in a Cluster.
func (s *Store) recordBatches(recs []record) [][]record {
	groups := [][]record{recs}
	if s.cluster {
		bySlot := map[uint16][]record{}
		for _, r := range recs {
			bySlot[r.slot] = append(bySlot[r.slot], r)
		}
		groups = groups[:0]
		for _, g := range bySlot {
			groups = append(groups, g)
		}
	}
	var batches [][]record
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), MaxRecordBatch)
			batches, g = append(batches, g[:n]), g[n:]
		}
	}
	return batches
}

// recordFailure wraps the error of a RecordBatch of n records: the
// caller's context, or Redis that could not answer.
func recordFailure(ctx context.Context, n int, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("redisstore: record %d: %w", n, ctxErr)
	}
	return fmt.Errorf("redisstore: record %d: %w: %w", n, sluice.ErrUnavailable, err)
}

// record is one record of a RecordBatch: its index, key and limit.
type record struct {
	i    int
	slot uint16
	key  string
	spec spec
	cost int64
}

// recordCall runs one record.lua call for recs, within Options.Timeout,
// and writes their outcomes into recorded.
func (s *Store) recordCall(ctx context.Context, recs []record, recorded []int64) error {
	keys := make([]string, len(recs))
	var limits []spec
	refs := make([]int, len(recs))
	last := -1
	for j, r := range recs {
		keys[j] = r.key
		if last < 0 || limits[last] != r.spec {
			last = 0
			for last < len(limits) && limits[last] != r.spec {
				last++
			}
			if last == len(limits) {
				limits = append(limits, r.spec)
			}
		}
		refs[j] = last + 1
	}
	args := make([]string, 0, 4+5*len(limits)+2*len(recs))
	args = append(args, s.nowArg(), s.padding, s.callID(), strconv.Itoa(len(limits)))
	for _, sp := range limits {
		shadow := "0"
		if sp.shadow {
			shadow = "1"
		}
		args = append(args, string(sp.code), strconv.FormatInt(sp.rate, 10),
			strconv.FormatInt(sp.window, 10), strconv.FormatInt(sp.bucket, 10), shadow)
	}
	for j, r := range recs {
		args = append(args, strconv.FormatInt(r.cost, 10), strconv.Itoa(refs[j]))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	raw, err := run(ctx, s.sc, s.scripts.record, keys, args)
	if err != nil {
		return err
	}
	if len(raw) != 1+len(recs) || raw[0] <= 0 {
		return fmt.Errorf("record script replied %d values for %d records", len(raw), len(recs))
	}
	for j, r := range recs {
		switch raw[1+j] {
		case 1:
			recorded[r.i] = r.cost
		case 0:
			recorded[r.i] = 0
		case -1:
			recorded[r.i] = -1
		default:
			return fmt.Errorf("record script replied %d for a record", raw[1+j])
		}
	}
	return nil
}

// recordNew records, with plain SET ... NX commands pipelined (a TIME
// first, for the server's clock), the sliding-window records whose key
// is not stored yet, writing the state and TTL record.lua would write; it
// returns the records left for record.lua: other algorithms, and keys
// that exist. It sets created (when not nil) for the records it wrote.
func (s *Store) recordNew(ctx context.Context, p pipeliner, recs []record, recorded []int64, created []bool) ([]record, error) {
	fresh, rest := make([]record, 0, len(recs)), make([]record, 0, len(recs))
	for _, r := range recs {
		if r.spec.code == 'w' && r.cost <= r.spec.rate {
			fresh = append(fresh, r)
		} else {
			rest = append(rest, r)
		}
	}
	if len(fresh) == 0 {
		return recs, nil
	}
	pad, _ := strconv.ParseInt(s.padding, 10, 64)
	for len(fresh) > 0 {
		chunk := fresh[:min(len(fresh), MaxRecordBatch)]
		fresh = fresh[len(chunk):]
		err := func() error {
			ctx, cancel := context.WithTimeout(ctx, s.timeout)
			defer cancel()
			var now int64
			if s.now != nil {
				now = s.now().UnixMicro()
			} else {
				var err error
				if now, err = p.serverTime(ctx); err != nil {
					return err
				}
			}
			keys, values, ttls := make([]string, len(chunk)), make([]string, len(chunk)), make([]int64, len(chunk))
			// The values in one allocation: each a string of its part,
			// never written again.
			states := make([]byte, windowStateBytes*len(chunk))
			for j, r := range chunk {
				keys[j] = r.key
				b := states[windowStateBytes*j:][:windowStateBytes]
				ttls[j] = newWindowState(b, now, r.spec.window, r.cost, pad)
				values[j] = unsafe.String(&b[0], len(b))
			}
			set, err := p.setNX(ctx, keys, values, ttls)
			if err != nil {
				return err
			}
			for j, r := range chunk {
				if set[j] {
					recorded[r.i] = r.cost
					if created != nil {
						created[r.i] = true
					}
				} else {
					rest = append(rest, r)
				}
			}
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// windowStateBytes is the size of a sliding window's state.
const windowStateBytes = 24

// newWindowState writes into b (of windowStateBytes) the state window.lua's
// w_record writes on a key not stored yet when cost is recorded at now
// (µs) on a window of w µs: struct '<ddd' of the window index, cost and 0;
// and returns its TTL in ms, until the next window ends, plus pad ms
// (ttl_ms).
func newWindowState(b []byte, now, w, cost, pad int64) int64 {
	wi := now / w
	binary.LittleEndian.PutUint64(b[0:], math.Float64bits(float64(wi)))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(float64(cost)))
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(0))
	reset := (wi+2)*w - now
	return max(1, (reset+999)/1000+pad)
}
