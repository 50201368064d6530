// Package spread places leadership among the controllers' replicas: each
// replica announces itself with a presence Lease, and the elections ask it
// whether this replica may take a Lease and whether it should hand one
// over, so that N replicas lead at most ceil(L/N) Leases each.
package spread

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// ReplicaLabel marks the Leases that say a replica is alive (one per
// replica, renewed like a lock), from which the placement counts the replicas.
const ReplicaLabel = "orchestratord.materialize.cloud/replica"

// CampaignsAnnotation on a presence Lease lists (comma-separated, sorted)
// the Leases the replica campaigns for: replicas may run different
// --controllers, and a Lease is placed only among the replicas that can
// lead it. A presence Lease without it (an older replica) campaigns for
// every Lease.
const CampaignsAnnotation = "orchestratord.materialize.cloud/campaigns"

// ReplicaLeaseName is the name of a replica's presence Lease.
func ReplicaLeaseName(identity string) string { return "orchestratord-replica-" + identity }

// Config is what the placement needs of the elections' configuration.
type Config struct {
	Client    kubeclient.Interface
	Namespace string
	// Identity is this replica's, as its elections write it into Leases.
	Identity string
	// Pod, when set, is the Pod this replica runs in, in Namespace: its
	// presence Lease names it as owner, so the garbage collector deletes
	// the Lease with the Pod when the replica could not (SIGKILL, OOM kill,
	// a node lost).
	Pod *metav1.OwnerReference
	// The elections' durations: how long a Lease lives unrenewed, how long
	// its holder may go without renewing, and how often they retry.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger receives one line per hand-over decision. Nil means no logs.
	Logger *zap.Logger
}

// Placement places leadership: with N live replicas and L Leases each replica
// leads at most ceil(L/N). Without it whichever replica starts first takes
// every Lease, so one crash stops every reconciler and one pod does all the
// work.
//
// Two rules, both decided on the Leases as an informer sees them:
//   - a replica takes a released Lease only if no live replica that
//     campaigns for that Lease leads fewer Leases than it does (or the
//     Lease has been free for a whole lease duration, so a Lease is never
//     left unheld by the rule); a Lease that expired under a crashed
//     holder goes to the first standby to claim it, so placement never
//     delays a failover;
//   - a replica that leads at least two more Leases than a live replica
//     that campaigns for one of them hands that one over: a graceful
//     release (its in-flight work drains first) that the less-loaded
//     replica picks up through its watch. It hands over only one Lease at
//     a time, one it has held for two lease durations.
//
// A hand-over moves a Lease from a replica with k to one with at most k-2,
// which lowers the sum of the squared loads, so the moves stop: it cannot
// flap. When every replica campaigns for every Lease they stop when the
// loads differ by at most one, which is at most ceil(L/N) each; otherwise
// when no replica leads two more than one that could take a Lease of it.
type Placement struct {
	cfg      Config
	leases   []string
	informer cache.SharedIndexInformer
	lister   coordinationlisters.LeaseLister
	withdraw sync.Once
	// withdrawn stops the heartbeat from recreating the presence Lease.
	withdrawn atomic.Bool
	seen      *observations
}

// observations are when this replica first saw each version of each Lease,
// on its own clock. Whether a Lease is current is judged from them, as
// client-go's elector judges its own Lease, never by comparing this
// machine's clock with a time another machine wrote (RenewTime): clock
// skew between replicas cannot make a live Lease look expired, or a dead
// one live. A version first seen late only makes a Lease look alive
// longer, never shorter.
type observations struct {
	mu   sync.Mutex
	seen map[string]observation // Lease name -> its latest version seen
}

type observation struct {
	resourceVersion string
	at              time.Time
}

func newObservations() *observations { return &observations{seen: map[string]observation{}} }

// at returns when l's version was first seen, recording now if it is new.
func (o *observations) at(l *coordinationv1.Lease, now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if seen, ok := o.seen[l.Name]; ok && seen.resourceVersion == l.ResourceVersion {
		return seen.at
	}
	o.seen[l.Name] = observation{resourceVersion: l.ResourceVersion, at: now}
	return now
}

