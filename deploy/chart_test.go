package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "charts/sluice"
	allOnValues = "charts/sluice/ci/all-on-values.yaml"
	// kubeVersion is the cluster version helm template assumes: the
	// chart needs 1.30 (the preStop sleep action).
	kubeVersion = "1.33.0"
)

// newObject returns an empty object of the API type of apiVersion and
// kind, or nil for a type the chart should not render.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	}
	return nil
}

// rendered is a chart rendered by helm template and decoded.
type rendered struct {
	objects map[string]any // by "Kind/name"
}

func (r *rendered) get(t *testing.T, kind, name string) any {
	t.Helper()
	o := r.objects[kind+"/"+name]
	if o == nil {
		t.Fatalf("no %s %q rendered; rendered: %v", kind, name, slices.Sorted(mapKeys(r.objects)))
	}
	return o
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// decodeStrict decodes one manifest into its API type, failing on any
// field the type does not have.
func decodeStrict(doc []byte) (key string, obj any, err error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return "", nil, err
	}
	obj = newObject(head.APIVersion, head.Kind)
	if obj == nil {
		return "", nil, fmt.Errorf("unexpected object %s %s", head.APIVersion, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return "", nil, fmt.Errorf("%s %s: %w", head.Kind, head.Metadata.Name, err)
	}
	return head.Kind + "/" + head.Metadata.Name, obj, nil
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// render runs helm template with the values files and decodes every
// object strictly.
func render(t *testing.T, valuesFiles ...string) *rendered {
	t.Helper()
	return renderAs(t, "rel", "edge", valuesFiles...)
}

// renderAs renders the chart as release in namespace.
func renderAs(t *testing.T, release, namespace string, valuesFiles ...string) *rendered {
	t.Helper()
	helm := tool(t, "helm")
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	for _, f := range valuesFiles {
		args = append(args, "-f", f)
	}
	out := run(t, root, helm, args...)
	r := &rendered{objects: map[string]any{}}
	for _, doc := range docSeparator.Split(out, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		key, obj, err := decodeStrict([]byte(doc))
		if err != nil {
			t.Fatalf("decoding a rendered object: %v\n%s", err, doc)
		}
		if r.objects[key] != nil {
			t.Fatalf("%s rendered twice", key)
		}
		r.objects[key] = obj
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestChartLint(t *testing.T) {
	helm := tool(t, "helm")
	run(t, root, helm, "lint", "--strict", chartDir)
	run(t, root, helm, "lint", "--strict", chartDir, "-f", allOnValues)
}

// TestDecodeStrictRefuses checks that the strict decoding the chart tests
// rely on does refuse a misspelt field.
func TestDecodeStrictRefuses(t *testing.T) {
	doc := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n"
	if _, _, err := decodeStrict([]byte(doc)); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("decodeStrict of a misspelt field: %v, want an error naming it", err)
	}
}

func TestChartDefaults(t *testing.T) {
	r := render(t)
	for _, k := range []string{"HorizontalPodAutoscaler/rel-sluice", "ServiceMonitor/rel-sluice", "NetworkPolicy/rel-sluice", "Service/rel-sluice-grpc", "ConfigMap/rel-sluice-rls"} {
		if r.objects[k] != nil {
			t.Errorf("%s rendered with the default values", k)
		}
	}
	d := r.get(t, "Deployment", "rel-sluice").(*appsv1.Deployment)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	checkPod(t, r, d)
	checkServices(t, r, d, false)
	pdb := r.get(t, "PodDisruptionBudget", "rel-sluice").(*policyv1.PodDisruptionBudget)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	checkConfig(t, r, "rel-sluice")
}

func TestChartAllOn(t *testing.T) {
	r := render(t, allOnValues)
	d := r.get(t, "Deployment", "rel-sluice").(*appsv1.Deployment)
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d set while the HorizontalPodAutoscaler scales", *d.Spec.Replicas)
	}
	checkPod(t, r, d)
	checkServices(t, r, d, true)
	hpa := r.get(t, "HorizontalPodAutoscaler", "rel-sluice").(*autoscalingv2.HorizontalPodAutoscaler)
	if hpa.Spec.ScaleTargetRef.Name != d.Name || hpa.Spec.MaxReplicas != 12 {
		t.Errorf("HorizontalPodAutoscaler targets %q up to %d, want %q up to 12", hpa.Spec.ScaleTargetRef.Name, hpa.Spec.MaxReplicas, d.Name)
	}
	sm := r.get(t, "ServiceMonitor", "rel-sluice").(*monitoringv1.ServiceMonitor)
	admin := r.get(t, "Service", "rel-sluice-admin").(*corev1.Service)
	if !selects(sm.Spec.Selector.MatchLabels, admin.Labels) || r.get(t, "Service", "rel-sluice").(*corev1.Service).Labels["app.kubernetes.io/component"] == "admin" {
		t.Errorf("ServiceMonitor selector %v does not pick the admin Service alone", sm.Spec.Selector.MatchLabels)
	}
	if ep := sm.Spec.Endpoints; len(ep) != 1 || ep[0].Port != "admin" || ep[0].Path != "/metrics" || ep[0].Authorization == nil {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on port admin with the admin token", ep)
	}
	np := r.get(t, "NetworkPolicy", "rel-sluice").(*networkingv1.NetworkPolicy)
	if len(np.Spec.Ingress) != 2 || np.Spec.Ingress[1].Ports[0].Port.String() != "admin" || len(np.Spec.Ingress[1].From) == 0 {
		t.Errorf("NetworkPolicy ingress %+v: want the admin port open to adminFrom only", np.Spec.Ingress)
	}
	checkConfig(t, r, "rel-sluice")
}

// checkPod checks the pod template: probes, graceful shutdown, security.
func checkPod(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port != intstr.FromString("http") {
		t.Errorf("readiness probe %+v, want GET /readyz on port http", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz", p)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatalf("no preStop sleep")
	}
	// sluice drains for up to 30 s (server.DefaultShutdownTimeout) after
	// the preStop delay.
	if grace, stop := *pod.TerminationGracePeriodSeconds, c.Lifecycle.PreStop.Sleep.Seconds; grace <= stop+30 {
		t.Errorf("terminationGracePeriodSeconds %d, want more than preStop %d s + the 30 s drain", grace, stop)
	}
	sc, psc := c.SecurityContext, pod.SecurityContext
	switch {
	case sc == nil || psc == nil:
		t.Fatal("no security context")
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0:
		t.Errorf("pod security context %+v: want a non-root user", psc)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem not read-only")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Errorf("capabilities %+v, want all dropped", sc.Capabilities)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want a CPU request and a memory limit", c.Resources)
	}
	for _, name := range []string{"SLUICE_STORE_URL", "SLUICE_ADMIN_TOKEN"} {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s not taken from a Secret", name)
			continue
		}
		r.get(t, "Secret", c.Env[i].ValueFrom.SecretKeyRef.Name)
	}
	for _, v := range pod.Volumes {
		r.get(t, "ConfigMap", v.ConfigMap.Name)
	}
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			t.Errorf("volume mount %s uses subPath: a ConfigMap change would not reach the pod", m.Name)
		}
	}
}

