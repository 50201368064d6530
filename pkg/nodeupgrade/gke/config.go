// Package gke triggers rollouts of Materialize environments when GKE
// upgrades the node pools they run on (upstream's gcp_node_upgrade).
//
// With the blue-green upgrade strategy GKE creates replacement (green)
// nodes, cordons every existing (blue) node, drains them in batches and
// deletes them after a soak of up to seven days. Left alone, the drain
// evicts environmentd and clusterd pods. Instead:
//
//   - a Pub/Sub subscriber arms a node pool when a GKE UpgradeEvent
//     notification says it is upgrading; notifications can be missed (while
//     no replica leads, say), so the GKE API is also polled at start and
//     then periodically, arming every watched pool with an upgrade in
//     progress;
//   - while a pool is armed its blue-green phase is polled; once every blue
//     node is cordoned (WAITING_TO_DRAIN_BLUE_POOL or later) each
//     Materialize with environmentd or clusterd pods on the pool's cordoned
//     nodes gets one forced rollout (package nodeupgrade);
//   - a pool is disarmed when its upgrade is over, or after 14 days.
//
// A node cordoned by hand arms nothing: only an upgrade does, so debugging
// a node never costs a rollout. Waiting for the whole blue pool to be
// cordoned keeps the new generation off a blue node not cordoned yet.
package gke

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/api/option"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Upstream's timings.
const (
	DefaultScanInterval = time.Minute
	DefaultPollInterval = time.Hour
	// MaxArmed disarms a pool armed this long: GKE caps the soak of a
	// blue-green upgrade at seven days, so the upgrade that armed it is over.
	MaxArmed = 14 * 24 * time.Hour
)

// NodePoolLabel is the node label GKE records a node's pool in.
const NodePoolLabel = "cloud.google.com/gke-nodepool"

// Config is the trigger's configuration (upstream's flags).
type Config struct {
	// Subscription receives the cluster's notifications, as
	// projects/{project}/subscriptions/{subscription}. Its project is the
	// cluster's.
	Subscription     string
	ClusterName      string
	ClusterLocation  string
	WatchedNodePools []string // empty: every pool

	// Zero means the default (upstream's values).
	ScanInterval time.Duration
	PollInterval time.Duration
	Cooldown     time.Duration

	// Endpoints and client options of the Google APIs; empty in
	// production (Application Default Credentials), a loopback server in
	// tests.
	ContainerEndpoint string
	PubSubEndpoint    string
	ClientOptions     []option.ClientOption
}

// Validate checks the configuration as upstream's Config::new does, and
// that pool names can be label values (they go into a label selector).
func (c *Config) Validate() error {
	if _, err := subscriptionProject(c.Subscription); err != nil {
		return err
	}
	var errs []error
	if c.ClusterName == "" {
		errs = append(errs, errors.New("--gcp-cluster-name is required"))
	}
	if c.ClusterLocation == "" {
		errs = append(errs, errors.New("--gcp-cluster-location is required"))
	}
	for _, p := range c.WatchedNodePools {
		if !validPoolName(p) {
			errs = append(errs, fmt.Errorf("--gcp-node-upgrade-watched-node-pool: %q is not a node pool name", p))
		}
	}
	return errors.Join(errs...)
}

func subscriptionProject(sub string) (string, error) {
	parts := strings.Split(sub, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[2] != "subscriptions" || parts[3] == "" {
		return "", fmt.Errorf("invalid Pub/Sub subscription %q: expected projects/{project}/subscriptions/{subscription}", sub)
	}
	return parts[1], nil
}

func (c *Config) project() string {
	p, _ := subscriptionProject(c.Subscription)
	return p
}

func (c *Config) clusterPath() string {
	return "projects/" + c.project() + "/locations/" + c.ClusterLocation + "/clusters/" + c.ClusterName
}

func (c *Config) nodePoolPath(pool string) string { return c.clusterPath() + "/nodePools/" + pool }

func (c *Config) watches(pool string) bool {
	if len(c.WatchedNodePools) == 0 {
		return true
	}
	for _, p := range c.WatchedNodePools {
		if p == pool {
			return true
		}
	}
	return false
}

// validPoolName: a pool name from a notification or the API becomes a
// label selector's value and a URL path segment, so anything that is not a
// label value (GKE's names all are) is refused.
func validPoolName(pool string) bool {
	return pool != "" && len(validation.IsValidLabelValue(pool)) == 0
}

func (c *Config) scanInterval() time.Duration { return orDefault(c.ScanInterval, DefaultScanInterval) }
func (c *Config) pollInterval() time.Duration { return orDefault(c.PollInterval, DefaultPollInterval) }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
