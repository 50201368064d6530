package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	v1 "github.com/materializeinc/orchestratord/pkg/apis/materialize/v1"
	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	orchconversion "github.com/materializeinc/orchestratord/pkg/conversion"
)

// The controller-runtime peer: what a Go operator author gets from
// controller-runtime's conversion webhook with hub (v1) and spoke
// (v1alpha1) Go types. It applies the same rules on typed objects but is
// lossy, as typed conversions are: no carry annotations, so unknown fields
// and what one version cannot express are dropped, and a partial object
// gets zero values. The rollout hash is the usual Go way (json.Marshal of
// the typed spec, SHA-256), comparable work to upstream's layout.

// hub is v1, the version every conversion goes through.
type hub struct{ v1.Materialize }

func (*hub) Hub() {}

func (h *hub) DeepCopyObject() runtime.Object { return &hub{*h.Materialize.DeepCopy()} }

// spoke is v1alpha1.
type spoke struct{ v1alpha1.Materialize }

func (s *spoke) DeepCopyObject() runtime.Object { return &spoke{*s.Materialize.DeepCopy()} }

var (
	_ ctrlconversion.Hub         = &hub{}
	_ ctrlconversion.Convertible = &spoke{}
)

const nilUUID = "00000000-0000-0000-0000-000000000000"

func (s *spoke) ConvertTo(dstRaw ctrlconversion.Hub) error {
	dst := dstRaw.(*hub)
	src := &s.Materialize
	dst.ObjectMeta = src.ObjectMeta
	in, out := &src.Spec, &dst.Spec
	out.EnvironmentdImageRef = in.EnvironmentdImageRef
	out.EnvironmentdExtraArgs = in.EnvironmentdExtraArgs
	out.EnvironmentdExtraEnv = in.EnvironmentdExtraEnv
	out.EnvironmentdConnectionRoleArn = in.EnvironmentdConnectionRoleArn
	out.EnvironmentdResourceRequirements = in.EnvironmentdResourceRequirements
	out.EnvironmentdScratchVolumeStorageRequirement = in.EnvironmentdScratchVolumeStorageRequirement
	out.BalancerdResourceRequirements = in.BalancerdResourceRequirements
	out.ConsoleResourceRequirements = in.ConsoleResourceRequirements
	out.BalancerdReplicas = in.BalancerdReplicas
	out.ConsoleReplicas = in.ConsoleReplicas
	out.ServiceAccountName = in.ServiceAccountName
	out.ServiceAccountAnnotations = in.ServiceAccountAnnotations
	if in.EnvironmentdIamRoleArn != "" {
		if _, set := out.ServiceAccountAnnotations[orchconversion.IAMRoleAnnotation]; !set {
			annotations := make(map[string]string, len(in.ServiceAccountAnnotations)+1)
			for k, v := range in.ServiceAccountAnnotations {
				annotations[k] = v
			}
			annotations[orchconversion.IAMRoleAnnotation] = in.EnvironmentdIamRoleArn
			out.ServiceAccountAnnotations = annotations
		}
	}
	out.ServiceAccountLabels = in.ServiceAccountLabels
	out.PodAnnotations = in.PodAnnotations
	out.PodLabels = in.PodLabels
	out.ForceRollout = in.ForceRollout
	if in.ForcePromote != "" && in.ForcePromote != nilUUID {
		promote := in.ForcePromote
		out.ForcePromote = &promote
	}
	out.RolloutStrategy = v1.MaterializeRolloutStrategy(in.RolloutStrategy)
	out.RolloutRequestTimeout = in.RolloutRequestTimeout
	out.BackendSecretName = in.BackendSecretName
	out.AuthenticatorKind = v1.AuthenticatorKind(in.AuthenticatorKind)
	out.EnableRBAC = in.EnableRBAC
	out.EnvironmentID = in.EnvironmentID
	out.SystemParameterConfigmapName = in.SystemParameterConfigmapName
	out.BalancerdExternalCertificateSpec = certToV1(in.BalancerdExternalCertificateSpec)
	out.ConsoleExternalCertificateSpec = certToV1(in.ConsoleExternalCertificateSpec)
	out.InternalCertificateSpec = certToV1(in.InternalCertificateSpec)

	hash, err := typedRolloutHash(out, dst.Annotations)
	if err != nil {
		return err
	}
	st, ss := &dst.Status, &src.Status
	st.ResourceID = ss.ResourceID
	st.ActiveGeneration = ss.ActiveGeneration
	st.LastCompletedRolloutEnvironmentdImageRef = ss.LastCompletedRolloutEnvironmentdImageRef
	st.Rollout = (*v1.MaterializeRolloutStatus)(ss.Rollout)
	st.Conditions = ss.Conditions
	st.RequestedRolloutHash = hash
	st.LastCompletedRolloutHash = ss.LastCompletedRolloutHash
	if st.LastCompletedRolloutHash == "" && ss.LastCompletedRolloutRequest != "" && ss.LastCompletedRolloutRequest == in.RequestRollout {
		st.LastCompletedRolloutHash = hash
	}
	return nil
}

