package materialize

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	mzlabels "github.com/materializeinc/orchestratord/pkg/labels"
)

// What a rollout in progress waits for, as the label of
// orchestratord_materialize_rollout_waiting: a fixed set, never a tenant's
// value.
const (
	// WaitingEnvironmentdPod: the new generation's environmentd pod is not
	// running (unschedulable, crash-looping, its image missing, ...).
	WaitingEnvironmentdPod = "environmentd_pod"
	// WaitingClusterdPods: environmentd catches up, and some of its clusterd
	// replica pods are not Ready.
	WaitingClusterdPods = "clusterd_pods"
	// WaitingHydration: every clusterd pod is Ready; environmentd waits for
	// their dataflows to hydrate.
	WaitingHydration = "hydration"
	// WaitingEnvironmentd: environmentd's pod is Ready; it has not answered
	// the leader API yet, or is promoting.
	WaitingEnvironmentd = "environmentd"
)

var waitingKinds = []string{WaitingEnvironmentdPod, WaitingClusterdPods, WaitingHydration, WaitingEnvironmentd}

// Labels of environmentd's orchestrator on clusterd's pods (upstream
// src/orchestrator-kubernetes).
const (
	clusterdGenerationLabel = "cluster.environmentd.materialize.cloud/generation"
	orchestratorNSLabel     = "environmentd.materialize.cloud/namespace"
)

// clusterdGenerationLabelVersion is the first environmentd that labels
// clusterd's pods with their generation (upstream #36730); before, the
// generation is only in their names, {prefix}cluster-{cluster}-replica-
// {replica}-gen-{generation}-{process}.
var clusterdGenerationLabelVersion = imageref.MustParseVersion("26.27.0-dev.0")

// clusterdPodGeneration reads the generation from a clusterd pod's name.
var clusterdPodGeneration = regexp.MustCompile(`-gen-([0-9]+)-[0-9]+$`)

// Bounds of what a message quotes from a pod's status, and of the pods read:
// a tenant may label pods of its own with the environment's resource id
// (environmentd creates pods), each up to the API server's limit of about
// 1.5 MiB, and each poll of a rollout lists them whole; past the bound the
// message counts "≥32".
const (
	podDetailBytes = 200
	waitingBytes   = 400
	maxPodsRead    = 32
)

// exitMeanings are what the exit codes of environmentd and clusterd mean
// (upstream src/ore/src/process.rs, panic.rs; the kubelet's OOM kill).
var exitMeanings = map[int32]string{
	0:   "fenced out",
	2:   "command line refused",
	101: "panic",
	134: "panic",
	137: "killed (out of memory or SIGKILL)",
	166: "halt: DDL during catch-up, or the restart after promotion",
	167: "over its memory limit",
}

// waiting is what generation gen of e waits for, read from its pods (two
// narrow lists by label, each bounded), and its kind. Nothing here is a
// tenant's secret: pod phases, condition messages of the scheduler and
// kubelet, container reasons and exit codes.
func (r *reconciler) waiting(ctx context.Context, e env, gen uint64, leaderStatus string, environmentdReady bool) (string, string) {
	list := func(selector string) ([]corev1.Pod, bool, error) {
		pods, err := r.d.Kube.CoreV1().Pods(e.ns()).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: maxPodsRead})
		if err != nil {
			return nil, false, err
		}
		items := pods.Items
		sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
		return items, pods.Continue != "", nil
	}
	if !environmentdReady {
		items, _, err := list(children.ResourceIDLabel + "=" + e.id + "," + children.NameLabel + "=" + e.generationName(gen) +
			"," + mzlabels.App + "=" + environmentdApp)
		if err != nil {
			return WaitingEnvironmentdPod, ""
		}
		creating := false
		for i := range items {
			if problem, ok := podProblem(&items[i]); ok {
				return WaitingEnvironmentdPod, fmt.Sprintf("environmentd generation %d %s", gen, problem)
			}
			creating = creating || containerCreating(&items[i])
		}
		// The kubelet holds the pod in ContainerCreating while a Secret it
		// mounts is missing, and says so only in Events.
		if creating {
			if why := r.certificateWait(ctx, e); why != "" {
				return WaitingEnvironmentdPod, fmt.Sprintf("environmentd generation %d is being created; %s", gen, why)
			}
		}
		// Not there yet, or starting: nothing worth a status write.
		return WaitingEnvironmentdPod, ""
	}
	if leaderStatus != "Initializing" && leaderStatus != "CatchingUp" {
		return WaitingEnvironmentd, ""
	}
	selector := children.ResourceIDLabel + "=" + e.id + "," + orchestratorNSLabel + "=cluster"
	labelled := e.meetsVersion(clusterdGenerationLabelVersion)
	if labelled {
		selector += "," + clusterdGenerationLabel + "=" + strconv.FormatUint(gen, 10)
	}
	items, more, err := list(selector)
	if err != nil {
		return WaitingEnvironmentd, ""
	}
	if !labelled { // the bound of the read then counts every generation's pods
		items = slices.DeleteFunc(items, func(p corev1.Pod) bool {
			m := clusterdPodGeneration.FindStringSubmatch(p.Name)
			return m == nil || m[1] != strconv.FormatUint(gen, 10)
		})
	}
	total, ready := len(items), 0
	first := ""
	for i := range items {
		p := &items[i]
		if podReady(p) {
			ready++
		} else if problem, ok := podProblem(p); ok && first == "" {
			first = "; clusterd replica " + p.Name + " " + problem
		}
	}
	of := strconv.Itoa(total)
	if more { // more replica pods than read: the count is a lower bound
		of = "≥" + of
	}
	switch {
	case total == 0:
		return WaitingClusterdPods, "catching up: no clusterd replica pods yet"
	case ready < total || more: // the pods not read may not be Ready
		return WaitingClusterdPods, boundedtext.Cut(fmt.Sprintf("catching up: clusterd replica pods %d/%s ready%s", ready, of, first), waitingBytes)
	}
	return WaitingHydration, fmt.Sprintf("catching up: clusterd replica pods %d/%s ready, hydrating", ready, of)
}

