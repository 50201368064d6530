// Command rollout-bench times the phases of a 0dt rollout of one
// environment on the local cluster that hack/cluster/run.sh sets up
// (`make bench-cluster` runs it): a Materialize on the stand-ins, whose
// clusterd replicas hydrate in -hydration, is rolled out -runs times
// (spec.requestRollout), and each rollout is split into
//
//   - create: from the request to the new generation's environmentd pod
//     Ready (the operator applies the generation; the pod is scheduled and
//     starts);
//   - catch-up: from then to the promotion (status.rollout.promotionSentAt):
//     environmentd boots read-only, creates its clusterd replicas, they
//     start and hydrate, environmentd notices at its next check
//     (0dt_deployment_hydration_check_interval, -check), from 26.32 waits
//     for its clusters to stay caught up
//     (with_0dt_caught_up_check_stability_period, -stability: 0 s here, so
//     the phase is comparable with the figures from before; upstream's
//     default is 10 minutes) and the operator notices at its next poll;
//   - promote: from the promotion to UpToDate Applied (environmentd takes
//     the catalog over, halts and reboots as the leader; the operator routes
//     the public Service to it);
//   - cleanup: from then until the old generation's environmentd and
//     clusterd pods are gone.
//
// Times come from the API server's objects (pod conditions and status
// times, stamped on this machine, with a second's precision) and from
// polls every 100 ms.
//
//	KUBECONFIG=... go run ./hack/bench/rollout -runs 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/test/cluster"
	"github.com/materializeinc/orchestratord/test/fixture"
)

func main() {
	runs := flag.Int("runs", 3, "rollouts to time")
	hydration := flag.Duration("hydration", 10*time.Second, "how long the clusterd replicas' dataflows take to hydrate (STANDIN_HYDRATION)")
	check := flag.String("check", "10s", "environmentd's 0dt_deployment_hydration_check_interval")
	stability := flag.String("stability", "0s", "environmentd's with_0dt_caught_up_check_stability_period (upstream's default: 10min)")
	image := flag.String("image", "localhost/standin/environmentd:v26.35.0", "environmentd image (a stand-in of the local cluster)")
	flag.Parse()
	if *runs < 1 {
		fmt.Fprintln(os.Stderr, "rollout-bench: -runs must be at least 1")
		os.Exit(2)
	}
	if err := run(*runs, *hydration, *check, *stability, *image); err != nil {
		fmt.Fprintln(os.Stderr, "rollout-bench:", err)
		os.Exit(1)
	}
}

type phases struct{ create, catchUp, promote, cleanup time.Duration }

