package algo

import "testing"

// BenchmarkCheck measures one unit check on one state, the algorithm's part
// of a memstore check alone, in the two shapes of bench/run.sh memory: hot
// (100 per minute, spent at the start, every check denied, the clock
// advancing 1 µs a check) and spread (10,000 per hour, every check allowed
// and recorded, the clock advancing 0.4 s a check, as a key of the spread
// workload sees it). Instruction counts under callgrind are steady on a
// loaded machine:
//
//	go test -c -o /tmp/algo.test ./internal/algo
//	valgrind --tool=callgrind /tmp/algo.test -test.run '^$' -test.bench 'Check/buckets/hot' -test.benchtime 100000x
func BenchmarkCheck(b *testing.B) {
	const t0 = 1_700_000_000_000_000
	type shape struct {
		name string
		p    Params
		step int64
		warm int64 // unit checks at t0 before the timer starts
	}
	hot := shape{"hot", Params{Rate: 100, Window: 60e6, Bucket: 6e6}, 1, 100}
	spread := shape{"spread", Params{Rate: 10_000, Window: 3600e6, Bucket: 360e6}, 400_000, 1}
	for _, a := range []struct {
		name string
		new  func() interface {
			Check(p Params, now, cost int64, shadow bool) Outcome
		}
	}{
		{"window", func() interface {
			Check(p Params, now, cost int64, shadow bool) Outcome
		} {
			return windowChecker{new(Window)}
		}},
		{"buckets", func() interface {
			Check(p Params, now, cost int64, shadow bool) Outcome
		} {
			return new(Buckets)
		}},
		{"log", func() interface {
			Check(p Params, now, cost int64, shadow bool) Outcome
		} {
			return new(Log)
		}},
		{"decay", func() interface {
			Check(p Params, now, cost int64, shadow bool) Outcome
		} {
			return new(Decay)
		}},
	} {
		for _, sh := range []shape{hot, spread} {
			b.Run(a.name+"/"+sh.name, func(b *testing.B) {
				s := a.new()
				for range sh.warm {
					s.Check(sh.p, t0, 1, false)
				}
				now := int64(t0)
				for b.Loop() {
					now += sh.step
					if s.Check(sh.p, now, 1, false).Allowed != (sh.name == "spread") {
						b.Fatal("unexpected decision")
					}
				}
			})
		}
	}
}

// windowChecker gives Window the Check that memstore makes of its Eval and
// Record.
type windowChecker struct{ s *Window }

func (w windowChecker) Check(p Params, now, cost int64, shadow bool) Outcome {
	return check(w.s, p, now, cost, shadow)
}
