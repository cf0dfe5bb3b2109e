// Package benchcpu helps benchmarks compare two variants of one thing on
// a shared, busy machine, where wall times vary by several times between
// runs: it measures the CPU time of the benchmark's own threads
// (CLOCK_THREAD_CPUTIME_ID), not wall time, over rounds that run the two
// variants in alternating order, and reports the median and spread of
// the per-round ratio. For tests and benchmarks only; Linux only.
package benchcpu
