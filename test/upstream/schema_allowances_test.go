package upstream_test

// schemaAllowance allows the differences it matches, for a reason. status is
// "deliberate" (the project differs on purpose) or "to remove" (the
// difference should go: the API types or markers are to change). Each
// entry appears, as "**name** (status): reason", in
// docs/migrating-from-orchestratord.md, section "CRD schema differences".
type schemaAllowance struct {
	name   string
	status string
	reason string
	match  []schemaMatch
}

// materializeStatusRequired are the Materialize status fields upstream's
// schema requires.
var materializeStatusRequired = []string{".status.resourceId", ".status.activeGeneration", ".status.conditions",
	".status.lastCompletedRolloutRequest", ".status.resourcesHash"}

func requiredIn(where string, paths ...string) []schemaMatch {
	var m []schemaMatch
	for _, p := range paths {
		m = append(m, schemaMatch{where: where, path: p, aspect: "required", upstream: "true", ours: "false"})
	}
	return m
}

var schemaAllowances = []schemaAllowance{
	{
		name:   "root-metadata-fields",
		status: "deliberate",
		reason: "controller-gen declares `apiVersion`, `kind` and `metadata` at the root of every schema; kube-derive leaves them out. The API server checks all three itself whatever the schema says, so both accept and store the same objects.",
		match: []schemaMatch{
			{where: "*", path: ".apiVersion", aspect: "field", upstream: "absent"},
			{where: "*", path: ".kind", aspect: "field", upstream: "absent"},
			{where: "*", path: ".metadata", aspect: "field", upstream: "absent"},
		},
	},
	{
		name:   "operator-status-fields",
		status: "deliberate",
		reason: "This operator's own bookkeeping: `status.rollout` records the rollout in progress (request, generation, start, promotion) so that a restarted or new leader resumes it, and `status.observedGeneration` (v1alpha1) the generation last reconciled. Upstream's reader ignores fields it does not know, and its schema prunes them after a rollback.",
		match: []schemaMatch{
			{where: "materializes/*", path: ".status.rollout", aspect: "field", upstream: "absent"},
			{where: "materializes/v1alpha1", path: ".status.observedGeneration", aspect: "field", upstream: "absent"},
		},
	},
	{
		name:   "nullable",
		status: "deliberate",
		reason: "Upstream's schema marks every `Option` field, and the status, `nullable: true` (schemars also lists `null` among an optional enum's values, compared here as part of nullable), so its API server stores an explicit `null`; controller-gen marks none, so ours drops an explicit `null` before defaulting and storing the object. Both operators read `null` and an absent field alike (serde's `Option`, Go's zero value), so only the stored form of an explicit `null` differs.",
		match: []schemaMatch{
			{where: "*", path: "*", aspect: "nullable", upstream: "true", ours: "false"},
		},
	},
	{
		name:   "replicas-minimum",
		status: "deliberate",
		reason: "A negative replica count is refused when the object is written; upstream accepts it and then fails to apply the Deployment.",
		match: []schemaMatch{
			{where: "materializes/*", path: ".spec.balancerdReplicas", aspect: "validation:minimum", upstream: "none", ours: "0"},
			{where: "materializes/*", path: ".spec.consoleReplicas", aspect: "validation:minimum", upstream: "none", ours: "0"},
			{where: "balancers/v1alpha1", path: ".spec.replicas", aspect: "validation:minimum", upstream: "none", ours: "0"},
			{where: "consoles/v1alpha1", path: ".spec.replicas", aspect: "validation:minimum", upstream: "none", ours: "0"},
		},
	},
	{
		name:   "bounded-collections",
		status: "deliberate",
		reason: "Every list of the spec holds at most 256 items and every map at most 128 entries (`hack/crd-bounds`): the conversion webhook, which every client's read of a Materialize goes through, budgets its memory by the nodes an object holds, and one tenant's object of a hundred thousand small items would take a budget every tenant shares. Upstream's schema bounds none; an object stored under it with more is still read and converted, and is refused only when that list or map is changed.",
		match: []schemaMatch{
			{where: "*", path: ".spec.*", aspect: "validation:maxItems", upstream: "none", ours: "256"},
			{where: "*", path: ".spec.*", aspect: "validation:maxProperties", upstream: "none", ours: "128"},
		},
	},
	{
		name:   "non-empty-names",
		status: "deliberate",
		reason: "An empty image reference, backend Secret name, certificate issuer name, or balancerd namespace or Service name is refused when the object is written; upstream accepts it and fails when it reconciles (an invalid pod, a missing object).",
		match: []schemaMatch{
			{where: "materializes/*", path: ".spec.environmentdImageRef", aspect: "validation:minLength", upstream: "none", ours: "1"},
			{where: "materializes/*", path: ".spec.backendSecretName", aspect: "validation:minLength", upstream: "none", ours: "1"},
			{where: "*", path: ".spec.*CertificateSpec.issuerRef.name", aspect: "validation:minLength", upstream: "none", ours: "1"},
			{where: "balancers/v1alpha1", path: ".spec.balancerdImageRef", aspect: "validation:minLength", upstream: "none", ours: "1"},
			{where: "balancers/v1alpha1", path: ".spec.staticRouting.environmentd*", aspect: "validation:minLength", upstream: "none", ours: "1"},
			{where: "consoles/v1alpha1", path: ".spec.consoleImageRef", aspect: "validation:minLength", upstream: "none", ours: "1"},
			{where: "consoles/v1alpha1", path: ".spec.balancerd.namespace", aspect: "validation:minLength", upstream: "none", ours: "1"},
			{where: "consoles/v1alpha1", path: ".spec.balancerd.serviceName", aspect: "validation:minLength", upstream: "none", ours: "1"},
		},
	},
	{
		name:   "resource-id-pattern",
		status: "deliberate",
		reason: "A Balancer's or Console's `spec.resourceId` names its children (`mz<id>-balancerd`, ...), so ours accepts only what upstream generates itself, 1 to 20 lowercase letters and digits; upstream accepts any string and fails on a name Kubernetes refuses.",
		match: []schemaMatch{
			{where: "balancers/v1alpha1", path: ".spec.resourceId", aspect: "validation:pattern", upstream: "none"},
			{where: "consoles/v1alpha1", path: ".spec.resourceId", aspect: "validation:pattern", upstream: "none"},
		},
	},
	{
		name:   "environment-id-immutable",
		status: "deliberate",
		reason: "A rule refuses to change `spec.environmentId` once set (the nil UUID counts as unset): upstream documents that it must not change, as it identifies the environment's data in persist, but does not enforce it.",
		match: []schemaMatch{
			{where: "materializes/*", path: ".spec", aspect: "validation:x-kubernetes-validations", upstream: "none"},
		},
	},
	{
		name:   "balancer-routing-rule",
		status: "deliberate",
		reason: "A rule requires exactly one of `staticRouting` and `fronteggRouting` when a Balancer is written; upstream accepts either mistake and its reconcile fails (\"no routing configuration present\", \"multiple routing configurations present\").",
		match: []schemaMatch{
			{where: "balancers/v1alpha1", path: ".spec", aspect: "validation:x-kubernetes-validations", upstream: "none"},
		},
	},
	{
		name:   "conditions-list-map",
		status: "deliberate",
		reason: "`status.conditions` is a list keyed by `type` (`x-kubernetes-list-type: map`, as Kubernetes' API conventions have it), so server-side apply merges each field manager's conditions instead of replacing the list; upstream's is atomic. How apply requests merge differs, not what is stored.",
		match: []schemaMatch{
			{where: "*", path: ".status.conditions", aspect: "validation:x-kubernetes-list-type", upstream: "none", ours: `"map"`},
			{where: "*", path: ".status.conditions", aspect: "validation:x-kubernetes-list-map-keys", upstream: "none", ours: `["type"]`},
		},
	},
	{
		name:   "materialize-status-not-required",
		status: "deliberate",
		reason: "Upstream's schema requires the status fields its status struct has no serde default for, because its reader refuses a status without one. This operator writes all of them in a Materialize's first status and keeps them (the rollback end-to-end test checks with `conversion.UpstreamReads` that upstream reads what it wrote); the schema does not insist, so that a status written before every field was (by a pre-release) stays writable.",
		match: append(requiredIn("materializes/v1alpha1", materializeStatusRequired...),
			requiredIn("materializes/v1", ".status.resourceId", ".status.activeGeneration", ".status.conditions")...),
	},
	{
		name:   "component-status-not-required",
		status: "deliberate",
		reason: "Upstream's schema requires a Balancer's and a Console's `status.resourceId` and `status.conditions`, and its reader refuses a status without them. This operator writes both in the first status (`conditions: []` with the resource id, by `apply.InitialStatus`; `TestFirstStatusIsReadableByUpstream`) and keeps them; the schema does not insist, so that a status written by an earlier version with the resource id alone stays writable.",
		match: append(requiredIn("balancers/v1alpha1", ".status.resourceId", ".status.conditions"),
			requiredIn("consoles/v1alpha1", ".status.resourceId", ".status.conditions")...),
	},
	{
		name:   "console-scheme-defaulted",
		status: "deliberate",
		reason: "A Console's `spec.balancerd.scheme` is required upstream; ours fills in upstream's default variant, `http`, where upstream's API server would refuse the Console. Every Console upstream accepts (both operators always set the scheme) is stored alike.",
		match: []schemaMatch{
			{where: "consoles/v1alpha1", path: ".spec.balancerd.scheme", aspect: "required", upstream: "true", ours: "false"},
			{where: "consoles/v1alpha1", path: ".spec.balancerd.scheme", aspect: "default", upstream: "none", ours: `"http"`},
		},
	},
}
