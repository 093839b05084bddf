package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	composecli "github.com/compose-spec/compose-go/v2/cli"
	"github.com/coreos/go-systemd/v22/unit"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/nerflow/nerflow/internal/cli"
	"github.com/nerflow/nerflow/internal/config"
	"github.com/nerflow/nerflow/internal/metrics"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/workers"
)

// command is a nerflow command line found in a deployment file, parsed by
// this binary's commands.
type command struct {
	cmd *cobra.Command
	// worker lines: what the pool starts, and how long it drains.
	plan  []engine.WorkerOptions
	grace time.Duration
}

// parseNerflow parses args (without the binary's name) as nerflow would,
// without running anything: the command must exist, its flags and
// arguments must be valid, and a worker's queues and devices must make a
// pool (workers.Plan).
func parseNerflow(t *testing.T, where string, args []string) *command {
	t.Helper()
	root := cli.NewRoot()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Errorf("%s: %q is not a nerflow command (%v)", where, strings.Join(args, " "), err)
		return nil
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: nerflow %s: %v", where, cmd.Name(), err)
		return nil
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Errorf("%s: nerflow %s: %v", where, cmd.Name(), err)
		return nil
	}
	c := &command{cmd: cmd}
	if cmd.Name() != "worker" {
		return c
	}
	f := cmd.Flags()
	queues, _ := f.GetString("queues")
	devices, _ := f.GetString("device")
	n, _ := f.GetInt("concurrency")
	gpuOnCPU, _ := f.GetBool("gpu-on-cpu")
	c.grace, _ = f.GetDuration("shutdown-timeout")
	plan, err := workers.Plan(workers.Config{Queues: strings.Split(queues, ","), Devices: strings.Split(devices, ","),
		Concurrency: n, GPUOnCPU: gpuOnCPU, Name: "w"})
	if err != nil {
		t.Errorf("%s: nerflow worker: %v", where, err)
		return nil
	}
	c.plan = plan
	return c
}

// gpus counts the GPU devices a worker line uses.
func (c *command) gpus() int {
	n := 0
	for _, o := range c.plan {
		if strings.HasPrefix(o.Device, "cuda:") {
			n++
		}
	}
	return n
}

// serves reports whether a worker line serves queue q.
func (c *command) serves(q string) bool {
	for _, o := range c.plan {
		if slices.Contains(o.Queues, q) {
			return true
		}
	}
	return false
}

// documents splits a multi-document YAML file.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// k8sObjects are the decoded objects of deploy/k8s.
type k8sObjects struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	pvcs        map[string]*corev1.PersistentVolumeClaim
	namespaces  map[string]bool
}

// kinds are the Kubernetes objects the manifests may hold.
var kinds = map[string]func() metav1.Object{
	"v1 Namespace":                           func() metav1.Object { return &corev1.Namespace{} },
	"v1 ConfigMap":                           func() metav1.Object { return &corev1.ConfigMap{} },
	"v1 Secret":                              func() metav1.Object { return &corev1.Secret{} },
	"v1 Service":                             func() metav1.Object { return &corev1.Service{} },
	"v1 PersistentVolumeClaim":               func() metav1.Object { return &corev1.PersistentVolumeClaim{} },
	"apps/v1 Deployment":                     func() metav1.Object { return &appsv1.Deployment{} },
	"autoscaling/v2 HorizontalPodAutoscaler": func() metav1.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
}

