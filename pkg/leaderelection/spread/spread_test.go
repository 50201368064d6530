package spread

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The elections' Lease names (package leaderelection).
const (
	LeaseBalancer    = "orchestratord-balancer-controller"
	LeaseConsole     = "orchestratord-console-controller"
	LeaseMaterialize = "orchestratord-materialize-controller"
)

var (
	spreadNow    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	spreadLeases = []string{LeaseBalancer, LeaseConsole, LeaseMaterialize}
)

// lease is a Lease held by holder (empty: released), renewed ago.
func lease(name, holder string, ago time.Duration, replica bool) *coordinationv1.Lease {
	renew := metav1.NewMicroTime(spreadNow.Add(-ago))
	acquired := metav1.NewMicroTime(spreadNow.Add(-time.Hour))
	duration := int32(15)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renew, AcquireTime: &acquired, LeaseDurationSeconds: &duration}}
	if replica {
		l.Labels = map[string]string{ReplicaLabel: "true"}
	}
	return l
}

// seenAtRenewal: each version seen the moment it was written.
func seenAtRenewal(l *coordinationv1.Lease, _ time.Time) time.Time { return l.Spec.RenewTime.Time }

func view(replicas []string, holders map[string]string) placementView {
	return viewWith(replicas, nil, holders)
}

// viewWith is view with some replicas saying which Leases they campaign for.
func viewWith(replicas []string, campaigns map[string]string, holders map[string]string) placementView {
	var all []*coordinationv1.Lease
	for _, r := range replicas {
		l := lease(ReplicaLeaseName(r), r, time.Second, true)
		if list, ok := campaigns[r]; ok {
			l.Annotations = map[string]string{CampaignsAnnotation: list}
		}
		all = append(all, l)
	}
	for name, holder := range holders {
		all = append(all, lease(name, holder, time.Second, false))
	}
	return newPlacementView(all, spreadLeases, spreadNow, 15*time.Second, seenAtRenewal)
}

func TestSpreadMayAcquire(t *testing.T) {
	for _, c := range []struct {
		name     string
		replicas []string
		holders  map[string]string
		me       string
		want     bool
	}{
		{"alone, nothing held", []string{"a"}, nil, "a", true},
		{"alone, holding two", []string{"a"}, map[string]string{LeaseBalancer: "a", LeaseConsole: "a"}, "a", true},
		{"a peer leads fewer", []string{"a", "b"}, map[string]string{LeaseBalancer: "a"}, "a", false},
		{"the least loaded", []string{"a", "b"}, map[string]string{LeaseBalancer: "a"}, "b", true},
		{"tied", []string{"a", "b", "c"}, map[string]string{LeaseBalancer: "a", LeaseConsole: "b"}, "c", true},
		{"a dead peer does not count", []string{"a"}, map[string]string{LeaseBalancer: "a"}, "a", true},
	} {
		v := view(c.replicas, c.holders)
		if got := v.mayAcquire(c.me, LeaseMaterialize); got != c.want {
			t.Errorf("%s: mayAcquire(%s) = %v, want %v", c.name, c.me, got, c.want)
		}
	}
	// A Lease free for longer than the horizon goes to anyone.
	all := []*coordinationv1.Lease{lease(ReplicaLeaseName("a"), "a", time.Second, true), lease(ReplicaLeaseName("b"), "b", time.Second, true),
		lease(LeaseBalancer, "a", time.Second, false), lease(LeaseMaterialize, "", 20*time.Second, false)}
	if !newPlacementView(all, spreadLeases, spreadNow, 15*time.Second, seenAtRenewal).mayAcquire("a", LeaseMaterialize) {
		t.Error("a Lease free for 20s is not offered to a loaded replica after a 15s horizon")
	}
}

func TestSpreadHandOver(t *testing.T) {
	all3 := map[string]string{LeaseBalancer: "a", LeaseConsole: "a", LeaseMaterialize: "a"}
	v := view([]string{"a", "b", "c"}, all3)
	handed := 0
	for _, l := range spreadLeases {
		if v.shouldHandOver("a", l, spreadNow, 30*time.Second) {
			handed++
			if l != LeaseMaterialize {
				t.Errorf("handing over %s, want the last by name", l)
			}
		}
	}
	if handed != 1 {
		t.Errorf("%d leases handed over at once, want 1", handed)
	}
	// Differences of one never move a Lease: no flapping.
	for _, c := range []struct {
		replicas []string
		holders  map[string]string
	}{
		{[]string{"a", "b"}, map[string]string{LeaseBalancer: "a", LeaseConsole: "a", LeaseMaterialize: "b"}},
		{[]string{"a", "b", "c"}, map[string]string{LeaseBalancer: "a", LeaseConsole: "b", LeaseMaterialize: "c"}},
		{[]string{"a", "b", "c", "d"}, map[string]string{LeaseBalancer: "a", LeaseConsole: "b", LeaseMaterialize: "c"}},
	} {
		holders := c.holders
		v := view(c.replicas, holders)
		for _, id := range c.replicas {
			for _, l := range spreadLeases {
				if v.shouldHandOver(id, l, spreadNow, 30*time.Second) {
					t.Errorf("%v: %s hands %s over", holders, id, l)
				}
			}
		}
	}
	// Not while another Lease is in flight (released, not yet taken).
	inFlight := view([]string{"a", "b", "c"}, map[string]string{LeaseBalancer: "a", LeaseConsole: "a"})
	if inFlight.shouldHandOver("a", LeaseConsole, spreadNow, 30*time.Second) {
		t.Error("handed a Lease over while another was free")
	}
	// Not right after acquiring it.
	if v.shouldHandOver("a", LeaseMaterialize, spreadNow, 2*time.Hour) {
		t.Error("handed over a Lease held for less than the minimum")
	}
}

