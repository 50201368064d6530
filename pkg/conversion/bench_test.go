package conversion

import "testing"

const benchObject = `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize",
 "metadata":{"name":"mz","namespace":"bench","labels":{"team":"db"},"annotations":{"materialize.cloud/force-rollout":"1"}},
 "spec":{"environmentdImageRef":"materialize/environmentd:v26.1.0","backendSecretName":"backend",
   "environmentdExtraArgs":["--log-filter=info"],"environmentdExtraEnv":[{"name":"MZ_X","value":"1"}],
   "environmentdIamRoleArn":"arn:aws:iam::1:role/env","requestRollout":"6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
   "forcePromote":"00000000-0000-0000-0000-000000000000","rolloutStrategy":"WaitUntilReady","rolloutRequestTimeout":"24h",
   "environmentdResourceRequirements":{"requests":{"cpu":"2","memory":"8Gi"},"limits":{"memory":"8Gi"}},
   "balancerdReplicas":2,"consoleReplicas":2,"authenticatorKind":"None","environmentId":"0b0b0b0b-1111-4222-8333-444444444444"},
 "status":{"resourceId":"abcdefghij","activeGeneration":2,"lastCompletedRolloutRequest":"6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
   "resourcesHash":"r","observedGeneration":3,"conditions":[{"type":"UpToDate","status":"True","reason":"Applied","message":"",
   "lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":3}]}}`

// go test -bench . -benchmem ./pkg/conversion
func BenchmarkConvert(b *testing.B) {
	alpha, err := decodeValue([]byte(benchObject))
	if err != nil {
		b.Fatal(err)
	}
	v1obj, err := Convert(alpha.(map[string]any), V1)
	if err != nil {
		b.Fatal(err)
	}
	for name, tc := range map[string]struct {
		obj map[string]any
		to  string
	}{"v1alpha1-to-v1": {alpha.(map[string]any), V1}, "v1-to-v1alpha1": {v1obj, V1Alpha1}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Convert(tc.obj, tc.to); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