// decodeK8s decodes every document of the manifests strictly into its
// Kubernetes API type: an unknown or misspelled field, a duplicate key or a
// value of the wrong type is an error.
func decodeK8s(t *testing.T) *k8sObjects {
	t.Helper()
	o := &k8sObjects{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, pvcs: map[string]*corev1.PersistentVolumeClaim{},
		namespaces: map[string]bool{}}
	files, _ := filepath.Glob("k8s/*.yaml")
	if len(files) < 5 {
		t.Fatalf("k8s manifests: %v", files)
	}
	for _, f := range files {
		for i, doc := range documents(t, f) {
			where := fmt.Sprintf("%s (document %d)", f, i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			newObj, ok := kinds[tm.APIVersion+" "+tm.Kind]
			if !ok {
				t.Errorf("%s: unexpected kind %s %s", where, tm.APIVersion, tm.Kind)
				continue
			}
			obj := newObj()
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if obj.GetName() == "" {
				t.Errorf("%s: no metadata.name", where)
			}
			if tm.Kind != "Namespace" && obj.GetNamespace() != "nerflow" {
				t.Errorf("%s: %s %s is in namespace %q, want nerflow", where, tm.Kind, obj.GetName(), obj.GetNamespace())
			}
			switch v := obj.(type) {
			case *corev1.Namespace:
				o.namespaces[v.Name] = true
			case *corev1.ConfigMap:
				o.configMaps[v.Name] = v
			case *corev1.Secret:
				o.secrets[v.Name] = v
			case *corev1.Service:
				o.services[v.Name] = v
			case *corev1.PersistentVolumeClaim:
				o.pvcs[v.Name] = v
			case *appsv1.Deployment:
				o.deployments[v.Name] = v
			case *autoscalingv2.HorizontalPodAutoscaler:
				o.hpas[v.Name] = v
			}
		}
	}
	return o
}

func TestKubernetes(t *testing.T) {
	o := decodeK8s(t)
	if !o.namespaces["nerflow"] {
		t.Error("no Namespace nerflow")
	}
	// The shared configuration is a valid nerflow.yaml.
	cm, ok := o.configMaps["nerflow"]
	if !ok {
		t.Fatal("no ConfigMap nerflow")
	}
	checkConfig(t, "k8s ConfigMap nerflow", cm.Data["nerflow.yaml"])

	roles := map[string]int{}
	workerCmds := map[string]*command{}
	for name, d := range o.deployments {
		where := "Deployment " + name
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: selector %v does not match its pod labels %v (%v)", where, d.Spec.Selector, d.Spec.Template.Labels, err)
		}
		pod := d.Spec.Template.Spec
		for _, v := range pod.Volumes {
			if v.ConfigMap != nil && o.configMaps[v.ConfigMap.Name] == nil && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional) {
				t.Errorf("%s: volume %s names ConfigMap %s, which is not defined", where, v.Name, v.ConfigMap.Name)
			}
			if v.PersistentVolumeClaim != nil && o.pvcs[v.PersistentVolumeClaim.ClaimName] == nil {
				t.Errorf("%s: volume %s names claim %s, which is not defined", where, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
		for _, c := range pod.Containers {
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil && o.secrets[ef.SecretRef.Name] == nil {
					t.Errorf("%s: envFrom names Secret %s, which is not defined", where, ef.SecretRef.Name)
				}
			}
			gpuLimit := c.Resources.Limits["nvidia.com/gpu"]
			if !strings.HasPrefix(c.Image, "nerflow") {
				if !gpuLimit.IsZero() {
					t.Errorf("%s: %s requests a GPU", where, c.Name)
				}
				continue
			}
			cmd := parseNerflow(t, where, c.Args)
			if cmd == nil {
				continue
			}
			roles[cmd.cmd.Name()]++
			if cmd.cmd.Name() != "worker" {
				continue
			}
			workerCmds[name] = cmd
			// A GPU worker holds the GPUs its devices name, and only those.
			if int(gpuLimit.Value()) != cmd.gpus() {
				t.Errorf("%s: the worker uses %d GPU(s) but the container is limited to %s nvidia.com/gpu", where, cmd.gpus(), gpuLimit.String())
			}
			if cmd.gpus() > 0 && !slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == "nvidia.com/gpu" }) {
				t.Errorf("%s: a GPU worker without the nvidia.com/gpu toleration", where)
			}
			if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= cmd.grace {
				t.Errorf("%s: terminationGracePeriodSeconds must exceed --shutdown-timeout %s, or draining is cut short", where, cmd.grace)
			}
		}
	}
	for _, role := range []string{"worker", "serve", "scheduler"} {
		if roles[role] == 0 {
			t.Errorf("no Deployment runs nerflow %s", role)
		}
	}
	if roles["worker"] < 2 {
		t.Errorf("want a CPU and a GPU worker pool, got %d pools", roles["worker"])
	}
	gpuPool := false
	for _, c := range workerCmds {
		gpuPool = gpuPool || c.gpus() > 0
	}
	if !gpuPool {
		t.Error("no worker pool requests nvidia.com/gpu")
	}

	for name, s := range o.services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		found := false
		for _, d := range o.deployments {
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			found = true
			for _, p := range s.Spec.Ports {
				if p.TargetPort.StrVal == "" {
					continue
				}
				named := false
				for _, c := range d.Spec.Template.Spec.Containers {
					named = named || slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.StrVal })
				}
				if !named {
					t.Errorf("Service %s: target port %q is not a port of Deployment %s", name, p.TargetPort.StrVal, d.Name)
				}
			}
		}
		if !found {
			t.Errorf("Service %s selects no Deployment's pods", name)
		}
	}

	// Every worker pool scales on the depth of a queue it serves.
	scaled := map[string]bool{}
	for name, h := range o.hpas {
		where := "HorizontalPodAutoscaler " + name
		target := h.Spec.ScaleTargetRef
		cmd := workerCmds[target.Name]
		if target.Kind != "Deployment" || target.APIVersion != "apps/v1" || cmd == nil {
			t.Errorf("%s: scales %s %s, not a worker Deployment", where, target.Kind, target.Name)
			continue
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			t.Errorf("%s: replicas %v..%d", where, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		for _, m := range h.Spec.Metrics {
			if m.Type != autoscalingv2.ExternalMetricSourceType || m.External == nil || m.External.Metric.Name != metrics.QueueTasks {
				t.Errorf("%s: metric %+v is not the queue depth %s", where, m, metrics.QueueTasks)
				continue
			}
			l := m.External.Metric.Selector.MatchLabels
			if l["state"] != "pending" || !cmd.serves(l["queue"]) {
				t.Errorf("%s: scales %s on queue %q (state %q), which it does not serve", where, target.Name, l["queue"], l["state"])
				continue
			}
			if m.External.Target.Type != autoscalingv2.AverageValueMetricType || m.External.Target.AverageValue == nil {
				t.Errorf("%s: want an AverageValue target (pending nodes per pod)", where)
			}
			scaled[target.Name] = true
		}
	}
	for name := range workerCmds {
		if !scaled[name] {
			t.Errorf("worker Deployment %s does not scale on queue depth", name)
		}
	}
	// The adapter rule that makes the queue depth an external metric.
	rules, ok := o.configMaps["nerflow-adapter-rules"]
	if !ok {
		t.Fatal("no prometheus-adapter rules")
	}
	var adapter struct {
		ExternalRules []struct {
			SeriesQuery string `json:"seriesQuery"`
			Name        struct {
				Matches string `json:"matches"`
				As      string `json:"as"`
			} `json:"name"`
			MetricsQuery string `json:"metricsQuery"`
			Resources    any    `json:"resources"`
		} `json:"externalRules"`
	}
	if err := yaml.UnmarshalStrict([]byte(rules.Data["config.yaml"]), &adapter); err != nil {
		t.Fatalf("adapter rules: %v", err)
	}
	if len(adapter.ExternalRules) != 1 || adapter.ExternalRules[0].Name.As != metrics.QueueTasks ||
		!strings.Contains(adapter.ExternalRules[0].SeriesQuery, metrics.QueueTasks) {
		t.Errorf("adapter rules %+v do not expose %s", adapter, metrics.QueueTasks)
	}
}

// checkConfig loads a nerflow.yaml as nerflow does (unknown keys are
// errors).
func checkConfig(t *testing.T, where, text string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nerflow.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := config.New(p)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	cfg, err := config.Load(v)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if !strings.HasPrefix(cfg.Store, "s3://") || cfg.Redis.Addr == "" {
		t.Errorf("%s: a cluster needs an s3 store and a Redis address, got %q and %q", where, cfg.Store, cfg.Redis.Addr)
	}
}

func loadCompose(t *testing.T, env []string) error {
	t.Helper()
	opts, err := composecli.NewProjectOptions([]string{"docker-compose.yml"}, composecli.WithWorkingDirectory("."),
		composecli.WithEnv(env), composecli.WithProfiles([]string{"gpu", "cli"}), composecli.WithName("nerflow"))
	if err != nil {
		return err
	}
	_, err = opts.LoadProject(context.Background())
	return err
}

func TestCompose(t *testing.T) {
	// The secrets must be given: no default password or token ships.
	if err := loadCompose(t, []string{"MINIO_ROOT_PASSWORD=x"}); err == nil || !strings.Contains(err.Error(), "NERFLOW_SERVE_TOKEN") {
		t.Errorf("compose without NERFLOW_SERVE_TOKEN: %v", err)
	}
	opts, err := composecli.NewProjectOptions([]string{"docker-compose.yml"}, composecli.WithWorkingDirectory("."),
		composecli.WithEnv([]string{"MINIO_ROOT_PASSWORD=secret-1", "NERFLOW_SERVE_TOKEN=token-1"}),
		composecli.WithProfiles([]string{"gpu", "cli"}), composecli.WithName("nerflow"))
	if err != nil {
		t.Fatal(err)
	}
	// LoadProject validates the file against the Compose specification's
	// schema, then interpolates and normalizes it.
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"redis", "minio", "api", "scheduler", "worker-cpu", "worker-gpu", "nerflow"} {
		if _, ok := p.Services[s]; !ok {
			t.Errorf("no service %s", s)
		}
	}
	roles := map[string]int{}
	for name, s := range p.Services {
		if !strings.HasPrefix(s.Image, "nerflow") {
			continue
		}
		where := "compose service " + name
		env := map[string]string{}
		for k, v := range s.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		if host, _, _ := strings.Cut(env["NERFLOW_REDIS_ADDR"], ":"); p.Services[host].Name == "" {
			t.Errorf("%s: NERFLOW_REDIS_ADDR %q is not a service", where, env["NERFLOW_REDIS_ADDR"])
		}
		if !strings.Contains(env["NERFLOW_STORE"], "endpoint=minio:9000") || env["NERFLOW_S3_SECRET_KEY"] != "secret-1" {
			t.Errorf("%s: store %q, secret %q", where, env["NERFLOW_STORE"], env["NERFLOW_S3_SECRET_KEY"])
		}
		if len(s.Command) == 0 {
			continue // the CLI container
		}
		cmd := parseNerflow(t, where, s.Command)
		if cmd == nil {
			continue
		}
		roles[cmd.cmd.Name()]++
		if cmd.cmd.Name() == "serve" && env["NERFLOW_SERVE_TOKEN"] != "token-1" {
			t.Errorf("%s: no NERFLOW_SERVE_TOKEN", where)
		}
		if cmd.cmd.Name() != "worker" {
			continue
		}
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= cmd.grace {
			t.Errorf("%s: stop_grace_period must exceed --shutdown-timeout %s", where, cmd.grace)
		}
		reserved := 0
		if s.Deploy != nil && s.Deploy.Resources.Reservations != nil {
			for _, d := range s.Deploy.Resources.Reservations.Devices {
				if d.Driver == "nvidia" && slices.Contains(d.Capabilities, "gpu") {
					reserved += int(d.Count)
				}
			}
		}
		if reserved != cmd.gpus() {
			t.Errorf("%s: the worker uses %d GPU(s), the service reserves %d", where, cmd.gpus(), reserved)
		}
	}
	if roles["serve"] != 1 || roles["scheduler"] != 1 || roles["worker"] != 2 {
		t.Errorf("roles %v, want an API, a scheduler, a CPU and a GPU worker", roles)
	}
}

