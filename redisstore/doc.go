// Package redisstore is a sluice.Limiter whose state lives in Redis
// (standalone, Sentinel or Cluster), shared by every process that uses the
// same Redis and Prefix.
//
// Documentation for users, with measured figures, is in docs/redis.md.
package redisstore
