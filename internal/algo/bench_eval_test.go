package algo

import "testing"

// BenchmarkEvalHot measures Eval on a state far over its limit, the
// algorithm's part of a denial that memstore's peek decides without the
// lock: 100 per minute spent at t0, evaluated at instants cycling
// through 65 ms after it (Eval changes nothing, so every check is the
// same denial). CPU time per check, the start-up cancelled, is the
// difference of two runs' task-clock over the difference of their counts:
//
//	go test -c -o /tmp/algo.test ./internal/algo
//	for n in 2000000 12000000; do perf stat -e task-clock /tmp/algo.test -test.run '^$' -test.bench 'EvalHot/decay' -test.benchtime ${n}x; done
func BenchmarkEvalHot(b *testing.B) {
	const t0 = 1_700_000_000_000_000
	p := Params{Rate: 100, Window: 60e6, Bucket: 6e6}
	var d Decay
	var bk Buckets
	var w Window
	for range 100 {
		d.Check(p, t0, 1, false)
		bk.Check(p, t0, 1, false)
		check(&w, p, t0, 1, false)
	}
	for _, c := range []struct {
		name string
		s    State
	}{{"window", &w}, {"buckets", &bk}, {"decay", &d}} {
		b.Run(c.name, func(b *testing.B) {
			i := int64(0)
			for b.Loop() {
				i++
				if c.s.Eval(p, t0+1000+i&0xffff, 1).Allowed {
					b.Fatal("unexpected decision")
				}
			}
		})
	}
}
