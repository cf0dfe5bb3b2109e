//go:build !amd64 || race

package memstore

// lockFree is false where peek's sequence lock is not sound as written
// (weaker memory orders than amd64's) or not visible (the race detector):
// every check then takes the shard's lock.
const lockFree = false
