package gke

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testConfig() *Config {
	return &Config{
		Subscription:     "projects/my-project/subscriptions/my-sub",
		ClusterName:      "my-cluster",
		ClusterLocation:  "us-central1",
		WatchedNodePools: []string{"materialize"},
	}
}

// upgradeEventAttributes are a GKE UpgradeEvent notification's attributes,
// as upstream's tests write them.
func upgradeEventAttributes(clusterName, clusterLocation, resourceType, resource string) map[string]string {
	payload, _ := json.Marshal(map[string]string{
		"resourceType":       resourceType,
		"operation":          "operation-1234",
		"operationStartTime": "2026-07-22T00:00:00Z",
		"currentVersion":     "1.32.1-gke.1",
		"targetVersion":      "1.33.1-gke.1",
		"resource":           resource,
	})
	return map[string]string{
		"type_url":         UpgradeEventType,
		"cluster_name":     clusterName,
		"cluster_location": clusterLocation,
		"project_id":       "1234567890",
		"payload":          string(payload),
	}
}

func TestConfigValidation(t *testing.T) {
	for _, sub := range []string{"my-sub", "projects//subscriptions/my-sub", "projects/p/subscriptions/", "projects/p/topics/t",
		"projects/p/subscriptions/s/extra", ""} {
		c := testConfig()
		c.Subscription = sub
		if err := c.Validate(); err == nil {
			t.Errorf("subscription %q accepted", sub)
		}
	}
	c := testConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.project() != "my-project" {
		t.Errorf("project %q", c.project())
	}
	if got, want := c.nodePoolPath("materialize"), "projects/my-project/locations/us-central1/clusters/my-cluster/nodePools/materialize"; got != want {
		t.Errorf("node pool path %q, want %q", got, want)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.ClusterName = "" },
		func(c *Config) { c.ClusterLocation = "" },
		func(c *Config) { c.WatchedNodePools = []string{"a,b"} },
		func(c *Config) { c.WatchedNodePools = []string{""} },
	} {
		c := testConfig()
		bad(c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// Phases as upstream orders them: only once every blue node is cordoned.
func TestBluePoolFullyCordoned(t *testing.T) {
	for phase, want := range map[string]bool{
		PhaseUnspecified:        false,
		PhaseUpdateStarted:      false,
		PhaseCreatingGreenPool:  false,
		PhaseCordoningBluePool:  false, // in progress, not complete
		PhaseWaitingToDrainBlue: true,
		PhaseDrainingBluePool:   true,
		PhaseNodePoolSoaking:    true,
		PhaseDeletingBluePool:   true,
		PhaseRollbackStarted:    false,
		"SOME_FUTURE_PHASE":     false,
		"":                      false,
	} {
		if got := BluePoolFullyCordoned(phase); got != want {
			t.Errorf("%q: %v, want %v", phase, got, want)
		}
	}
}

func TestUpgradingPool(t *testing.T) {
	c := testConfig()
	const resource = "projects/my-project/locations/us-central1/clusters/my-cluster/nodePools/materialize"
	pool, _, err := c.upgradingPool(upgradeEventAttributes("my-cluster", "us-central1", "NODE_POOL", resource))
	if err != nil || pool != "materialize" {
		t.Fatalf("happy path: %q, %v", pool, err)
	}

	ignored := map[string]map[string]string{
		"other cluster":  upgradeEventAttributes("other-cluster", "us-central1", "NODE_POOL", resource),
		"other location": upgradeEventAttributes("my-cluster", "europe-west1", "NODE_POOL", resource),
		"master":         upgradeEventAttributes("my-cluster", "us-central1", "MASTER", "projects/my-project/locations/us-central1/clusters/my-cluster"),
		"unwatched pool": upgradeEventAttributes("my-cluster", "us-central1", "NODE_POOL", "projects/my-project/locations/us-central1/clusters/my-cluster/nodePools/generic"),
		"no type":        {"cluster_name": "my-cluster", "cluster_location": "us-central1"},
	}
	other := upgradeEventAttributes("my-cluster", "us-central1", "NODE_POOL", resource)
	other["type_url"] = "type.googleapis.com/google.container.v1beta1.SecurityBulletinEvent"
	ignored["security bulletin"] = other
	for name, attrs := range ignored {
		pool, why, err := c.upgradingPool(attrs)
		if pool != "" || err != nil || why == "" {
			t.Errorf("%s: pool %q, why %q, err %v; want ignored", name, pool, why, err)
		}
	}

	malformed := map[string]map[string]string{}
	for name, payload := range map[string]string{
		"not JSON":       "{resourceType: NODE_POOL",
		"JSON array":     "[]",
		"too large":      `{"resourceType":"NODE_POOL","resource":"` + strings.Repeat("a", maxPayload) + `"}`,
		"short resource": `{"resourceType":"NODE_POOL","resource":"projects/p/nodePools/materialize"}`,
		"not a pool":     `{"resourceType":"NODE_POOL","resource":"projects/p/locations/l/clusters/c/nodeGroups/materialize"}`,
		"selector":       `{"resourceType":"NODE_POOL","resource":"projects/p/locations/l/clusters/c/nodePools/a,b"}`,
	} {
		attrs := upgradeEventAttributes("my-cluster", "us-central1", "NODE_POOL", resource)
		attrs["payload"] = payload
		malformed[name] = attrs
	}
	noPayload := upgradeEventAttributes("my-cluster", "us-central1", "NODE_POOL", resource)
	delete(noPayload, "payload")
	malformed["no payload"] = noPayload
	for name, attrs := range malformed {
		pool, _, err := c.upgradingPool(attrs)
		var m errMalformed
		if pool != "" || !errors.As(err, &m) {
			t.Errorf("%s: pool %q, err %v; want malformed", name, pool, err)
		}
	}

	// No watched pools watches every pool.
	c.WatchedNodePools = nil
	pool, _, err = c.upgradingPool(upgradeEventAttributes("my-cluster", "us-central1", "NODE_POOL",
		"projects/my-project/locations/us-central1/clusters/my-cluster/nodePools/generic"))
	if err != nil || pool != "generic" {
		t.Errorf("all pools watched: %q, %v", pool, err)
	}
}

func TestArmedPools(t *testing.T) {
	var a armedPools
	t0 := time.Date(2026, 7, 22, 0, 0, 0, 0, time.UTC)
	if armed, _ := a.arm("materialize", t0); !armed {
		t.Fatal("not armed")
	}
	// Arming again keeps the first time: notifications never postpone
	// the disarm.
	if armed, _ := a.arm("materialize", t0.Add(time.Hour)); armed {
		t.Error("armed twice")
	}
	names, at := a.list()
	if len(names) != 1 || !at["materialize"].Equal(t0) {
		t.Errorf("armed %v %v", names, at)
	}
	if expired(t0, t0.Add(MaxArmed)) || !expired(t0, t0.Add(MaxArmed+time.Second)) {
		t.Error("expiry is not after 14 days")
	}
	if MaxArmed != 14*24*time.Hour {
		t.Errorf("MaxArmed %v", MaxArmed)
	}
	a.disarm("materialize")
	if names, _ := a.list(); len(names) != 0 {
		t.Errorf("still armed: %v", names)
	}
	for i := range maxArmedPools {
		a.arm(string(rune('a'+i%26))+strings.Repeat("x", i), t0)
	}
	if armed, refused := a.arm("one-more", t0); armed || !refused {
		t.Errorf("past the bound: armed %v refused %v", armed, refused)
	}
}

func TestResponsesAreBounded(t *testing.T) {
	for name, tc := range map[string]struct {
		size          int
		contentLength bool
		wantErr       bool
	}{
		"at the limit":                {size: maxResponse, contentLength: true},
		"past the limit, declared":    {size: maxResponse + 1, contentLength: true, wantErr: true},
		"past the limit, chunked":     {size: maxResponse + 1, wantErr: true},
		"at the limit, chunked":       {size: maxResponse},
		"far past the limit, chunked": {size: 4 * maxResponse, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tc.contentLength {
					w.Header().Set("Transfer-Encoding", "chunked")
				} else {
					w.Header().Set("Content-Length", strconv.Itoa(tc.size))
				}
				chunk := make([]byte, 64<<10)
				for left := tc.size; left > 0; left -= len(chunk) {
					if left < len(chunk) {
						chunk = chunk[:left]
					}
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}))
			defer srv.Close()
			c := &http.Client{Transport: limitedTransport{next: http.DefaultTransport}}
			resp, err := c.Get(srv.URL)
			var n int64
			if err == nil {
				n, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if tc.wantErr != errors.Is(err, errResponseTooLarge) {
				t.Fatalf("read %d bytes, err %v; want too large: %v", n, err, tc.wantErr)
			}
			if n > maxResponse {
				t.Errorf("read %d bytes, past the limit", n)
			}
		})
	}
}
