// Package wire holds the request and response bodies of sluice's decision
// API (POST /v1/check and POST /v1/reset, docs/http.md): the one
// definition the server, the CLI, the load generator and the tests share.
//
// The server writes responses by hand (AppendResponse), because a
// response is written on every request's path; clients decode them with
// encoding/json into the same types. Requests are read by DecodeRequest,
// which is stricter than encoding/json: see its doc.
package wire
