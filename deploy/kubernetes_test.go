package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/ticketd/ticketd/server/config"
)

// manifests is every object of the YAML files under kubernetes/, decoded
// strictly into its k8s.io/api type.
type manifests struct {
	services    []*corev1.Service
	statefulSet *appsv1.StatefulSet
	pdbs        []*policyv1.PodDisruptionBudget
}

// decodeStrict decodes one YAML document into the k8s.io/api type its
// apiVersion and kind name; a field the type does not have (a typo, a
// field at the wrong level or in the wrong case) or a field given twice is
// an error, as is a kind these manifests do not use.
func decodeStrict(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Service":
		obj = &corev1.Service{}
	case "apps/v1/StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	default:
		return nil, fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
	}
	// As the API server decodes: field names case-sensitive, unknown and
	// duplicate fields errors (sigs.k8s.io/json, which apimachinery uses).
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return obj, nil
}

// documents splits a YAML stream on its "---" separator lines, dropping
// documents that hold only comments.
func documents(data []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under kubernetes/: %v", err)
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(data) {
			obj, err := decodeStrict(doc)
			if err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			switch o := obj.(type) {
			case *corev1.Service:
				m.services = append(m.services, o)
			case *appsv1.StatefulSet:
				if m.statefulSet != nil {
					t.Fatalf("%s: a second StatefulSet %q", f, o.Name)
				}
				m.statefulSet = o
			case *policyv1.PodDisruptionBudget:
				m.pdbs = append(m.pdbs, o)
			}
		}
	}
	if m.statefulSet == nil {
		t.Fatal("no StatefulSet under kubernetes/")
	}
	return m
}