// Placing three Leases by the two rules, from any start, ends with one
// Lease per replica, and every move lowers the sum of squared loads.
func TestSpreadConverges(t *testing.T) {
	replicas := []string{"a", "b", "c"}
	holders := map[string]string{LeaseBalancer: "a", LeaseConsole: "a", LeaseMaterialize: "a"}
	energy := func() int {
		load := map[string]int{}
		for _, h := range holders {
			load[h]++
		}
		sum := 0
		for _, n := range load {
			sum += n * n
		}
		return sum
	}
	for step := 0; step < 10; step++ {
		moved := false
		for _, id := range replicas {
			for _, l := range spreadLeases {
				if holders[l] == id && view(replicas, holders).shouldHandOver(id, l, spreadNow, 0) {
					before := energy()
					delete(holders, l)
					for _, other := range replicas {
						if view(replicas, holders).mayAcquire(other, l) && other != id {
							holders[l] = other
							break
						}
					}
					if energy() >= before {
						t.Fatalf("a move did not lower the imbalance: %v", holders)
					}
					moved = true
				}
			}
		}
		if !moved {
			break
		}
	}
	got := fmt.Sprint(holders[LeaseBalancer] != holders[LeaseConsole] && holders[LeaseConsole] != holders[LeaseMaterialize] &&
		holders[LeaseBalancer] != holders[LeaseMaterialize])
	if got != "true" {
		t.Errorf("placement did not spread: %v", holders)
	}
}

// Replicas running different --controllers: a Lease is placed only among
// those that campaign for it, so a replica never hands a Lease to a peer
// that cannot take it (it would come back after the horizon, again and
// again).
func TestSpreadOnlyAmongReplicasThatCampaignForTheLease(t *testing.T) {
	onlyMaterialize := map[string]string{"m": LeaseMaterialize}
	// a leads two, m (materialize only) leads none, c leads materialize:
	// nothing a leads can go to m.
	v := viewWith([]string{"a", "c", "m"}, onlyMaterialize, map[string]string{LeaseBalancer: "a", LeaseConsole: "a", LeaseMaterialize: "c"})
	for _, l := range spreadLeases {
		if v.shouldHandOver("a", l, spreadNow, 0) {
			t.Errorf("a hands %s over with only a materialize-only replica leading fewer", l)
		}
	}
	// The console Lease free: m, leading none, does not hold it up.
	free := viewWith([]string{"a", "c", "m"}, onlyMaterialize, map[string]string{LeaseBalancer: "a", LeaseMaterialize: "c"})
	if !free.mayAcquire("a", LeaseConsole) {
		t.Error("a may not take a free console Lease that only m, which cannot lead it, leads fewer than")
	}
	// a leads all three: materialize goes to m, whatever its name's rank.
	v = viewWith([]string{"a", "m"}, onlyMaterialize, map[string]string{LeaseBalancer: "a", LeaseConsole: "a", LeaseMaterialize: "a"})
	for _, l := range spreadLeases {
		if got := v.shouldHandOver("a", l, spreadNow, 0); got != (l == LeaseMaterialize) {
			t.Errorf("a hands %s over: %v", l, got)
		}
	}
	if !v.mayAcquire("m", LeaseMaterialize) {
		t.Error("m may not take the materialize Lease it campaigns for")
	}
	// The Leases a peer campaigns for count as load even if this replica
	// runs none of them (its own list is only materialize).
	all := []*coordinationv1.Lease{
		lease(ReplicaLeaseName("a"), "a", time.Second, true), lease(ReplicaLeaseName("m"), "m", time.Second, true),
		lease(LeaseBalancer, "a", time.Second, false), lease(LeaseConsole, "a", time.Second, false),
	}
	all[0].Annotations = map[string]string{CampaignsAnnotation: LeaseBalancer + "," + LeaseConsole + "," + LeaseMaterialize}
	all[1].Annotations = map[string]string{CampaignsAnnotation: LeaseMaterialize}
	mv := newPlacementView(all, []string{LeaseMaterialize}, spreadNow, 15*time.Second, seenAtRenewal)
	if got := len(mv.led["a"]); got != 2 {
		t.Errorf("m counts %d Leases led by a, want 2", got)
	}
}

// A replica's presence Lease names its Pod as owner (so the garbage
// collector deletes it with the Pod), and a presence Lease not renewed for
// StaleAfter (a replica gone without its Pod as owner) is swept; nothing
// else is touched.
// Whether a Lease is current is judged on this replica's clock, from when
// it saw each version: a holder whose clock runs an hour behind still
// holds a Lease it keeps renewing, and one whose clock runs an hour ahead
// has lost a Lease it stopped renewing once its duration has passed here.
func TestSpreadIgnoresTheHoldersClocks(t *testing.T) {
	seen := newObservations()
	behind := lease(LeaseBalancer, "slow-clock", time.Hour, false)
	ahead := lease(LeaseConsole, "fast-clock", -time.Hour, false)
	behind.ResourceVersion, ahead.ResourceVersion = "1", "2"
	now := spreadNow
	current := func(l *coordinationv1.Lease) bool {
		_, _, ok := leaseState(l, seen.at(l, now), now)
		return ok
	}
	if !current(behind) || !current(ahead) {
		t.Fatal("Leases seen now for the first time are current for their duration")
	}
	now = now.Add(10 * time.Second)
	behind.ResourceVersion = "3" // renewed, its RenewTime still an hour old
	if !current(behind) {
		t.Error("a renewed Lease whose holder's clock is behind looks expired")
	}
	now = now.Add(10 * time.Second) // 20 s since ahead last changed, 15 s duration
	if current(ahead) {
		t.Error("a Lease not renewed for longer than its duration looks current because its holder's clock is ahead")
	}
}
