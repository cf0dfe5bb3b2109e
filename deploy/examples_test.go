package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// validator is what Envoy's generated protos offer to check their
// constraints (required fields, ranges, enum values).
type validator interface{ ValidateAll() error }

// decodeEnvoy decodes YAML in protobuf's JSON mapping into m, refusing
// unknown fields, and checks m's constraints.
func decodeEnvoy(y []byte, m proto.Message) error {
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return err
	}
	if err := protojson.Unmarshal(j, m); err != nil {
		return err
	}
	return m.(validator).ValidateAll()
}

// grpcService renders the chart with examples/istio/values.yaml as
// release "sluice" in namespace "edge", the names both examples assume,
// and returns the cluster-local name and port of its gRPC Service.
func grpcService(t *testing.T) (host string, port int32) {
	t.Helper()
	r := renderAs(t, "sluice", "edge", "examples/istio/values.yaml")
	s := r.get(t, "Service", "sluice-grpc").(*corev1.Service)
	checkConfig(t, r, "sluice")
	return s.Name + ".edge.svc.cluster.local", s.Spec.Ports[0].Port
}

// TestEnvoyExample decodes the Envoy bootstrap example strictly into
// Envoy's own types, checks their constraints, and checks that its
// rate-limit cluster is the chart's gRPC Service.
func TestEnvoyExample(t *testing.T) {
	y, err := os.ReadFile(filepath.Join(root, "examples/envoy/envoy-kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := decodeEnvoy(y, &b); err != nil {
		t.Fatalf("examples/envoy/envoy-kubernetes.yaml: %v", err)
	}
	host, port := grpcService(t)
	var found bool
	for _, c := range b.StaticResources.Clusters {
		if c.Name != "sluice" {
			continue
		}
		a := c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress()
		found = a.Address == host && int32(a.GetPortValue()) == port
		if !found {
			t.Errorf("cluster sluice points at %s:%d, want the chart's %s:%d", a.Address, a.GetPortValue(), host, port)
		}
	}
	if !found {
		t.Error("no cluster sluice")
	}
}

// TestIstioExample checks the EnvoyFilter's patches: the filter decodes
// strictly into Envoy's RateLimit filter and names the cluster Istio
// makes for the chart's gRPC Service; the routes' actions decode into a
// virtual host's rate_limits.
func TestIstioExample(t *testing.T) {
	y, err := os.ReadFile(filepath.Join(root, "examples/istio/envoyfilter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ef struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			ConfigPatches []struct {
				ApplyTo string `json:"applyTo"`
				Patch   struct {
					Operation string          `json:"operation"`
					Value     json.RawMessage `json:"value"`
				} `json:"patch"`
			} `json:"configPatches"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(y, &ef); err != nil || ef.Kind != "EnvoyFilter" || len(ef.Spec.ConfigPatches) != 2 {
		t.Fatalf("examples/istio/envoyfilter.yaml: %v, kind %q, %d patches", err, ef.Kind, len(ef.Spec.ConfigPatches))
	}
	host, port := grpcService(t)
	var filter struct {
		Name        string          `json:"name"`
		TypedConfig json.RawMessage `json:"typed_config"`
	}
	if err := json.Unmarshal(ef.Spec.ConfigPatches[0].Patch.Value, &filter); err != nil || filter.Name != "envoy.filters.http.ratelimit" {
		t.Fatalf("first patch: %v, filter %q", err, filter.Name)
	}
	var rl ratelimitv3.RateLimit
	if err := decodeEnvoy(stripType(t, filter.TypedConfig), &rl); err != nil {
		t.Fatalf("the RateLimit filter: %v", err)
	}
	want := fmt.Sprintf("outbound|%d||%s", port, host)
	if got := rl.RateLimitService.GrpcService.GetEnvoyGrpc().ClusterName; got != want {
		t.Errorf("rate-limit cluster %q, want %q (the chart's gRPC Service)", got, want)
	}
	// A MERGE patch: a part of a virtual host, without its name and
	// domains; its rate limits are checked one by one.
	var vh routev3.VirtualHost
	if err := protojson.Unmarshal(ef.Spec.ConfigPatches[1].Patch.Value, &vh); err != nil || len(vh.RateLimits) == 0 {
		t.Fatalf("second patch: %v, %d rate limits", err, len(vh.RateLimits))
	}
	for i, r := range vh.RateLimits {
		if err := r.ValidateAll(); err != nil {
			t.Errorf("second patch: rate_limits[%d]: %v", i, err)
		}
	}
}

// stripType removes the "@type" of a typed_config, which Istio reads
// and the message itself does not have.
func stripType(t *testing.T, j json.RawMessage) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	if typ, _ := m["@type"].(string); !strings.HasSuffix(typ, "envoy.extensions.filters.http.ratelimit.v3.RateLimit") {
		t.Fatalf("typed_config @type %q", typ)
	}
	delete(m, "@type")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
