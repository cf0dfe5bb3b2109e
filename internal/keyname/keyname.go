// Package keyname names rate-limit keys in logs and error texts without
// writing them there. A key is often a credential (an Authorization
// header, an API token, a session cookie), so no log line or error text
// of sluice carries one: where a key must be identified, it is named by
// its digest.
package keyname

import (
	"crypto/sha256"
	"encoding/hex"
)

// Of returns the name under which key appears in logs and errors:
// "sha256:" and the first 16 hex digits of the SHA-256 of key, such as
// "sha256:2cf24dba5fb0a30e" for "hello". The same key always has the same
// name, so an operator can find a suspected key's lines with
//
//	printf %s "$KEY" | sha256sum | cut -c1-16
//
// 64 bits do not identify a key beyond doubt, and a key drawn from a small
// set (an IPv4 address) can be found again from its name by trying them
// all; a secret token cannot.
func Of(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