func (s *spoke) ConvertFrom(srcRaw ctrlconversion.Hub) error {
	src := srcRaw.(*hub)
	dst := &s.Materialize
	dst.ObjectMeta = src.ObjectMeta
	in, out := &src.Spec, &dst.Spec
	out.EnvironmentdImageRef = in.EnvironmentdImageRef
	out.EnvironmentdExtraArgs = in.EnvironmentdExtraArgs
	out.EnvironmentdExtraEnv = in.EnvironmentdExtraEnv
	out.EnvironmentdConnectionRoleArn = in.EnvironmentdConnectionRoleArn
	out.EnvironmentdResourceRequirements = in.EnvironmentdResourceRequirements
	out.EnvironmentdScratchVolumeStorageRequirement = in.EnvironmentdScratchVolumeStorageRequirement
	out.BalancerdResourceRequirements = in.BalancerdResourceRequirements
	out.ConsoleResourceRequirements = in.ConsoleResourceRequirements
	out.BalancerdReplicas = in.BalancerdReplicas
	out.ConsoleReplicas = in.ConsoleReplicas
	out.ServiceAccountName = in.ServiceAccountName
	out.ServiceAccountAnnotations = in.ServiceAccountAnnotations
	out.ServiceAccountLabels = in.ServiceAccountLabels
	out.PodAnnotations = in.PodAnnotations
	out.PodLabels = in.PodLabels
	out.ForceRollout = in.ForceRollout
	if in.ForcePromote != nil {
		out.ForcePromote = *in.ForcePromote
	}
	out.RolloutStrategy = v1alpha1.MaterializeRolloutStrategy(in.RolloutStrategy)
	out.RolloutRequestTimeout = in.RolloutRequestTimeout
	out.BackendSecretName = in.BackendSecretName
	out.AuthenticatorKind = v1alpha1.AuthenticatorKind(in.AuthenticatorKind)
	out.EnableRBAC = in.EnableRBAC
	out.EnvironmentID = in.EnvironmentID
	out.SystemParameterConfigmapName = in.SystemParameterConfigmapName
	out.BalancerdExternalCertificateSpec = certToV1alpha1(in.BalancerdExternalCertificateSpec)
	out.ConsoleExternalCertificateSpec = certToV1alpha1(in.ConsoleExternalCertificateSpec)
	out.InternalCertificateSpec = certToV1alpha1(in.InternalCertificateSpec)
	hash, err := typedRolloutHash(in, src.Annotations)
	if err != nil {
		return err
	}
	out.RequestRollout = orchconversion.RolloutRequest(hash)

	st, ss := &dst.Status, &src.Status
	st.ResourceID = ss.ResourceID
	st.ActiveGeneration = ss.ActiveGeneration
	st.LastCompletedRolloutEnvironmentdImageRef = ss.LastCompletedRolloutEnvironmentdImageRef
	st.Rollout = (*v1alpha1.MaterializeRolloutStatus)(ss.Rollout)
	st.Conditions = ss.Conditions
	st.LastCompletedRolloutHash = ss.LastCompletedRolloutHash
	if ss.LastCompletedRolloutHash != "" {
		st.LastCompletedRolloutRequest = orchconversion.RolloutRequest(ss.LastCompletedRolloutHash)
	}
	return nil
}

func certToV1(in *v1alpha1.MaterializeCertSpec) *v1.MaterializeCertSpec {
	if in == nil {
		return nil
	}
	out := &v1.MaterializeCertSpec{
		DNSNames: in.DNSNames, Duration: in.Duration, RenewBefore: in.RenewBefore,
		PrivateKeyAlgorithm: v1.PrivateKeyAlgorithm(in.PrivateKeyAlgorithm), PrivateKeySize: in.PrivateKeySize,
	}
	if in.IssuerRef != nil {
		out.IssuerRef = &v1.CertificateIssuerRef{Name: in.IssuerRef.Name, Kind: in.IssuerRef.Kind, Group: in.IssuerRef.Group}
	}
	if in.SecretTemplate != nil {
		out.SecretTemplate = &v1.CertificateSecretTemplate{Annotations: in.SecretTemplate.Annotations, Labels: in.SecretTemplate.Labels}
	}
	return out
}

func certToV1alpha1(in *v1.MaterializeCertSpec) *v1alpha1.MaterializeCertSpec {
	if in == nil {
		return nil
	}
	out := &v1alpha1.MaterializeCertSpec{
		DNSNames: in.DNSNames, Duration: in.Duration, RenewBefore: in.RenewBefore,
		PrivateKeyAlgorithm: v1alpha1.PrivateKeyAlgorithm(in.PrivateKeyAlgorithm), PrivateKeySize: in.PrivateKeySize,
	}
	if in.IssuerRef != nil {
		out.IssuerRef = &v1alpha1.CertificateIssuerRef{Name: in.IssuerRef.Name, Kind: in.IssuerRef.Kind, Group: in.IssuerRef.Group}
	}
	if in.SecretTemplate != nil {
		out.SecretTemplate = &v1alpha1.CertificateSecretTemplate{Annotations: in.SecretTemplate.Annotations, Labels: in.SecretTemplate.Labels}
	}
	return out
}

func typedRolloutHash(spec *v1.MaterializeSpec, annotations map[string]string) (string, error) {
	doc, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hashing spec: %w", err)
	}
	h := sha256.New()
	h.Write(doc)
	if force, ok := annotations[orchconversion.ForceRolloutAnnotation]; ok {
		h.Write([]byte(force))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// peerHandler is controller-runtime's conversion webhook handler for the
// hub and spoke types.
func peerHandler() (http.Handler, error) {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(v1.SchemeGroupVersion.WithKind("Materialize"), &hub{})
	scheme.AddKnownTypeWithName(v1alpha1.SchemeGroupVersion.WithKind("Materialize"), &spoke{})
	return conversion.NewWebhookHandler(scheme, conversion.NewRegistry()), nil
}
