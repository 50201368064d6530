package gke

import (
	"encoding/json"
	"fmt"
	"strings"
)

// UpgradeEventType is the type_url attribute of GKE's node pool upgrade
// notifications.
const UpgradeEventType = "type.googleapis.com/google.container.v1beta1.UpgradeEvent"

// maxPayload bounds the payload attribute decoded: an UpgradeEvent is a few
// hundred bytes, and anyone who may publish to the topic chooses it.
const maxPayload = 64 << 10

// upgradeEvent is the part of an UpgradeEvent payload the trigger reads.
type upgradeEvent struct {
	ResourceType string `json:"resourceType"`
	Resource     string `json:"resource"`
}

// errMalformed marks a notification that claims to be an UpgradeEvent for
// this cluster but cannot be read: logged as such, and acknowledged all the
// same (a redelivery would not read any better).
type errMalformed struct{ msg string }

func (e errMalformed) Error() string { return e.msg }

// upgradingPool reads a notification's attributes. It returns the watched
// node pool of this cluster an UpgradeEvent says is upgrading; otherwise ""
// and why the notification is ignored, or an errMalformed.
func (c *Config) upgradingPool(attrs map[string]string) (pool, ignored string, err error) {
	if attrs["type_url"] != UpgradeEventType {
		return "", "not an UpgradeEvent", nil
	}
	// Nothing keeps other clusters off the topic: check the event is ours.
	if attrs["cluster_name"] != c.ClusterName || attrs["cluster_location"] != c.ClusterLocation {
		return "", "an UpgradeEvent of another cluster", nil
	}
	payload, ok := attrs["payload"]
	if !ok {
		return "", "", errMalformed{"UpgradeEvent without a payload"}
	}
	if len(payload) > maxPayload {
		return "", "", errMalformed{fmt.Sprintf("UpgradeEvent payload of %d bytes, more than %d", len(payload), maxPayload)}
	}
	var ev upgradeEvent
	if err := json.Unmarshal([]byte(payload), &ev); err != nil {
		return "", "", errMalformed{"UpgradeEvent payload is not JSON: " + err.Error()}
	}
	if ev.ResourceType != "NODE_POOL" {
		return "", "an UpgradeEvent of a " + truncate(ev.ResourceType, 64) + ", not a node pool", nil
	}
	// projects/{project}/locations/{location}/clusters/{cluster}/nodePools/{pool}
	parts := strings.Split(ev.Resource, "/")
	if len(parts) != 8 || parts[6] != "nodePools" || !validPoolName(parts[7]) {
		return "", "", errMalformed{fmt.Sprintf("UpgradeEvent resource of unexpected form (%d bytes)", len(ev.Resource))}
	}
	pool = parts[7]
	if !c.watches(pool) {
		return "", "an UpgradeEvent of an unwatched node pool", nil
	}
	return pool, "", nil
}