// systemd directives the units may use, by section (a typo is an error).
var directives = map[string][]string{
	"Unit":    {"Description", "Documentation", "Wants", "After", "Requires", "Before"},
	"Timer":   {"OnCalendar", "RandomizedDelaySec", "Persistent", "Unit"},
	"Service": {"Type", "User", "Group", "EnvironmentFile", "Environment", "ExecStart", "KillSignal", "TimeoutStopSec", "Restart", "RestartSec", "StateDirectory", "WorkingDirectory", "PrivateTmp", "NoNewPrivileges"},
	"Install": {"WantedBy"},
}

// servers are the units of the servers nerflow needs, for plain machines:
// the program and first argument each runs (Redis with deploy/redis.conf
// installed as /etc/nerflow/redis.conf, MinIO's server).
var servers = map[string][2]string{
	"nerflow-redis.service": {"/usr/bin/redis-server", "/etc/nerflow/redis.conf"},
	"nerflow-minio.service": {"/usr/local/bin/minio", "server"},
}

func TestSystemd(t *testing.T) {
	checkConfig(t, "systemd/nerflow.yaml.example", string(must(os.ReadFile("systemd/nerflow.yaml.example"))))
	// The example settings of the worker instances.
	envFiles, _ := filepath.Glob("systemd/worker-*.env")
	instances := map[string]map[string]string{}
	for _, f := range envFiles {
		instances[strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "worker-"), ".env")] = readEnvFile(t, f)
	}
	if len(instances) < 2 {
		t.Fatalf("want example settings of a CPU and a GPU worker, got %v", envFiles)
	}
	units, _ := filepath.Glob("systemd/*.service")
	roles := map[string]int{}
	gpuWorker := false
	for _, u := range units {
		values, ok := readUnit(t, u, "Timer")
		if !ok {
			continue
		}
		required := []string{"Unit.Description", "Service.ExecStart", "Service.User", "Install.WantedBy"}
		if timer := strings.TrimSuffix(u, ".service") + ".timer"; fileExists(timer) {
			// Started by its timer, not at boot.
			required = required[:3]
			checkTimer(t, timer)
			roles["timer"]++
		}
		for _, req := range required {
			if len(values[req]) != 1 {
				t.Errorf("%s: want one %s, got %q", u, req, values[req])
			}
		}
		for _, ef := range values["Service.EnvironmentFile"] {
			if !filepath.IsAbs(strings.TrimPrefix(ef, "-")) {
				t.Errorf("%s: EnvironmentFile %q is not absolute", u, ef)
			}
		}
		stop, err := time.ParseDuration(strings.TrimSpace(first(values["Service.TimeoutStopSec"])) + "s")
		if err != nil {
			t.Errorf("%s: TimeoutStopSec %q: %v", u, values["Service.TimeoutStopSec"], err)
		}
		exec := strings.Fields(first(values["Service.ExecStart"]))
		if server, ok := servers[filepath.Base(u)]; ok {
			// The Redis and MinIO a plain machine runs for nerflow.
			if len(exec) < 2 || exec[0] != server[0] || exec[1] != server[1] {
				t.Errorf("%s: ExecStart %q, want %s %s ...", u, exec, server[0], server[1])
			}
			roles[filepath.Base(server[0])]++
			continue
		}
		if len(exec) == 0 || exec[0] != "/usr/local/bin/nerflow" {
			t.Errorf("%s: ExecStart %q does not run /usr/local/bin/nerflow", u, exec)
			continue
		}
		// A template unit's command depends on its instance's settings.
		expansions := []map[string]string{{}}
		if strings.Contains(u, "@") {
			expansions = nil
			for _, env := range instances {
				expansions = append(expansions, env)
			}
		}
		for _, env := range expansions {
			var args []string
			for _, a := range exec[1:] {
				if name, ok := strings.CutPrefix(a, "$"); ok {
					val, set := env[name]
					if !set {
						t.Errorf("%s: $%s is set by no instance settings", u, name)
					}
					args = append(args, strings.Fields(val)...)
					continue
				}
				args = append(args, a)
			}
			cmd := parseNerflow(t, u, args)
			if cmd == nil {
				continue
			}
			roles[cmd.cmd.Name()]++
			if cmd.cmd.Name() == "worker" {
				gpuWorker = gpuWorker || cmd.gpus() > 0
				if stop <= cmd.grace {
					t.Errorf("%s: TimeoutStopSec %s must exceed --shutdown-timeout %s", u, stop, cmd.grace)
				}
			}
		}
	}
	if roles["worker"] < 2 || roles["scheduler"] != 1 || roles["serve"] != 1 || roles["gc"] != 1 || roles["timer"] != 1 || !gpuWorker ||
		roles["redis-server"] != 1 || roles["minio"] != 1 {
		t.Errorf("units run %v (GPU worker: %v), want workers (one on a GPU), the scheduler, the API, gc on a timer, Redis and MinIO", roles, gpuWorker)
	}
	timers, _ := filepath.Glob("systemd/*.timer")
	for _, tm := range timers {
		if !fileExists(strings.TrimSuffix(tm, ".timer") + ".service") {
			t.Errorf("%s starts no unit of these files", tm)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// checkTimer parses a timer unit: known directives, a calendar event, and
// enabled by timers.target.
func checkTimer(t *testing.T, path string) {
	t.Helper()
	values, ok := readUnit(t, path, "Service")
	if !ok {
		t.FailNow()
	}
	if cal := values["Timer.OnCalendar"]; len(cal) == 0 || slices.Contains(cal, "") || !slices.Equal(values["Install.WantedBy"], []string{"timers.target"}) {
		t.Errorf("%s: want an OnCalendar and WantedBy=timers.target, got %v", path, values)
	}
}

// readUnit parses a unit file and checks its sections and directives
// against directives, where section other (a service's [Timer], a
// timer's [Service]) does not belong. It returns the values by
// "Section.Name"; ok is false when the file does not parse.
func readUnit(t *testing.T, path, other string) (values map[string][]string, ok bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections, err := unit.DeserializeSections(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil, false
	}
	values = map[string][]string{}
	for _, s := range sections {
		allowed, ok := directives[s.Section]
		if !ok || s.Section == other {
			t.Errorf("%s: unexpected section [%s]", path, s.Section)
			continue
		}
		for _, e := range s.Entries {
			if !slices.Contains(allowed, e.Name) {
				t.Errorf("%s: [%s] %s is not a directive these units use (typo?)", path, s.Section, e.Name)
			}
			values[s.Section+"."+e.Name] = append(values[s.Section+"."+e.Name], e.Value)
		}
	}
	return values, true
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(must(os.ReadFile(path))))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			t.Errorf("%s:%d: want KEY=VALUE", path, line)
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		env[k] = v
	}
	return env
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
