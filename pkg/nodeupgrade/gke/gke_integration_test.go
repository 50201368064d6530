package gke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/api/option"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade/gke"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/nodeupgradetest"
	"github.com/materializeinc/orchestratord/test/promtest"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	controlplane.Main(m, controlplane.Options{}, func(started *controlplane.ControlPlane) { cp = started })
}

const (
	project     = "my-project"
	cluster     = "my-cluster"
	location    = "us-central1"
	subPath     = "projects/" + project + "/subscriptions/my-sub"
	clusterPath = "projects/" + project + "/locations/" + location + "/clusters/" + cluster
)

// fakeGoogle serves the GKE v1beta1 node pool reads and Pub/Sub's pull and
// acknowledge on loopback.
type fakeGoogle struct {
	mu sync.Mutex
	// pools: name -> [status, blue-green phase]; a phase of "" has no
	// blueGreenInfo at all.
	pools  map[string][2]string
	queue  []map[string]any
	acked  map[string]bool
	lists  int
	nextID int
	// hugeBatches answers a pull of more than one message with a body
	// past the client's limit.
	hugeBatches bool
	pullSizes   []int
	// holding: a pull is held open, empty, waiting for a message.
	holding bool
}

func newFakeGoogle(t *testing.T) (*fakeGoogle, *httptest.Server) {
	f := &fakeGoogle{pools: map[string][2]string{}, acked: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeGoogle) setPool(name, status, phase string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pools[name] = [2]string{status, phase}
}

// publish queues a message with attrs and returns its ack id.
func (f *fakeGoogle) publish(attrs map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.publishLocked(attrs)
}

// publishWhileHolding publishes only while a pull is held open, and says
// whether it did.
func (f *fakeGoogle) publishWhileHolding(attrs map[string]string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.holding {
		return "", false
	}
	return f.publishLocked(attrs), true
}

func (f *fakeGoogle) publishLocked(attrs map[string]string) string {
	f.nextID++
	id := fmt.Sprintf("ack-%d", f.nextID)
	f.queue = append(f.queue, map[string]any{"ackId": id, "message": map[string]any{
		"messageId": fmt.Sprint(f.nextID), "attributes": attrs, "data": "", "publishTime": "2026-07-22T00:00:00Z"}})
	return id
}

func (f *fakeGoogle) isAcked(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acked[id]
}

func (f *fakeGoogle) listed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

func (f *fakeGoogle) poolJSON(name string, p [2]string) map[string]any {
	np := map[string]any{"name": name, "status": p[0]}
	if p[1] != "" {
		np["updateInfo"] = map[string]any{"blueGreenInfo": map[string]any{"phase": p[1]}}
	}
	return np
}

func (f *fakeGoogle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1beta1/"+clusterPath+"/nodePools":
		f.lists++
		var pools []any
		for name, p := range f.pools {
			pools = append(pools, f.poolJSON(name, p))
		}
		reply(map[string]any{"nodePools": pools})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1beta1/"+clusterPath+"/nodePools/"):
		name := strings.TrimPrefix(r.URL.Path, "/v1beta1/"+clusterPath+"/nodePools/")
		p, ok := f.pools[name]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			reply(map[string]any{"error": map[string]any{"code": 404, "message": "not found"}})
			return
		}
		reply(f.poolJSON(name, p))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/"+subPath+":pull":
		var req struct {
			MaxMessages int `json:"maxMessages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.pullSizes = append(f.pullSizes, req.MaxMessages)
		if len(f.queue) == 0 {
			// Pub/Sub holds an empty pull open for a while; a message
			// published meanwhile is answered by this pull.
			f.holding = true
			f.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			f.mu.Lock()
			f.holding = false
		}
		// Checked after the wait: a message that arrived during it must
		// get the oversized answer too.
		if f.hugeBatches && req.MaxMessages > 1 && len(f.queue) > 0 {
			reply(map[string]any{"receivedMessages": []any{map[string]any{"ackId": "huge",
				"message": map[string]any{"data": strings.Repeat("A", 17<<20)}}}})
			return
		}
		n := min(req.MaxMessages, len(f.queue))
		msgs := f.queue[:n]
		f.queue = f.queue[n:]
		reply(map[string]any{"receivedMessages": msgs})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/"+subPath+":acknowledge":
		var req struct {
			AckIDs []string `json:"ackIds"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		for _, id := range req.AckIDs {
			f.acked[id] = true
		}
		reply(map[string]any{})
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

func upgradeEvent(pool string) map[string]string {
	payload, _ := json.Marshal(map[string]string{
		"resourceType": "NODE_POOL", "operation": "operation-1234", "operationStartTime": "2026-07-22T00:00:00Z",
		"currentVersion": "1.32.1-gke.1", "targetVersion": "1.33.1-gke.1", "resource": clusterPath + "/nodePools/" + pool,
	})
	return map[string]string{"type_url": gke.UpgradeEventType, "cluster_name": cluster, "cluster_location": location,
		"project_id": "1234567890", "payload": string(payload)}
}

// world is nodeupgradetest's, with names made unique per test by prefix.
type world struct {
	*nodeupgradetest.World
	t      *testing.T
	prefix string
	// metrics is the registry of the trigger run starts.
	metrics *prometheus.Registry
}

func newWorld(t *testing.T, prefix string) *world {
	return &world{World: nodeupgradetest.New(t, cp.Config), t: t, prefix: prefix}
}

// node creates a Node of GKE node pool pool, and returns its name.
func (w *world) node(name, pool string, cordoned bool) string {
	w.t.Helper()
	name = w.prefix + "-" + name
	w.Node(name, map[string]string{gke.NodePoolLabel: pool}, corev1.NodeSpec{Unschedulable: cordoned})
	return name
}

// environment makes a namespace with a settled Materialize "mz", and
// returns the namespace.
func (w *world) environment(name string) string {
	w.t.Helper()
	return w.Environment(w.prefix + "-" + name)
}

// run starts the watcher; the returned stop cancels it and waits for it.
func run(t *testing.T, w *world, srv *httptest.Server, watched []string) (logs *observer.ObservedLogs, stop func()) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	cfg := gke.Config{
		Subscription: subPath, ClusterName: cluster, ClusterLocation: location, WatchedNodePools: watched,
		ScanInterval: 100 * time.Millisecond, PollInterval: time.Hour, Cooldown: 200 * time.Millisecond,
		ContainerEndpoint: srv.URL + "/", PubSubEndpoint: srv.URL + "/",
		ClientOptions: []option.ClientOption{option.WithoutAuthentication()},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	w.metrics = prometheus.NewRegistry()
	tr := &nodeupgrade.Trigger{Kube: w.Kube, MZ: w.MZ, Log: log, Cooldown: cfg.Cooldown, Metrics: nodeupgrade.NewMetrics(w.metrics)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gke.Run(ctx, cfg, tr, log); close(done) }()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of its context ending")
		}
		if t.Failed() {
			for _, e := range logs.All() {
				t.Logf("%s %s %v", e.Level, e.Message, e.ContextMap())
			}
		}
	})
	t.Cleanup(stop)
	return logs, stop
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func logged(logs *observer.ObservedLogs, msg string, fields ...zap.Field) int {
	n := 0
	for _, e := range logs.FilterMessage(msg).All() {
		m := e.ContextMap()
		ok := true
		for _, f := range fields {
			if m[f.Key] != f.String {
				ok = false
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// A blue-green upgrade notified over Pub/Sub: nothing while the blue pool
// is being cordoned, then exactly one forced rollout of each Materialize
// with environmentd or clusterd pods on the pool's cordoned nodes, none of
// one on an unaffected pool, nothing for a pool cordoned by hand; malformed
// and foreign notifications are acknowledged and ignored; the pool is
// disarmed when the upgrade is over.
func TestUpgradeNotificationTriggersOneRolloutEach(t *testing.T) {
	w := newWorld(t, "notified")
	blue1, blue2 := w.node("blue-1", "materialize", true), w.node("blue-2", "materialize", true)
	green1 := w.node("green-1", "materialize", false)
	handCordoned := w.node("other-1", "other", true)
	generic1 := w.node("generic-1", "generic", false)
	a, b, c := w.environment("a"), w.environment("b"), w.environment("c")
	w.Pod(a, "environmentd-1-0", "environmentd", blue1)
	w.Pod(a, "clusterd-u1", "clusterd", green1)
	w.Pod(b, "clusterd-u1", "clusterd", blue2)
	w.Pod(b, "balancerd", "balancerd", green1)
	// c runs on a pool cordoned by hand (no upgrade) and on an unaffected
	// pool; its balancerd, which needs no rollout, on the upgrading pool.
	w.Pod(c, "environmentd-1-0", "environmentd", handCordoned)
	w.Pod(c, "clusterd-u1", "clusterd", generic1)
	w.Pod(c, "balancerd", "balancerd", blue1)

	f, srv := newFakeGoogle(t)
	for _, p := range []string{"materialize", "other", "generic"} {
		f.setPool(p, "RUNNING", "")
	}
	logs, stop := run(t, w, srv, nil)
	eventually(t, "the GKE API polled at start", func() bool { return f.listed() > 0 })
	time.Sleep(500 * time.Millisecond) // a few scans
	if n := logged(logs, "node upgrade: arming node pool"); n != 0 {
		t.Fatalf("armed %d pools with no upgrade in progress", n)
	}

	// The upgrade starts; its notification arrives among others.
	f.setPool("materialize", "RECONCILING", gke.PhaseCordoningBluePool)
	bad := upgradeEvent("materialize")
	bad["payload"] = "{not json"
	foreign := upgradeEvent("materialize")
	foreign["cluster_name"] = "other-cluster"
	acks := []string{f.publish(bad), f.publish(foreign), f.publish(map[string]string{"type_url": "type.googleapis.com/google.container.v1beta1.SecurityBulletinEvent"}),
		f.publish(upgradeEvent("materialize"))}
	eventually(t, "every notification acknowledged", func() bool {
		for _, id := range acks {
			if !f.isAcked(id) {
				return false
			}
		}
		return true
	})
	eventually(t, "the pool armed by its notification", func() bool {
		return logged(logs, "node upgrade: arming node pool", zap.String("pool", "materialize"),
			zap.String("reason", "received a GKE node pool UpgradeEvent notification")) == 1
	})
	if n := logged(logs, "node upgrade: malformed GKE notification; acknowledging it"); n != 1 {
		t.Errorf("%d malformed notifications logged, want 1", n)
	}
	if n := logged(logs, "node upgrade: arming node pool"); n != 1 {
		t.Errorf("%d pools armed, want 1", n)
	}
	time.Sleep(500 * time.Millisecond) // a few scans while cordoning
	for _, ns := range []string{a, b, c} {
		if v := w.ForceRollout(ns); v != "" {
			t.Fatalf("%s triggered while the blue pool was still being cordoned", ns)
		}
	}

	// Every blue node cordoned.
	f.setPool("materialize", "RECONCILING", gke.PhaseDrainingBluePool)
	eventually(t, "a and b triggered", func() bool { return w.ForceRollout(a) != "" && w.ForceRollout(b) != "" })
	first := map[string]string{a: w.ForceRollout(a), b: w.ForceRollout(b)}
	requests := map[string]string{a: w.Get(a).Spec.RequestRollout, b: w.Get(b).Spec.RequestRollout}
	for ns, r := range requests {
		if r == nodeupgradetest.Settled {
			t.Errorf("%s: requestRollout unchanged; the reconciler would not roll out", ns)
		}
	}
	// Their rollouts complete (the old pods stay where they are here)
	// and the cooldown passes: still exactly one each.
	w.CompleteRollout(w.Get(a))
	w.CompleteRollout(w.Get(b))
	time.Sleep(time.Second)
	for ns, v := range first {
		if got := w.ForceRollout(ns); got != v || w.Get(ns).Spec.RequestRollout != requests[ns] {
			t.Errorf("%s triggered again: %q after %q", ns, got, v)
		}
	}
	if v := w.ForceRollout(c); v != "" {
		t.Errorf("c (hand-cordoned and unaffected pools) triggered: %q", v)
	}
	if n := logged(logs, "node upgrade: triggering rollout: the Materialize has pods on nodes going away"); n != 2 {
		t.Errorf("%d rollouts triggered, want 2", n)
	}

	// The metrics say the same.
	if got, _ := promtest.Value(t, w.metrics, "orchestratord_node_upgrade_armed_pools", nil); got != 1 {
		t.Errorf("armed pools %v, want 1", got)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"orchestratord_node_trigger_rollouts_total", map[string]string{"trigger": "gke-node-pool", "outcome": "triggered"}, 2},
		{"orchestratord_node_upgrade_notifications_total", map[string]string{"result": "malformed"}, 1},
		{"orchestratord_node_upgrade_notifications_total", map[string]string{"result": "ignored"}, 2},
	} {
		if got, _ := promtest.Value(t, w.metrics, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got, _ := promtest.Value(t, w.metrics, "orchestratord_node_upgrade_notifications_total", map[string]string{"result": "armed"}); got < 1 {
		t.Errorf("notifications armed = %v, want at least 1", got)
	}

	// The upgrade is over.
	f.setPool("materialize", "RUNNING", "")
	eventually(t, "the pool disarmed", func() bool {
		return logged(logs, "node upgrade: disarming node pool", zap.String("pool", "materialize")) == 1
	})
	if got, _ := promtest.Value(t, w.metrics, "orchestratord_node_upgrade_armed_pools", nil); got != 0 {
		t.Errorf("armed pools %v after the disarm, want 0", got)
	}
	stop()
}

// A notification missed (sent while no replica led): the poll at start
// finds the upgrade in progress and arms the pool. A pool cordoned by hand
// with no upgrade stays unarmed, watched or not; an unwatched pool's
// upgrade is ignored.
func TestMissedNotificationCaughtByPoll(t *testing.T) {
	w := newWorld(t, "missed")
	blue := w.node("blue-1", "late", true)
	unwatchedBlue := w.node("unwatched-1", "unwatched", true)
	handCordoned := w.node("manual-1", "manual", true)
	d, e, g := w.environment("d"), w.environment("e"), w.environment("g")
	w.Pod(d, "clusterd-u1", "clusterd", blue)
	w.Pod(e, "environmentd-1-0", "environmentd", handCordoned)
	w.Pod(g, "environmentd-1-0", "environmentd", unwatchedBlue)

	f, srv := newFakeGoogle(t)
	f.setPool("late", "RUNNING", gke.PhaseNodePoolSoaking) // soaking: RUNNING again, blueGreenInfo still there
	f.setPool("manual", "RUNNING", "")
	f.setPool("unwatched", "RECONCILING", gke.PhaseDrainingBluePool)
	logs, stop := run(t, w, srv, []string{"late", "manual"})
	eventually(t, "d triggered", func() bool { return w.ForceRollout(d) != "" })
	if n := logged(logs, "node upgrade: arming node pool", zap.String("pool", "late"), zap.String("reason", "GKE API reports an upgrade in progress")); n != 1 {
		t.Errorf("late armed %d times by the poll, want 1", n)
	}
	time.Sleep(500 * time.Millisecond)
	if v := w.ForceRollout(e); v != "" {
		t.Errorf("e, on a node cordoned by hand, triggered: %q", v)
	}
	if v := w.ForceRollout(g); v != "" {
		t.Errorf("g, on an unwatched pool, triggered: %q", v)
	}
	if n := logged(logs, "node upgrade: arming node pool"); n != 1 {
		t.Errorf("%d pools armed, want 1", n)
	}
	stop()
}

// A pull whose response is past the client's limit is not read whole and
// not retried as is: the next pulls ask for one message at a time, and the
// notification still arms its pool.
func TestOversizedPullIsRetriedOneMessageAtATime(t *testing.T) {
	w := newWorld(t, "oversized")
	f, srv := newFakeGoogle(t)
	f.setPool("big", "RUNNING", "")
	f.mu.Lock()
	f.hugeBatches = true
	f.mu.Unlock()
	logs, stop := run(t, w, srv, nil)
	// Published while a pull is held open, as happens on a loaded machine
	// (the path that once answered it as a normal batch).
	var id string
	eventually(t, "a message published during a held-open pull", func() bool {
		var ok bool
		id, ok = f.publishWhileHolding(upgradeEvent("big"))
		return ok
	})
	eventually(t, "the notification acknowledged", func() bool { return f.isAcked(id) })
	if n := logged(logs, "node upgrade: arming node pool", zap.String("pool", "big")); n != 1 {
		t.Errorf("big armed %d times, want 1", n)
	}
	if n := logged(logs, "node upgrade: Pub/Sub pull response too large; pulling one message at a time"); n != 1 {
		t.Errorf("%d oversized pulls logged, want 1", n)
	}
	if f.isAcked("huge") {
		t.Error("a message from a response past the limit was acknowledged")
	}
	f.mu.Lock()
	sizes := append([]int(nil), f.pullSizes...)
	f.mu.Unlock()
	if len(sizes) < 2 || sizes[len(sizes)-1] != 1 {
		t.Errorf("pull sizes %v: not one message at a time after the oversized pull", sizes)
	}
	stop()
}
