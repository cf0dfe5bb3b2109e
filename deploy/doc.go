// Package deploy holds the tests of sluice's deployment files: the
// container image (Containerfile, scripts/image), the Helm chart
// (charts/sluice) and the systemd unit (examples/systemd). It is a module
// of its own so that the Kubernetes API types it decodes rendered
// manifests into stay out of sluice's dependencies; scripts/test runs it.
//
// The tests need podman (or docker with a daemon; SLUICE_ENGINE picks
// one), helm and systemd-analyze on PATH, and fail without them.
package deploy