// checkServices checks that each Service selects the pods and targets a
// port of the container, and that the public Service has no admin port.
func checkServices(t *testing.T, r *rendered, d *appsv1.Deployment, grpc bool) {
	t.Helper()
	ports := map[string]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = true
	}
	want := map[string]string{"rel-sluice": "http", "rel-sluice-admin": "admin"}
	if grpc {
		want["rel-sluice-grpc"] = "grpc"
	}
	for name, port := range want {
		s := r.get(t, "Service", name).(*corev1.Service)
		if !selects(s.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("Service %s selector %v does not select the pods %v", name, s.Spec.Selector, d.Spec.Template.Labels)
		}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.String() != port || !ports[port] {
			t.Errorf("Service %s ports %+v, want the container port %s alone", name, s.Spec.Ports, port)
		}
	}
	if s := r.get(t, "Service", "rel-sluice-admin").(*corev1.Service); s.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("admin Service type %s, want ClusterIP", s.Spec.Type)
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkConfig runs "sluice serve --check-config" on the rendered
// sluice.yaml, with the rule files of the rls ConfigMap in a directory
// of their own and the Secret's values in the environment, as the pod
// gets them.
func checkConfig(t *testing.T, r *rendered, fullname string) {
	t.Helper()
	dir := t.TempDir()
	cfg := r.get(t, "ConfigMap", fullname).(*corev1.ConfigMap).Data["sluice.yaml"]
	if rls, ok := r.objects["ConfigMap/"+fullname+"-rls"].(*corev1.ConfigMap); ok {
		rulesDir := filepath.Join(dir, "rls")
		if err := os.Mkdir(rulesDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range rls.Data {
			if err := os.WriteFile(filepath.Join(rulesDir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(cfg, "config_dir: /etc/sluice/rls") {
			t.Fatalf("sluice.yaml does not name the rule directory:\n%s", cfg)
		}
		cfg = strings.ReplaceAll(cfg, "/etc/sluice/rls", rulesDir)
	}
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := r.get(t, "Secret", fullname).(*corev1.Secret)
	cmd := exec.Command(sluiceBin, "serve", "--check-config", "--config", path)
	cmd.Env = append(os.Environ(), "SLUICE_STORE_URL="+secret.StringData["store-url"], "SLUICE_ADMIN_TOKEN="+secret.StringData["admin-token"])
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), ": valid:") {
		t.Fatalf("sluice serve --check-config on the rendered sluice.yaml: %v\n%s\n%s", err, out.String(), cfg)
	}
	t.Logf("%s", strings.ReplaceAll(out.String(), dir, "$DIR"))
}