// TestKubernetesDecodeIsStrict checks that the decoder the manifests are
// checked with refuses what the API server would not take, so that a
// passing TestKubernetesManifests means something.
func TestKubernetesDecodeIsStrict(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n",
		"misplaced field": "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nmaxUnavailable: 1\n",
		"duplicate field": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {type: ClusterIP, type: NodePort}\n",
		"unknown kind":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
	} {
		if _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// TestKubernetesManifests decodes every manifest strictly and checks what
// makes the three pods one cluster: three replicas started in parallel, a
// headless Service publishing not-ready pods, a budget that keeps a quorum,
// probes on /livez and /readyz, TLS files from a Secret, and, for each pod,
// the configuration ticketd would load from the container's environment:
// valid, its id the pod's name, and a bootstrap list of exactly the pods'
// stable names.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	sts := m.statefulSet
	pod := sts.Spec.Template

	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("StatefulSet replicas %s, want 3", fmtReplicas(sts.Spec.Replicas))
	}
	replicas := int(*sts.Spec.Replicas)
	// No pod is ready before a leader is elected, which takes a quorum of
	// pods: OrderedReady would wait forever for the first pod's readiness.
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	if !selects(sts.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("StatefulSet selector %v does not select its pods %v", sts.Spec.Selector.MatchLabels, pod.Labels)
	}

	var headless *corev1.Service
	for _, s := range m.services {
		if s.Name == sts.Spec.ServiceName {
			headless = s
		}
		if !selects(s.Spec.Selector, pod.Labels) {
			t.Errorf("Service %s selector %v does not select the pods %v", s.Name, s.Spec.Selector, pod.Labels)
		}
	}
	if headless == nil {
		t.Fatalf("no Service named %q (the StatefulSet's serviceName)", sts.Spec.ServiceName)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s clusterIP %q, want None (headless)", headless.Name, headless.Spec.ClusterIP)
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: publishNotReadyAddresses must be true: peers find each other before any is ready", headless.Name)
	}

	if len(m.pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want 1", len(m.pdbs))
	}
	pdb := m.pdbs[0]
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("PodDisruptionBudget %s does not select the pods", pdb.Name)
	}
	quorum := replicas/2 + 1
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if *pdb.Spec.MaxUnavailable != intstr.FromInt32(int32(replicas-quorum)) {
			t.Errorf("PodDisruptionBudget maxUnavailable %v, want %d (a quorum of %d stays)", pdb.Spec.MaxUnavailable, replicas-quorum, quorum)
		}
	case pdb.Spec.MinAvailable != nil:
		if *pdb.Spec.MinAvailable != intstr.FromInt32(int32(quorum)) {
			t.Errorf("PodDisruptionBudget minAvailable %v, want %d (a quorum)", pdb.Spec.MinAvailable, quorum)
		}
	default:
		t.Errorf("PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}

	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["api"] == 0 || ports["raft"] == 0 {
		t.Fatalf("container ports %v: want named ports api and raft", c.Ports)
	}
	for _, s := range m.services {
		for _, p := range s.Spec.Ports {
			if p.TargetPort.Type != intstr.String || ports[p.TargetPort.StrVal] == 0 {
				t.Errorf("Service %s port %s targets %v, not a named container port", s.Name, p.Name, p.TargetPort)
			}
		}
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("pod securityContext must set runAsNonRoot")
	}

	// Every pod's configuration, as ticketd loads it from the environment
	// Kubernetes gives the container.
	names := make([]string, replicas)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", sts.Name, i)
	}
	const namespace = "ticketd-test"
	domain := fmt.Sprintf("%s.%s.svc.cluster.local", headless.Name, namespace)
	var scheme corev1.URIScheme = corev1.URISchemeHTTP
	for _, name := range names {
		env, err := containerEnv(c, map[string]string{"metadata.name": name, "metadata.namespace": namespace})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		cfg, err := config.Load("", env, nil)
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if cfg.ID != name {
			t.Errorf("pod %s: node id %q, want the pod's name", name, cfg.ID)
		}
		if want := fmt.Sprintf("%s.%s:%d", name, domain, ports["api"]); cfg.APIAddr != want {
			t.Errorf("pod %s: api_addr %q, want %q", name, cfg.APIAddr, want)
		}
		if want := fmt.Sprintf("%s.%s:%d", name, domain, ports["raft"]); cfg.RaftAddr != want {
			t.Errorf("pod %s: raft_addr %q, want %q", name, cfg.RaftAddr, want)
		}
		var ids []string
		for _, p := range cfg.Bootstrap {
			ids = append(ids, p.ID)
			if want := fmt.Sprintf("%s.%s:%d", p.ID, domain, ports["api"]); p.APIAddr != want {
				t.Errorf("pod %s: bootstrap entry %s has api_addr %q, want %q", name, p.ID, p.APIAddr, want)
			}
			if want := fmt.Sprintf("%s.%s:%d", p.ID, domain, ports["raft"]); p.RaftAddr != want {
				t.Errorf("pod %s: bootstrap entry %s has raft_addr %q, want %q", name, p.ID, p.RaftAddr, want)
			}
		}
		if !slices.Equal(ids, names) {
			t.Errorf("pod %s: bootstrap ids %v, want the pods' names %v", name, ids, names)
		}
		checkTLSFromSecret(t, name, cfg, c, pod.Spec.Volumes)
		checkDataDir(t, name, cfg.DataDir, c, sts.Spec.VolumeClaimTemplates)
		if cfg.ClientTLS().Enabled() {
			scheme = corev1.URISchemeHTTPS
		}
	}

	checkProbe(t, "liveness", c.LivenessProbe, "/livez", scheme)
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz", scheme)
}

func fmtReplicas(r *int32) string {
	if r == nil {
		return "unset"
	}
	return fmt.Sprint(*r)
}

// selects reports whether a label selector's matchLabels all hold on labels.
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