// certificateWait names environmentd's cert-manager Certificate when it is
// not Ready, for a pod held in ContainerCreating (until the Certificate's
// Secret exists). One GET, made only while the pod is being created and
// shows no problem of its own. cert-manager's text is cut before it is
// read: a tenant can write a Certificate's status.
func (r *reconciler) certificateWait(ctx context.Context, e env) string {
	if !e.internalTLS() {
		return ""
	}
	name := e.certificateName()
	live, err := r.d.Dynamic.Resource(certificates.GVR).Namespace(e.ns()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "" // applied on this pass; what went wrong there is its error
	}
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conditions {
		cond, _ := c.(map[string]any)
		if cond["type"] != "Ready" {
			continue
		}
		if cond["status"] == "True" {
			return ""
		}
		why := fmt.Sprintf("its Certificate %s is not Ready", name)
		for _, field := range []string{"reason", "message"} {
			if text, _ := cond[field].(string); text != "" {
				why += ": " + oneLine(boundedtext.Cut(text, waitingBytes))
			}
		}
		return boundedtext.Cut(why, waitingBytes)
	}
	return fmt.Sprintf("its Certificate %s is not issued yet", name)
}

// containerCreating: a pod whose containers the kubelet has not started.
func containerCreating(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason == "ContainerCreating" {
			return true
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podProblem says why a pod cannot become Ready, bounded; false for a pod
// on its way (scheduled, its containers being created or started).
func podProblem(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return "Pending: " + boundedtext.Cut(oneLine(c.Message), podDetailBytes), true
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if cs.Ready {
			continue
		}
		last := cs.LastTerminationState.Terminated
		if t := cs.State.Terminated; t != nil {
			last = t
		}
		w := cs.State.Waiting
		// One message for the whole crash cycle (waiting in back-off,
		// running again, exited): it changes only with the exit code, so
		// each restart is not a status write.
		switch {
		case last != nil && (cs.RestartCount > 0 || (w != nil && w.Reason == "CrashLoopBackOff")):
			return fmt.Sprintf("crash-looping: exit %d%s", last.ExitCode, meaning(last.ExitCode)), true
		case w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing":
			return boundedtext.Cut(w.Reason+": "+oneLine(w.Message), podDetailBytes), true
		case cs.State.Terminated != nil:
			return fmt.Sprintf("exited: exit %d%s", last.ExitCode, meaning(last.ExitCode)), true
		}
	}
	return "", false
}

func meaning(code int32) string {
	if m, ok := exitMeanings[code]; ok {
		return " (" + m + ")"
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Waiting counts the Materializes whose rollout waits, by what for: the
// materialize reconciler records each one's at every poll and forgets it
// once the rollout ends; a record not renewed for waitingStale (its
// replica no longer leads) no longer counts.
type Waiting struct {
	mu    sync.Mutex
	kind  map[string]waitingEntry // namespace/name → what it waits for
	clock func() time.Time
}

type waitingEntry struct {
	kind string
	at   time.Time
}

const waitingStale = time.Minute

// NewWaiting returns an empty count.
func NewWaiting() *Waiting { return &Waiting{kind: map[string]waitingEntry{}, clock: time.Now} }

func (w *Waiting) set(key, kind string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if kind == "" {
		delete(w.kind, key)
		return
	}
	w.kind[key] = waitingEntry{kind: kind, at: w.clock()}
}

// Of is what the named Materialize's rollout waits for, "" when nothing.
func (w *Waiting) Of(namespace, name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.kind[namespace+"/"+name]
	if !ok || w.clock().Sub(e.at) > waitingStale {
		return ""
	}
	return e.kind
}

var waitingDesc = prometheus.NewDesc("orchestratord_materialize_rollout_waiting",
	"Materializes whose rollout waits, by what it waits for (environmentd_pod, clusterd_pods, hydration, environmentd); "+
		"the leader of the materialize controller reports them, the other replicas 0.",
	[]string{"waiting_for"}, nil)

func (w *Waiting) Describe(ch chan<- *prometheus.Desc) { ch <- waitingDesc }

func (w *Waiting) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	counts := map[string]int{}
	now := w.clock()
	for key, e := range w.kind {
		if now.Sub(e.at) > waitingStale {
			delete(w.kind, key)
			continue
		}
		counts[e.kind]++
	}
	w.mu.Unlock()
	for _, k := range waitingKinds {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(counts[k]), k)
	}
}