func (o *observations) forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, name)
}

// New returns the placement of leases among the replicas sharing
// cfg's namespace. Run must be running for it to place anything.
func New(cfg Config, leases []string) *Placement {
	inf := cache.NewSharedIndexInformer(kubeclient.ListWatch(cfg.Client, cfg.Client.CoordinationV1().Leases(cfg.Namespace), nil),
		&coordinationv1.Lease{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	leases = slices.Clone(leases)
	slices.Sort(leases)
	seen := newObservations()
	// Versions are timed as they arrive, not when a view is next computed.
	observe := func(obj any) {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			seen.at(l, time.Now())
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if l, ok := obj.(*coordinationv1.Lease); ok {
				seen.forget(l.Name)
			}
		},
	})
	return &Placement{cfg: cfg, leases: leases, informer: inf, lister: coordinationlisters.NewLeaseLister(inf.GetIndexer()), seen: seen}
}

// Run keeps this replica's presence Lease renewed and the view of every
// Lease current until ctx ends, then deletes the presence Lease so that
// the others count one replica fewer at once.
func (s *Placement) Run(ctx context.Context) {
	var informing sync.WaitGroup
	defer informing.Wait()
	// Cancelled before the wait on any return, a panic's included.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informing.Go(func() { s.informer.RunWithContext(ctx) })

	name := ReplicaLeaseName(s.cfg.Identity)
	log := s.cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	tick := time.NewTicker(s.cfg.RetryPeriod)
	defer tick.Stop()
	var swept time.Time
	for {
		if err := s.heartbeat(ctx, name); err != nil && ctx.Err() == nil {
			log.Warn("replica presence lease not renewed", zap.String("lease", name), zap.Error(err))
		}
		if now := time.Now(); now.Sub(swept) >= sweepEvery && s.sweep(ctx, now, log) {
			swept = now
		}
		select {
		case <-ctx.Done():
			s.Withdraw()
			return
		case <-tick.C:
		}
	}
}

// Withdraw deletes this replica's presence Lease, once: a replica that is
// stopping must not be counted as the least loaded (the others would leave
// it the Leases it is about to release). Run calls it when it ends; a term
// ending for shutdown calls it before releasing its Lease, so the others
// see the replica gone before they see the Lease free.
func (s *Placement) Withdraw() {
	s.withdraw.Do(func() {
		s.withdrawn.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RenewDeadline)
		defer cancel()
		_ = s.cfg.Client.CoordinationV1().Leases(s.cfg.Namespace).Delete(ctx, ReplicaLeaseName(s.cfg.Identity), metav1.DeleteOptions{})
	})
}

func (s *Placement) heartbeat(ctx context.Context, name string) error {
	if ctx.Err() != nil || s.withdrawn.Load() {
		return nil // stopping: not a candidate any more
	}
	leases := s.cfg.Client.CoordinationV1().Leases(s.cfg.Namespace)
	campaigns := strings.Join(s.leases, ",")
	now := metav1.NowMicro()
	// Presence expires after a few missed heartbeats, well before the
	// Leases of a crashed replica do, so a crashed replica never looks like
	// the least loaded one when its Leases are claimed.
	duration := int32(max(time.Second, 3*s.cfg.RetryPeriod) / time.Second)
	spec := coordinationv1.LeaseSpec{HolderIdentity: &s.cfg.Identity, LeaseDurationSeconds: &duration, RenewTime: &now}
	current, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		spec.AcquireTime = &now
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ReplicaLabel: "true"},
				Annotations: map[string]string{CampaignsAnnotation: campaigns}, OwnerReferences: s.owners()},
			Spec: spec,
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	current.Spec.HolderIdentity, current.Spec.LeaseDurationSeconds, current.Spec.RenewTime = spec.HolderIdentity, spec.LeaseDurationSeconds, spec.RenewTime
	metav1.SetMetaDataAnnotation(&current.ObjectMeta, CampaignsAnnotation, campaigns)
	if owners := s.owners(); owners != nil {
		current.OwnerReferences = owners
	}
	_, err = leases.Update(ctx, current, metav1.UpdateOptions{})
	return err
}

