// Package kubernetes_test checks the manifests of deploy/kubernetes (spec
// section 16): every YAML document decodes into the fields of the
// Kubernetes API it uses (an unknown or misspelt field fails), and the
// replicas, probes, ports, security context, volumes and the ConfigMap's
// nxdns.toml agree with each other, with the image (internal/release) and
// with nxdnsd's own configuration package. No cluster is needed.
package kubernetes_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/release"
)

// The subset of the Kubernetes API that the manifests use, named as the
// API names it (k8s.io/api). Decoding is strict: a field not declared
// here is an error, so a typo in a manifest ("readinesProbe") cannot pass
// as a field Kubernetes would silently drop on an old cluster.

type meta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type header struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

type configMap struct {
	header   `yaml:",inline"`
	Metadata meta              `yaml:"metadata"`
	Data     map[string]string `yaml:"data"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type deployment struct {
	header   `yaml:",inline"`
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		Replicas *int          `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Strategy struct {
			Type          string `yaml:"type"`
			RollingUpdate struct {
				MaxSurge       yaml.Node `yaml:"maxSurge"`
				MaxUnavailable yaml.Node `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	AutomountServiceAccountToken  *bool `yaml:"automountServiceAccountToken"`
	EnableServiceLinks            *bool `yaml:"enableServiceLinks"`
	TerminationGracePeriodSeconds *int  `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
		RunAsUser      *int64 `yaml:"runAsUser"`
		RunAsGroup     *int64 `yaml:"runAsGroup"`
		FSGroup        *int64 `yaml:"fsGroup"`
		SeccompProfile struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
		Sysctls []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"sysctls"`
	} `yaml:"securityContext"`
	TopologySpreadConstraints []struct {
		MaxSkew           int           `yaml:"maxSkew"`
		TopologyKey       string        `yaml:"topologyKey"`
		WhenUnsatisfiable string        `yaml:"whenUnsatisfiable"`
		LabelSelector     labelSelector `yaml:"labelSelector"`
	} `yaml:"topologySpreadConstraints"`
	Containers []container `yaml:"containers"`
	Volumes    []volume    `yaml:"volumes"`
}

type container struct {
	Name            string   `yaml:"name"`
	Image           string   `yaml:"image"`
	ImagePullPolicy string   `yaml:"imagePullPolicy"`
	Command         []string `yaml:"command"`
	Args            []string `yaml:"args"`
	Env             []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
		Protocol      string `yaml:"protocol"`
	} `yaml:"ports"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Privileged               *bool `yaml:"privileged"`
		Capabilities             struct {
			Add  []string `yaml:"add"`
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path   string    `yaml:"path"`
		Port   yaml.Node `yaml:"port"` // a number or a port's name
		Scheme string    `yaml:"scheme"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	TimeoutSeconds   int `yaml:"timeoutSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	EmptyDir *struct {
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
}

type service struct {
	header   `yaml:",inline"`
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		Type                  string            `yaml:"type"`
		ExternalTrafficPolicy string            `yaml:"externalTrafficPolicy"`
		Selector              map[string]string `yaml:"selector"`
		Ports                 []struct {
			Name       string    `yaml:"name"`
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
			Protocol   string    `yaml:"protocol"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type podDisruptionBudget struct {
	header   `yaml:",inline"`
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		MinAvailable *int          `yaml:"minAvailable"`
		Selector     labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

// manifests is what the directory's YAML files hold: one object of each
// kind.
type manifests struct {
	configMap  *configMap
	deployment *deployment
	service    *service
	pdb        *podDisruptionBudget
}

// The files of deploy/kubernetes, by name (what `kubectl apply -f` takes:
// .yaml, .yml and .json).
func readFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	names, err := filepath.Glob("*.y*ml")
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		files[name] = b
	}
	if len(files) == 0 {
		tb.Fatal("no manifests in deploy/kubernetes")
	}
	return files
}

// decode decodes every document of every file strictly into its kind.
func decode(files map[string][]byte) (manifests, []string) {
	var m manifests
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		dec := yaml.NewDecoder(bytes.NewReader(files[name]))
		for i := 0; ; i++ {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				bad("%s: document %d: %v", name, i, err)
				break
			}
			var h header
			if err := doc.Decode(&h); err != nil {
				bad("%s: document %d: %v", name, i, err)
				continue
			}
			where := fmt.Sprintf("%s: %s", name, h.Kind)
			var obj any
			var wantAPI string
			switch h.Kind {
			case "ConfigMap":
				obj, wantAPI = &configMap{}, "v1"
			case "Deployment":
				obj, wantAPI = &deployment{}, "apps/v1"
			case "Service":
				obj, wantAPI = &service{}, "v1"
			case "PodDisruptionBudget":
				obj, wantAPI = &podDisruptionBudget{}, "policy/v1"
			default:
				bad("%s: document %d: kind %q is not one the manifests are meant to hold", name, i, h.Kind)
				continue
			}
			if h.APIVersion != wantAPI {
				bad("%s: apiVersion %q, want %q", where, h.APIVersion, wantAPI)
			}
			if err := strictDecode(&doc, obj); err != nil {
				bad("%s: %v", where, err)
				continue
			}
			var dup bool
			switch o := obj.(type) {
			case *configMap:
				dup, m.configMap = m.configMap != nil, o
			case *deployment:
				dup, m.deployment = m.deployment != nil, o
			case *service:
				dup, m.service = m.service != nil, o
			case *podDisruptionBudget:
				dup, m.pdb = m.pdb != nil, o
			}
			if dup {
				bad("%s: a second %s", where, h.Kind)
			}
		}
	}
	if m.configMap == nil || m.deployment == nil || m.service == nil || m.pdb == nil {
		bad("want one ConfigMap, Deployment, Service and PodDisruptionBudget; have %v %v %v %v",
			m.configMap != nil, m.deployment != nil, m.service != nil, m.pdb != nil)
	}
	return m, problems
}

// strictDecode decodes doc into obj, refusing fields obj does not have
// (yaml.Node.Decode has no such option; a Decoder does).
func strictDecode(doc *yaml.Node, obj any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(obj)
}

// check returns every way the manifests fall short; none is the goal.
func check(files map[string][]byte) []string {
	m, problems := decode(files)
	if len(problems) > 0 {
		return problems
	}
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	d := m.deployment
	pod := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		bad("Deployment: replicas %v, want 2", deref(d.Spec.Replicas))
	}
	if d.Spec.Strategy.RollingUpdate.MaxUnavailable.Value != "0" {
		bad("Deployment: rollingUpdate.maxUnavailable %q, want 0: a rollout must never leave fewer than two replicas serving",
			d.Spec.Strategy.RollingUpdate.MaxUnavailable.Value)
	}
	labels := d.Spec.Template.Metadata.Labels
	if len(d.Spec.Selector.MatchLabels) == 0 || !subset(d.Spec.Selector.MatchLabels, labels) {
		bad("Deployment: selector %v does not select the pod template's labels %v", d.Spec.Selector.MatchLabels, labels)
	}
	if len(m.service.Spec.Selector) == 0 || !subset(m.service.Spec.Selector, labels) {
		bad("Service: selector %v does not select the Deployment's pods %v", m.service.Spec.Selector, labels)
	}
	if len(m.pdb.Spec.Selector.MatchLabels) == 0 || !subset(m.pdb.Spec.Selector.MatchLabels, labels) {
		bad("PodDisruptionBudget: selector %v does not select the Deployment's pods %v", m.pdb.Spec.Selector.MatchLabels, labels)
	}
	if m.pdb.Spec.MinAvailable == nil || *m.pdb.Spec.MinAvailable < 1 || *m.pdb.Spec.MinAvailable >= 2 {
		bad("PodDisruptionBudget: minAvailable %v, want 1 of the 2 replicas", deref(m.pdb.Spec.MinAvailable))
	}
	if len(pod.Containers) != 1 {
		bad("Deployment: %d containers, want nxdnsd alone", len(pod.Containers))
		return problems
	}
	c := pod.Containers[0]

	// The image and how it is started.
	if want := release.ImageRef("VERSION"); c.Image != want {
		bad("container: image %q, want %q (docs/fleet.md replaces VERSION)", c.Image, want)
	}
	if len(c.Command) != 0 {
		bad("container: command %q: the image's entrypoint is /%s", c.Command, release.ImageBinary)
	}
	cfgPath := "/" + release.ImageConfig // the image's own -c
	if len(c.Args) > 0 {
		if len(c.Args) != 2 || c.Args[0] != "-c" {
			bad("container: args %q, want [-c PATH]", c.Args)
		} else {
			cfgPath = c.Args[1]
		}
	}

	// Security: the pod's and the container's contexts together.
	sc, psc := c.SecurityContext, pod.SecurityContext
	if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
		bad("securityContext: runAsNonRoot is not true")
	}
	if psc.RunAsUser == nil || *psc.RunAsUser != release.ImageUID {
		bad("pod securityContext: runAsUser %v, want the image's user %d", deref(psc.RunAsUser), release.ImageUID)
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		bad("container securityContext: readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad("container securityContext: allowPrivilegeEscalation is not false")
	}
	if isTrue(sc.Privileged) {
		bad("container securityContext: privileged")
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		bad("container securityContext: capabilities.drop %q, want ALL", sc.Capabilities.Drop)
	}
	for _, capa := range sc.Capabilities.Add {
		if capa != "NET_BIND_SERVICE" {
			bad("container securityContext: capabilities.add %q: NET_BIND_SERVICE is the only one allowed", capa)
		}
	}
	unprivStart := 1024 // net.ipv4.ip_unprivileged_port_start
	for _, s := range psc.Sysctls {
		if s.Name == "net.ipv4.ip_unprivileged_port_start" {
			if n, err := strconv.Atoi(s.Value); err == nil {
				unprivStart = n
			}
		}
	}
	for _, p := range c.Ports {
		// A capability added for a non-root user stays in the bounding
		// set only: it does not let the process bind.
		if p.ContainerPort < unprivStart {
			bad("container port %s %d: a non-root process cannot bind a port below %d (capabilities.add does not reach it)",
				p.Name, p.ContainerPort, unprivStart)
		}
	}

	// The configuration: mounted whole from the ConfigMap, valid for
	// nxdnsd itself.
	mounts := map[string]string{} // mount path → volume name
	writable := map[string]bool{} // mount paths of emptyDir volumes
	sizeMiB := map[string]int{}   // mount path → the emptyDir's sizeLimit in MiB, when it has one
	volumes := map[string]volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	var doc []byte
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			bad("volumeMount %s: no such volume", vm.Name)
			continue
		}
		mounts[vm.MountPath] = vm.Name
		switch {
		case v.ConfigMap != nil:
			if vm.SubPath != "" {
				bad("volumeMount %s: subPath %q: a subPath mount never sees the ConfigMap's updates", vm.Name, vm.SubPath)
			}
			if v.ConfigMap.Name != m.configMap.Metadata.Name {
				bad("volume %s: ConfigMap %q, the manifests' is %q", v.Name, v.ConfigMap.Name, m.configMap.Metadata.Name)
				continue
			}
			if path.Dir(cfgPath) == vm.MountPath {
				data, ok := m.configMap.Data[path.Base(cfgPath)]
				if !ok {
					bad("ConfigMap: no key %q for %s", path.Base(cfgPath), cfgPath)
				}
				doc = []byte(data)
			}
		case v.EmptyDir != nil:
			if !vm.ReadOnly {
				writable[vm.MountPath] = true
			}
			if v.EmptyDir.SizeLimit != "" {
				n, err := mebibytes(v.EmptyDir.SizeLimit)
				if err != nil {
					bad("volume %s: sizeLimit: %v", v.Name, err)
				}
				sizeMiB[vm.MountPath] = n
			}
		}
	}
	if doc == nil {
		bad("the configuration %s is on no mount of the ConfigMap (mounts %v)", cfgPath, mounts)
		return problems
	}
	cfg, err := config.Parse(doc)
	if err != nil {
		bad("ConfigMap: nxdns.toml: %v", err)
		return problems
	}

	// Where nxdnsd writes must be on an emptyDir: the root is read-only.
	for key, p := range writtenPaths(doc, cfg) {
		if !under(p, writable) {
			bad("nxdns.toml: %s = %q is on no writable emptyDir mount (writable: %v)", key, p, keys(writable))
		}
	}

	// A history file on an emptyDir fits it twice over (its write-ahead
	// log and the saved cache beside it): past sizeLimit the kubelet
	// evicts the pod.
	if cfg.History.Enabled && cfg.History.Path != "" {
		dir := path.Dir(path.Clean(cfg.History.Path))
		if limit, ok := sizeMiB[dir]; ok && 2*cfg.History.MaxMiB > limit {
			bad("nxdns.toml: history.max_mib = %d does not fit twice in the emptyDir %s (sizeLimit %d Mi)", cfg.History.MaxMiB, dir, limit)
		}
	}

	// Ports: DNS on every listen address's port, the admin API reachable
	// from the node (the kubelet's probes).
	containerPort := func(n yaml.Node, proto string) (int, bool) {
		for _, p := range c.Ports {
			if p.Protocol == "" {
				p.Protocol = "TCP"
			}
			if p.Protocol == proto && (n.Value == p.Name || n.Value == strconv.Itoa(p.ContainerPort)) {
				return p.ContainerPort, true
			}
		}
		return 0, false
	}
	listenPorts := map[int]bool{}
	for _, l := range cfg.Server.Listen {
		ap, err := netip.ParseAddrPort(l)
		if err != nil {
			bad("server.listen %q: %v", l, err)
			continue
		}
		listenPorts[int(ap.Port())] = true
	}
	admin, err := netip.ParseAddrPort(cfg.Admin.Listen)
	if err != nil {
		bad("admin.listen %q: %v", cfg.Admin.Listen, err)
		return problems
	}
	if !admin.Addr().IsUnspecified() {
		bad("admin.listen %q: want 0.0.0.0 or [::], which the kubelet can reach on the pod's address", cfg.Admin.Listen)
	}
	for name, pr := range map[string]*probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		switch {
		case pr == nil || pr.HTTPGet == nil:
			bad("%s: want an httpGet", name)
		case pr.HTTPGet.Path != "/livez":
			// Not /readyz, not even for readiness: spec section 16.
			bad("%s: path %q, want /livez", name, pr.HTTPGet.Path)
		case pr.HTTPGet.Scheme != "" && pr.HTTPGet.Scheme != "HTTP":
			bad("%s: scheme %q: the admin API is plain HTTP", name, pr.HTTPGet.Scheme)
		default:
			if p, ok := containerPort(pr.HTTPGet.Port, "TCP"); !ok || p != int(admin.Port()) {
				bad("%s: port %q is not admin.listen's port %d", name, pr.HTTPGet.Port.Value, admin.Port())
			}
		}
	}
	served := map[string]bool{}
	for _, p := range m.service.Spec.Ports {
		target, ok := containerPort(p.TargetPort, p.Protocol)
		switch {
		case !ok:
			bad("Service port %s: targetPort %q is no %s port of the container", p.Name, p.TargetPort.Value, p.Protocol)
		case target == int(admin.Port()):
			bad("Service port %s: the admin port %d is in the DNS Service", p.Name, target)
		case !listenPorts[target]:
			bad("Service port %s: targetPort %d is no port of server.listen %q", p.Name, target, cfg.Server.Listen)
		default:
			served[fmt.Sprintf("%d/%s", p.Port, p.Protocol)] = true
		}
	}
	for _, want := range []string{"53/UDP", "53/TCP"} {
		if !served[want] {
			bad("Service: no port %s to nxdnsd's listeners", want)
		}
	}

	// Resources: requests and limits, the Go runtime's limit below the
	// container's.
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" || c.Resources.Limits[r] == "" {
			bad("resources: want requests and limits for %s", r)
		}
	}
	req, err1 := mebibytes(c.Resources.Requests["memory"])
	lim, err2 := mebibytes(c.Resources.Limits["memory"])
	if err := errors.Join(err1, err2); err != nil {
		bad("resources: %v", err)
	} else if req > lim {
		bad("resources: memory request %d Mi above the limit %d Mi", req, lim)
	}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			if soft, err := mebibytes(strings.TrimSuffix(e.Value, "B")); err != nil || soft >= lim {
				bad("GOMEMLIMIT %q: want it below the memory limit %d Mi", e.Value, lim)
			}
		}
	}
	return problems
}

// writtenPaths are the files nxdnsd writes by the configuration, by TOML
// key: cache.path and query_log.path from the parsed configuration, and
// from the raw document, when it sets them, history.path (the query
// history, spec section 12) and a file in blocking.state_dir (section
// 11), which come with those parts of nxdnsd.
func writtenPaths(doc []byte, cfg *config.Config) map[string]string {
	paths := map[string]string{}
	if cfg.Cache.Path != "" {
		paths["cache.path"] = cfg.Cache.Path
	}
	if p := cfg.QueryLog.Path; p != "" && p != "-" {
		paths["query_log.path"] = p
	}
	var raw struct {
		History struct {
			Path string `toml:"path"`
		} `toml:"history"`
		Blocking struct {
			StateDir string `toml:"state_dir"`
		} `toml:"blocking"`
	}
	if _, err := toml.Decode(string(doc), &raw); err == nil {
		if raw.History.Path != "" {
			paths["history.path"] = raw.History.Path
		}
		if raw.Blocking.StateDir != "" {
			paths["blocking.state_dir"] = path.Join(raw.Blocking.StateDir, "list")
		}
	}
	return paths
}

// under reports whether file p is inside one of dirs.
func under(p string, dirs map[string]bool) bool {
	for dir := path.Dir(path.Clean(p)); ; dir = path.Dir(dir) {
		if dirs[dir] {
			return true
		}
		if dir == "/" || dir == "." {
			return false
		}
	}
}

// mebibytes parses a Kubernetes quantity in Mi or Gi, the forms the
// manifests use.
func mebibytes(q string) (int, error) {
	for suffix, factor := range map[string]int{"Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.Atoi(n)
			if err == nil && v > 0 {
				return v * factor, nil
			}
		}
	}
	return 0, fmt.Errorf("memory %q: want a number of Mi or Gi", q)
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func isTrue(b *bool) bool { return b != nil && *b }

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func keys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestManifests(t *testing.T) {
	t.Parallel()
	for _, p := range check(readFiles(t)) {
		t.Error(p)
	}
}

// Each check fails on the manifests made wrong the way it is meant to
// catch: a check that cannot fail proves nothing.
func TestManifestsMutants(t *testing.T) {
	t.Parallel()
	files := readFiles(t)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"three replicas", "deployment.yaml", "replicas: 2", "replicas: 3", "replicas 3, want 2"},
		{"a misspelt field", "deployment.yaml", "readinessProbe:", "readinesProbe:", "field readinesProbe not found"},
		{"readiness on /readyz", "deployment.yaml", "readinessProbe:\n            httpGet:\n              path: /livez",
			"readinessProbe:\n            httpGet:\n              path: /readyz", "readinessProbe: path \"/readyz\", want /livez"},
		{"liveness on another port", "deployment.yaml", "livenessProbe:\n            httpGet:\n              path: /livez\n              port: admin",
			"livenessProbe:\n            httpGet:\n              path: /livez\n              port: dns-tcp", "livenessProbe: port \"dns-tcp\" is not admin.listen's port 8053"},
		{"root may run it", "deployment.yaml", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot is not true"},
		{"a writable root", "deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem is not true"},
		{"privilege escalation", "deployment.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation is not false"},
		{"capabilities kept", "deployment.yaml", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "capabilities.drop [\"NET_RAW\"], want ALL"},
		{"another capability", "deployment.yaml", `drop: ["ALL"]`, `drop: ["ALL"]` + "\n              add: [\"NET_ADMIN\"]", "NET_BIND_SERVICE is the only one allowed"},
		{"port 53 in the pod", "deployment.yaml", "containerPort: 1053\n              protocol: UDP", "containerPort: 53\n              protocol: UDP", "cannot bind a port below 1024"},
		{"no TCP in the Service", "service.yaml", "protocol: TCP", "protocol: UDP", "no port 53/TCP"},
		{"the Service on the admin port", "service.yaml", "targetPort: dns-tcp", "targetPort: admin", "the admin port 8053 is in the DNS Service"},
		{"the Service to no container port", "service.yaml", "targetPort: dns-udp", "targetPort: 5353", "targetPort \"5353\" is no UDP port"},
		{"an invalid configuration", "configmap.yaml", `ip = "9.9.9.9"`, `ip = "9.9.9"`, "upstreams[0].ip"},
		{"an unknown key", "configmap.yaml", `name = "quad9"`, `name = "quad9"` + "\n    slot = 3", "upstreams[0].slot"},
		{"the cache on the read-only root", "configmap.yaml", `path = "/var/lib/nxdnsd/cache"`, `path = "/var/cache/nxdnsd/cache"`, "cache.path = \"/var/cache/nxdnsd/cache\" is on no writable emptyDir"},
		{"the query log on the read-only root", "configmap.yaml", "    # [query_log]\n    # path = \"-\"\n", "    [query_log]\n    path = \"/var/log/nxdnsd/queries.json\"\n", "query_log.path"},
		{"the history on the read-only root", "configmap.yaml", `path = "/var/lib/nxdnsd/history.db"`, `path = "/var/cache/nxdnsd/history.db"`, "history.path = \"/var/cache/nxdnsd/history.db\" is on no writable emptyDir"},
		{"the history past the emptyDir", "configmap.yaml", "max_mib = 32", "max_mib = 256", "history.max_mib = 256 does not fit twice in the emptyDir /var/lib/nxdnsd"},
		{"admin on loopback", "configmap.yaml", `listen = "0.0.0.0:8053"`, `listen = "127.0.0.1:8053"`, "want 0.0.0.0 or [::]"},
		{"the DNS port elsewhere", "configmap.yaml", `listen = ["0.0.0.0:1053"]`, `listen = ["0.0.0.0:1054"]`, "targetPort 1053 is no port of server.listen"},
		{"the ConfigMap on a subPath", "deployment.yaml", "mountPath: /etc/nxdnsd\n", "mountPath: /etc/nxdnsd\n              subPath: nxdns.toml\n", "never sees the ConfigMap's updates"},
		{"a rollout down to one", "deployment.yaml", "maxUnavailable: 0", "maxUnavailable: 1", "maxUnavailable \"1\", want 0"},
		{"the Go limit at the container's", "deployment.yaml", "value: 160MiB", "value: 192MiB", "GOMEMLIMIT \"192MiB\""},
		{"a Service selecting nothing", "service.yaml", "selector:\n    app.kubernetes.io/name: nxdnsd", "selector:\n    app.kubernetes.io/name: other", "Service: selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutant := map[string][]byte{}
			for name, b := range files {
				mutant[name] = b
			}
			if !bytes.Contains(files[tc.file], []byte(tc.old)) {
				t.Fatalf("%s has no %q: update the mutant", tc.file, tc.old)
			}
			mutant[tc.file] = bytes.ReplaceAll(files[tc.file], []byte(tc.old), []byte(tc.new))
			problems := check(mutant)
			if len(problems) == 0 {
				t.Fatalf("no problem found")
			}
			for _, p := range problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("no problem names %q; got:\n%s", tc.want, strings.Join(problems, "\n"))
		})
	}
}

// history.path and blocking.state_dir (spec sections 12 and 11) count as
// written once a document sets them, before the configuration package
// knows the keys; standard output is no file.
func TestWrittenPaths(t *testing.T) {
	t.Parallel()
	doc := []byte("[history]\npath = \"/var/lib/nxdnsd/history.db\"\n[query_log]\npath = \"-\"\n[blocking]\nstate_dir = \"/var/lib/nxdnsd/lists\"\n")
	cfg := &config.Config{Cache: config.Cache{Path: "/var/lib/nxdnsd/cache"}, QueryLog: config.QueryLog{Path: "-"}}
	got := writtenPaths(doc, cfg)
	want := map[string]string{"cache.path": "/var/lib/nxdnsd/cache", "history.path": "/var/lib/nxdnsd/history.db",
		"blocking.state_dir": "/var/lib/nxdnsd/lists/list"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("writtenPaths = %v, want %v (standard output is no file)", got, want)
	}
	dirs := map[string]bool{"/var/lib/nxdnsd": true}
	for p, want := range map[string]bool{
		"/var/lib/nxdnsd/cache": true, "/var/lib/nxdnsd/sub/h.db": true,
		"/var/lib/cache": false, "/var/lib/nxdnsd": false, "/tmp/x": false, "relative": false,
	} {
		if under(p, dirs) != want {
			t.Errorf("under(%q) = %v, want %v", p, !want, want)
		}
	}
}

// docs/fleet.md's YAML snippets parse, and its NetworkPolicy lets in the
// ports the container listens on: DNS from anywhere, the admin port from
// the monitoring namespace.
func TestFleetDocSnippets(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	m, problems := decode(readFiles(t))
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	want := map[string]bool{} // port/protocol of the container
	for _, p := range m.deployment.Spec.Template.Spec.Containers[0].Ports {
		want[fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol)] = true
	}
	var blocks, policies int
	for rest := string(text); ; {
		_, after, ok := strings.Cut(rest, "```yaml\n")
		if !ok {
			break
		}
		block, after, _ := strings.Cut(after, "```")
		rest = after
		blocks++
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Ingress []struct {
					Ports []struct {
						Port     int    `yaml:"port"`
						Protocol string `yaml:"protocol"`
					} `yaml:"ports"`
				} `yaml:"ingress"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
			t.Errorf("docs/fleet.md: a yaml block does not parse: %v\n%s", err, block)
			continue
		}
		if doc.Kind != "NetworkPolicy" {
			continue
		}
		policies++
		got := map[string]bool{}
		for _, rule := range doc.Spec.Ingress {
			for _, p := range rule.Ports {
				got[fmt.Sprintf("%d/%s", p.Port, p.Protocol)] = true
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("docs/fleet.md: the NetworkPolicy lets in %v, the container listens on %v", keys(got), keys(want))
		}
	}
	if blocks < 3 || policies != 1 {
		t.Errorf("docs/fleet.md: %d yaml blocks, %d NetworkPolicy; want the Service, sidecar and NetworkPolicy snippets", blocks, policies)
	}
}