func run(runs int, hydration time.Duration, check, stability, image string) error {
	c, err := cluster.Connect()
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-rollout-"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	}()
	if _, err := c.Kube.CoreV1().Secrets(ns.Name).Create(ctx, fixture.BackendSecret(ns.Name, "backend"), metav1.CreateOptions{}); err != nil {
		return err
	}
	mzs := c.Materialize.MaterializeV1alpha1().Materializes(ns.Name)
	mz := &v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Name: "mz"}, Spec: v1alpha1.MaterializeSpec{
		EnvironmentdImageRef: image, BackendSecretName: "backend",
		EnvironmentdExtraEnv: []corev1.EnvVar{{Name: "STANDIN_HYDRATION", Value: hydration.String()}},
		EnvironmentdExtraArgs: []string{"--system-parameter-default=0dt_deployment_hydration_check_interval=" + check,
			"--system-parameter-default=with_0dt_caught_up_check_stability_period=" + stability}}}
	if _, err := mzs.Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		return err
	}
	applied := func(gen uint64) (*v1alpha1.Materialize, error) {
		var got *v1alpha1.Materialize
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			m, err := mzs.Get(ctx, "mz", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got = m
			cond := meta.FindStatusCondition(m.Status.Conditions, "UpToDate")
			return m.Status.ActiveGeneration == gen && cond != nil && cond.Reason == "Applied", nil
		})
		if err != nil {
			return got, fmt.Errorf("generation %d not applied: %w", gen, err)
		}
		return got, nil
	}
	first, err := applied(1)
	if err != nil {
		return err
	}
	id := first.Status.ResourceID
	fmt.Printf("environment mz%s in %s: hydration %v, check interval %s\n", id, ns.Name, hydration, check)
	var all []phases
	for i := range runs {
		gen := uint64(i + 2)
		var requested time.Time
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			m, err := mzs.Get(ctx, "mz", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			m.Spec.RequestRollout = uuid.NewString()
			m.Spec.ForceRollout = uuid.NewString() // a new generation without a change of spec
			requested = time.Now()
			_, err = mzs.Update(ctx, m, metav1.UpdateOptions{})
			return err == nil, nil
		}); err != nil {
			return err
		}
		var promotion, ready time.Time
		var done *v1alpha1.Materialize
		podName := fmt.Sprintf("mz%s-environmentd-%d-0", id, gen)
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
			// The pod's first Ready: it becomes Ready again after its
			// halt, which moves the condition's time.
			if pod, err := c.Kube.CoreV1().Pods(ns.Name).Get(ctx, podName, metav1.GetOptions{}); err == nil && ready.IsZero() {
				for _, cond := range pod.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
						ready = cond.LastTransitionTime.Time
					}
				}
			}
			m, err := mzs.Get(ctx, "mz", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if r := m.Status.Rollout; r != nil && r.PromotionSentAt != nil && promotion.IsZero() {
				promotion = r.PromotionSentAt.Time
			}
			cond := meta.FindStatusCondition(m.Status.Conditions, "UpToDate")
			done = m
			return m.Status.ActiveGeneration == gen && cond != nil && cond.Reason == "Applied", nil
		})
		if err != nil {
			return fmt.Errorf("rollout to generation %d: %w", gen, err)
		}
		appliedAt := time.Now()
		if cond := meta.FindStatusCondition(done.Status.Conditions, "UpToDate"); cond != nil && cond.LastTransitionTime.After(promotion) {
			appliedAt = cond.LastTransitionTime.Time
		}
		var gone time.Time
		old := fmt.Sprintf("cluster.environmentd.materialize.cloud/generation=%d", gen-1)
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Pods(ns.Name).Get(ctx, fmt.Sprintf("mz%s-environmentd-%d-0", id, gen-1), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
			list, err := c.Kube.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: old})
			if err != nil || len(list.Items) > 0 {
				return false, nil
			}
			gone = time.Now()
			return true, nil
		}); err != nil {
			return fmt.Errorf("generation %d's pods not gone: %w", gen-1, err)
		}
		p := phases{create: ready.Sub(requested), catchUp: promotion.Sub(ready), promote: appliedAt.Sub(promotion), cleanup: gone.Sub(appliedAt)}
		all = append(all, p)
		fmt.Printf("rollout %d: create %v, catch-up %v, promote %v, cleanup %v, total %v\n", gen,
			p.create.Round(10*time.Millisecond), p.catchUp.Round(10*time.Millisecond), p.promote.Round(10*time.Millisecond),
			p.cleanup.Round(10*time.Millisecond), gone.Sub(requested).Round(10*time.Millisecond))
	}
	median := func(get func(phases) time.Duration) time.Duration {
		var ds []time.Duration
		for _, p := range all {
			ds = append(ds, get(p))
		}
		slices.Sort(ds)
		return ds[len(ds)/2].Round(10 * time.Millisecond)
	}
	fmt.Println(strings.Join([]string{
		fmt.Sprintf("median of %d: create %v", len(all), median(func(p phases) time.Duration { return p.create })),
		fmt.Sprintf("catch-up %v", median(func(p phases) time.Duration { return p.catchUp })),
		fmt.Sprintf("promote %v", median(func(p phases) time.Duration { return p.promote })),
		fmt.Sprintf("cleanup %v", median(func(p phases) time.Duration { return p.cleanup })),
	}, ", "))
	return nil
}