// A presence Lease not renewed for StaleAfter belongs to a replica that is
// gone and could not delete it (SIGKILL, OOM kill, a lost node) and whose
// Pod was not its owner (Config.Pod unset: not run in a Pod, or a Lease
// written by an older version): sweep deletes it, checked every sweepEvery
// by every replica. A replica that was only cut off that long makes its
// Lease again on its next heartbeat.
const (
	StaleAfter = time.Hour
	sweepEvery = 10 * time.Minute
)

// sweep deletes the presence Leases stale at now, each only at the version
// seen stale (a replica that renewed it in between keeps it). It reports
// whether it looked: not before the informer has synced.
func (s *Placement) sweep(ctx context.Context, now time.Time, log *zap.Logger) bool {
	if !s.informer.HasSynced() {
		return false
	}
	all, err := s.lister.List(labels.SelectorFromSet(labels.Set{ReplicaLabel: "true"}))
	if err != nil {
		return false
	}
	for _, l := range all {
		if !presenceStale(l, now) {
			continue
		}
		rv := l.ResourceVersion
		err := s.cfg.Client.CoordinationV1().Leases(s.cfg.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil:
			log.Info("stale replica presence lease deleted", zap.String("lease", l.Name), zap.Time("renewed", l.Spec.RenewTime.Time))
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil:
			log.Warn("stale replica presence lease not deleted", zap.String("lease", l.Name), zap.Error(err))
		}
	}
	return true
}

func presenceStale(l *coordinationv1.Lease, now time.Time) bool {
	renewed := l.CreationTimestamp.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	return now.Sub(renewed) > StaleAfter
}

// owners is the presence Lease's owner: this replica's Pod, if known.
func (s *Placement) owners() []metav1.OwnerReference {
	if s.cfg.Pod == nil {
		return nil
	}
	return []metav1.OwnerReference{*s.cfg.Pod}
}

// MayAcquire tells whether this replica may take the free Lease named lease.
// It reads the Leases afresh rather than from the informer: the release
// that makes a Lease free reaches each replica through that Lease's own
// watch, which may run ahead of the informer, and a replica deciding on a
// view without the releasing replica's withdrawal would defer to it and
// wait a retry period. Acquisitions are rare; the list is a few Leases.
func (s *Placement) MayAcquire(lease string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RetryPeriod)
	defer cancel()
	list, err := s.cfg.Client.CoordinationV1().Leases(s.cfg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		v, ok := s.view()
		return !ok || v.mayAcquire(s.cfg.Identity, lease) // no view: first come, as without Spread
	}
	all := make([]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		all[i] = &list.Items[i]
	}
	return newPlacementView(all, s.leases, time.Now(), s.cfg.LeaseDuration, s.seen.at).mayAcquire(s.cfg.Identity, lease)
}

// ShouldHandOver tells whether this replica, leading lease, should give it
// to a less-loaded replica.
func (s *Placement) ShouldHandOver(lease string) bool {
	v, ok := s.view()
	return ok && v.shouldHandOver(s.cfg.Identity, lease, time.Now(), 2*s.cfg.LeaseDuration)
}

func (s *Placement) view() (placementView, bool) {
	if !s.informer.HasSynced() {
		return placementView{}, false
	}
	all, err := s.lister.List(labels.Everything())
	if err != nil {
		return placementView{}, false
	}
	return newPlacementView(all, s.leases, time.Now(), s.cfg.LeaseDuration, s.seen.at), true
}

// placementView is who is alive and who leads what, at one moment.
type placementView struct {
	alive map[string]bool // replicas whose presence Lease is current
	// campaigns holds, per live replica that says, the Leases it campaigns
	// for; a replica missing from it campaigns for every Lease.
	campaigns map[string]map[string]bool
	led       map[string][]string // identity -> Leases it leads (sorted)
	held      map[string]bool     // controlled Leases held now
	freeFor   map[string]time.Duration
	acquired  map[string]time.Time // Lease -> when its holder acquired it
	// horizon is how long a free Lease waits for a least-loaded replica
	// before any replica may take it.
	horizon time.Duration
}

