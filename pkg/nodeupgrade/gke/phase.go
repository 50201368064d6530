package gke

// The blue-green upgrade phases of a node pool (updateInfo.blueGreenInfo.phase),
// in the order GKE goes through them. WAITING_TO_DRAIN_BLUE_POOL, the wait
// of autoscaled blue-green upgrades between cordoning and draining, is only
// reported by the v1beta1 API, which is why the trigger reads that version.
const (
	PhaseUnspecified        = "PHASE_UNSPECIFIED"
	PhaseUpdateStarted      = "UPDATE_STARTED"
	PhaseCreatingGreenPool  = "CREATING_GREEN_POOL"
	PhaseCordoningBluePool  = "CORDONING_BLUE_POOL"
	PhaseWaitingToDrainBlue = "WAITING_TO_DRAIN_BLUE_POOL"
	PhaseDrainingBluePool   = "DRAINING_BLUE_POOL"
	PhaseNodePoolSoaking    = "NODE_POOL_SOAKING"
	PhaseDeletingBluePool   = "DELETING_BLUE_POOL"
	PhaseRollbackStarted    = "ROLLBACK_STARTED"
)

// BluePoolFullyCordoned reports whether every blue node is cordoned in
// phase, so that a new generation cannot land on a node about to be
// drained. CORDONING_BLUE_POOL is not enough (some blue nodes may still take
// pods); WAITING_TO_DRAIN_BLUE_POOL is the ideal window: all cordoned, none
// drained yet. A phase this code does not know is not.
func BluePoolFullyCordoned(phase string) bool {
	switch phase {
	case PhaseWaitingToDrainBlue, PhaseDrainingBluePool, PhaseNodePoolSoaking, PhaseDeletingBluePool:
		return true
	}
	return false
}
