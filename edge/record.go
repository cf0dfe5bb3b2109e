package edge

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

// A BatchRecorder adds the cost of many checks of one hit each to their
// state without deciding them. RecordBatch sets recorded[i] to the cost
// recorded for checks[i] (down to 0 where the state had no room), -1 when
// it never can be, below -1 when its call failed; created[i], when
// created is not nil, when the record created the state. The Redis store
// implements it; a Guard passes it through.
type BatchRecorder interface {
	RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error
}

// errNoBatch is a Guard's RecordBatch error when its store does not record
// in batches.
var errNoBatch = fmt.Errorf("edge: record: the store does not record in batches: %w", errors.ErrUnsupported)