// newPlacementView reads the Leases: the presence Leases, and the Leases
// any live replica campaigns for (mine included, controlled), whose holders
// carry them as load. seen says when a Lease's version was first seen
// (observations.at).
func newPlacementView(all []*coordinationv1.Lease, controlled []string, now time.Time, horizon time.Duration,
	seen func(*coordinationv1.Lease, time.Time) time.Time,
) placementView {
	v := placementView{alive: map[string]bool{}, campaigns: map[string]map[string]bool{}, led: map[string][]string{},
		held: map[string]bool{}, freeFor: map[string]time.Duration{}, acquired: map[string]time.Time{}, horizon: horizon}
	isControlled := map[string]bool{}
	for _, name := range controlled {
		isControlled[name] = true
	}
	for _, l := range all {
		holder, _, current := leaseState(l, seen(l, now), now)
		if l.Labels[ReplicaLabel] != "true" || !current {
			continue
		}
		v.alive[holder] = true
		if list, ok := l.Annotations[CampaignsAnnotation]; ok {
			names := map[string]bool{}
			for _, name := range strings.Split(list, ",") {
				if name == "" {
					continue
				}
				names[name] = true
				isControlled[name] = true
			}
			v.campaigns[holder] = names
		}
	}
	for name := range isControlled {
		v.freeFor[name] = 0
	}
	for _, l := range all {
		holder, expires, current := leaseState(l, seen(l, now), now)
		if l.Labels[ReplicaLabel] == "true" || !isControlled[l.Name] {
			continue
		}
		if current {
			v.held[l.Name] = true
			v.led[holder] = append(v.led[holder], l.Name)
			if l.Spec.AcquireTime != nil {
				v.acquired[l.Name] = l.Spec.AcquireTime.Time
			}
		} else {
			v.freeFor[l.Name] = now.Sub(expires)
		}
	}
	for _, names := range v.led {
		slices.Sort(names)
	}
	return v
}

// leaseState returns a Lease's holder, when it expires (or was released),
// and whether it is held now, for a version of it first seen at seen.
func leaseState(l *coordinationv1.Lease, seen, now time.Time) (holder string, expires time.Time, current bool) {
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	expires = seen
	if holder != "" && l.Spec.LeaseDurationSeconds != nil {
		expires = expires.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	}
	return holder, expires, holder != "" && now.Before(expires)
}

// campaignsFor tells whether replica id campaigns for lease.
func (v placementView) campaignsFor(id, lease string) bool {
	names, said := v.campaigns[id]
	return !said || names[lease]
}

// minLoad is the fewest Leases led by a live replica that campaigns for
// lease (me included).
func (v placementView) minLoad(me, lease string) int {
	lowest := len(v.led[me])
	for id := range v.alive {
		if v.campaignsFor(id, lease) {
			lowest = min(lowest, len(v.led[id]))
		}
	}
	return lowest
}

func (v placementView) mayAcquire(me, lease string) bool {
	if len(v.led[me]) <= v.minLoad(me, lease) {
		return true
	}
	// Whoever should take it has not: never leave a Lease unheld for long.
	return v.freeFor[lease] > v.horizon
}

func (v placementView) shouldHandOver(me, lease string, now time.Time, minHold time.Duration) bool {
	// One at a time: the last by name of mine that a replica leading at
	// least two fewer campaigns for.
	mine := v.led[me]
	var movable []string
	for _, name := range mine {
		if len(mine)-v.minLoad(me, name) >= 2 {
			movable = append(movable, name)
		}
	}
	if len(movable) == 0 || movable[len(movable)-1] != lease {
		return false
	}
	// A Lease in flight (released, not yet taken) is nobody's load yet:
	// moving another now could move two where one was due.
	for name := range v.freeFor {
		if !v.held[name] {
			return false
		}
	}
	acquired, ok := v.acquired[lease]
	return ok && now.Sub(acquired) >= minHold
}