// containerEnv is the environment Kubernetes gives container c: each
// variable in order, its value's $(NAME) references replaced by variables
// defined before it and $$ by $, valueFrom fieldRef taken from fields. A
// reference to an undefined variable, which Kubernetes would leave as
// written, is an error here: in these manifests it can only be a typo.
func containerEnv(c corev1.Container, fields map[string]string) ([]string, error) {
	vars := map[string]string{}
	var env []string
	ref := regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			f, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				return nil, fmt.Errorf("env %s: fieldRef %s not simulated", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			v = f
		case e.ValueFrom != nil:
			return nil, fmt.Errorf("env %s: valueFrom other than fieldRef not simulated", e.Name)
		default:
			var bad error
			v = ref.ReplaceAllStringFunc(v, func(m string) string {
				if m == "$$" {
					return "$"
				}
				name := m[2 : len(m)-1]
				val, ok := vars[name]
				if !ok {
					bad = fmt.Errorf("env %s: $(%s) is not defined before it", e.Name, name)
				}
				return val
			})
			if bad != nil {
				return nil, bad
			}
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

// checkTLSFromSecret checks that client API TLS and peer mutual TLS are on
// and that every file they name is a key of a Secret volume mounted
// read-only into the container.
func checkTLSFromSecret(t *testing.T, pod string, cfg config.Config, c corev1.Container, volumes []corev1.Volume) {
	t.Helper()
	if !cfg.ClientTLS().Enabled() || !cfg.PeerTLS().Enabled() {
		t.Errorf("pod %s: client TLS %v, peer TLS %v: want both on", pod, cfg.ClientTLS().Enabled(), cfg.PeerTLS().Enabled())
		return
	}
	secrets := map[string]*corev1.SecretVolumeSource{}
	for _, v := range volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret
		}
	}
	for _, f := range []string{cfg.CertFile, cfg.KeyFile, cfg.TrustedCAFile, cfg.PeerCertFile, cfg.PeerKeyFile, cfg.PeerTrustedCAFile} {
		if f == "" {
			continue
		}
		found := false
		for _, vm := range c.VolumeMounts {
			s, ok := secrets[vm.Name]
			if !ok || filepath.Dir(f) != filepath.Clean(vm.MountPath) {
				continue
			}
			if !vm.ReadOnly {
				t.Errorf("pod %s: Secret volume %s mounted writable", pod, vm.Name)
			}
			// With items, only the listed keys appear as files.
			if len(s.Items) > 0 && !slices.ContainsFunc(s.Items, func(k corev1.KeyToPath) bool { return k.Path == filepath.Base(f) }) {
				t.Errorf("pod %s: %s is not among Secret %s's items", pod, f, s.SecretName)
			}
			found = true
		}
		if !found {
			t.Errorf("pod %s: TLS file %s is not in a mounted Secret", pod, f)
		}
	}
}

// checkDataDir checks that the data dir is a subdirectory of a volume from
// the StatefulSet's volumeClaimTemplates, not the volume's root: fsGroup
// makes that root group-writable, and ticketd refuses such a data dir.
func checkDataDir(t *testing.T, pod, dataDir string, c corev1.Container, claims []corev1.PersistentVolumeClaim) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if !slices.ContainsFunc(claims, func(p corev1.PersistentVolumeClaim) bool { return p.Name == vm.Name }) {
			continue
		}
		if rel, err := filepath.Rel(vm.MountPath, dataDir); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return
		}
	}
	t.Errorf("pod %s: data dir %s is not a subdirectory of a volumeClaimTemplates volume", pod, dataDir)
}

// checkProbe checks an HTTP probe's path, scheme and port (the named API port).
func checkProbe(t *testing.T, kind string, p *corev1.Probe, path string, scheme corev1.URIScheme) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s probe: want httpGet on %s", kind, path)
		return
	}
	g := p.HTTPGet
	if g.Path != path {
		t.Errorf("%s probe path %q, want %q", kind, g.Path, path)
	}
	if g.Port != intstr.FromString("api") {
		t.Errorf("%s probe port %v, want the api port", kind, g.Port)
	}
	if g.Scheme != scheme {
		t.Errorf("%s probe scheme %q, want %q (the API's TLS)", kind, g.Scheme, scheme)
	}
}
