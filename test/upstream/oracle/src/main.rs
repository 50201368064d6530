//! The oracle of the differential test (../differential_test.go): a model of
//! upstream orchestratord's Materialize CRD as serde reads and writes it,
//! restated from upstream's declarations in
//! src/cloud-resources/src/crd/materialize.rs and crd.rs (field names and
//! order, Rust types, serde attributes, the From impls, the rollout hash and
//! the webhook's conversion functions) and from the behaviour of the crates
//! it uses (k8s-openapi 0.27, kube-derive 3.1, kopium-generated cert-manager
//! types). It is not upstream's code.
//!
//! Protocol: one JSON request per line on stdin, one JSON response per line
//! on stdout, in order, each echoing the request's "id":
//!   {"op":"hash","spec":S,"annotations":A}     -> {"hash":H} | {"error":E}
//!   {"op":"hash","object":O}  the same, of O's spec and metadata.annotations
//!   {"op":"to_v1"|"to_v1alpha1","object":O[,"read_back":G]}
//!       -> {"object":O'} | {"error":E}, with "whole": whether the input reads
//!          whole; given G and a whole input, "read_back" and "read_back_own":
//!          whether the target version reads G and O' ({"ok":..,"error":..})
//!   {"op":"read_v1"|"read_v1alpha1","object":O} -> {"ok":true} | {"ok":false,"error":E}

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, BufWriter, Write};

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_derive::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use uuid::Uuid;

const FORCE_ROLLOUT_ANNOTATION: &str = "materialize.cloud/force-rollout";
const IAM_ROLE_ANNOTATION: &str = "eks.amazonaws.com/role-arn";
const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";
const V1ALPHA1: &str = "materialize.cloud/v1alpha1";
const V1: &str = "materialize.cloud/v1";

// ---------------------------------------------------------------------------
// k8s-openapi 0.27 (feature v1_34). Its Deserialize impls are hand-written:
// they visit maps only, ignore unknown keys, read every field through an
// Option (so null is absent) and default a missing required field (its
// "required" strings become ""), except Condition.lastTransitionTime, which
// must be present. Its Serialize impls write required fields always and
// optional ones only when Some, in the order of the Rust field names
// (alphabetical). The structs below are declared in that order.
// ---------------------------------------------------------------------------

/// A required k8s-openapi field: read through an Option, defaulted.
fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Wraps a serde-derived struct so that it reads from a map only, as
/// k8s-openapi's visitors do (serde's derive would also take a sequence).
/// `map_only!(write ...)` also writes it as the inner struct does.
macro_rules! map_only {
    ($outer:ident($inner:ident)) => {
        #[derive(Clone, Debug)]
        pub struct $outer(pub $inner);

        impl<'de> Deserialize<'de> for $outer {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> de::Visitor<'de> for V {
                    type Value = $outer;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str(stringify!($outer))
                    }
                    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<$outer, A::Error> {
                        $inner::deserialize(de::value::MapAccessDeserializer::new(map)).map($outer)
                    }
                }
                d.deserialize_struct(stringify!($outer), &[], V)
            }
        }
    };
    (write $outer:ident($inner:ident)) => {
        map_only!($outer($inner));

        impl Serialize for $outer {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.0.serialize(s)
            }
        }
    };
}

/// Quantity(String): a string as written, or an integer as its digits; any
/// other JSON value (a float included) is refused.
#[derive(Clone, Debug)]
pub struct Quantity(pub String);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("Quantity")
            }
            fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Quantity, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_i32<E: de::Error>(self, v: i32) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Quantity, E> {
                Ok(Quantity(v))
            }
        }
        d.deserialize_newtype_struct("Quantity", V)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_newtype_struct("Quantity", &self.0)
    }
}

/// Time(jiff::Timestamp), read from a string. Only deserialized here. The
/// check is a subset of jiff's RFC 3339 / Temporal parser: a date, a T (or
/// t or space), HH:MM[:SS[.fraction]], and an offset (Z or +-HH[:MM]). The
/// test generates only timestamps on which this and jiff agree.
#[derive(Clone, Debug)]
pub struct Time;

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Time;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Time, E> {
                if is_timestamp(v) {
                    Ok(Time)
                } else {
                    Err(E::custom(format!("invalid timestamp {v:?}")))
                }
            }
        }
        d.deserialize_str(V)
    }
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| -> Option<u32> {
        let part = b.get(from..from + n)?;
        if part.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(part).ok()?.parse().ok()
        } else {
            None
        }
    };
    let (month, day) = match (digits(0, 4), digits(5, 2), digits(8, 2)) {
        (Some(_), Some(month), Some(day)) => (month, day),
        _ => return false,
    };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return false;
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return false;
    }
    let (hour, minute) = match (digits(11, 2), digits(14, 2)) {
        (Some(hour), Some(minute)) => (hour, minute),
        _ => return false,
    };
    if b.get(13) != Some(&b':') || hour > 23 || minute > 59 {
        return false;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        match digits(i + 1, 2) {
            Some(second) if second <= 60 => i += 3,
            _ => return false,
        }
        if matches!(b.get(i), Some(b'.' | b',')) {
            let start = i + 1;
            i = start;
            while b.get(i).map_or(false, u8::is_ascii_digit) {
                i += 1;
            }
            if i == start || i - start > 9 {
                return false;
            }
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => match (digits(i + 1, 2), b.len() - i) {
            (Some(h), 3) => h <= 23,
            (Some(h), 6) => b[i + 3] == b':' && h <= 23 && digits(i + 4, 2).map_or(false, |m| m <= 59),
            _ => false,
        },
        _ => false,
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarFields {
    #[serde(default, deserialize_with = "or_default")]
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_from: Option<EnvVarSource>,
}
map_only!(write EnvVar(EnvVarFields));

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSourceFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    config_map_key_ref: Option<KeySelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field_ref: Option<ObjectFieldSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_key_ref: Option<FileKeySelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_field_ref: Option<ResourceFieldSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret_key_ref: Option<KeySelector>,
}
map_only!(write EnvVarSource(EnvVarSourceFields));

/// ConfigMapKeySelector and SecretKeySelector have the same fields.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct KeySelectorFields {
    #[serde(default, deserialize_with = "or_default")]
    key: String,
    #[serde(default, deserialize_with = "or_default")]
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    optional: Option<bool>,
}
map_only!(write KeySelector(KeySelectorFields));

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectFieldSelectorFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    field_path: String,
}
map_only!(write ObjectFieldSelector(ObjectFieldSelectorFields));

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileKeySelectorFields {
    #[serde(default, deserialize_with = "or_default")]
    key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    optional: Option<bool>,
    #[serde(default, deserialize_with = "or_default")]
    path: String,
    #[serde(default, deserialize_with = "or_default")]
    volume_name: String,
}
map_only!(write FileKeySelector(FileKeySelectorFields));

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFieldSelectorFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    container_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    divisor: Option<Quantity>,
    #[serde(default, deserialize_with = "or_default")]
    resource: String,
}
map_only!(write ResourceFieldSelector(ResourceFieldSelectorFields));

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ResourceRequirementsFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    claims: Option<Vec<ResourceClaim>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<BTreeMap<String, Quantity>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requests: Option<BTreeMap<String, Quantity>>,
}
map_only!(write ResourceRequirements(ResourceRequirementsFields));

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ResourceClaimFields {
    #[serde(default, deserialize_with = "or_default")]
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<String>,
}
map_only!(write ResourceClaim(ResourceClaimFields));

/// meta/v1 Condition. Only read: lastTransitionTime is required (a missing
/// one is an error, null is not a Time); the strings default to "".
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionFields {
    #[allow(dead_code)]
    last_transition_time: Time,
    #[serde(default, deserialize_with = "or_default")]
    #[allow(dead_code)]
    message: String,
    #[allow(dead_code)]
    observed_generation: Option<i64>,
    #[serde(default, deserialize_with = "or_default")]
    reason: String,
    #[serde(default, deserialize_with = "or_default")]
    #[allow(dead_code)]
    status: String,
    #[serde(rename = "type", default, deserialize_with = "or_default")]
    #[allow(dead_code)]
    type_: String,
}
map_only!(Condition(ConditionFields));

/// meta/v1 ObjectMeta: every field optional. Only read, for the typed
/// reader's verdict, and for annotations.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct ObjectMetaFields {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    managed_fields: Option<Vec<ManagedFieldsEntry>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}
map_only!(ObjectMeta(ObjectMetaFields));

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct ManagedFieldsEntryFields {
    api_version: Option<String>,
    fields_type: Option<String>,
    fields_v1: Option<Value>,
    manager: Option<String>,
    operation: Option<String>,
    subresource: Option<String>,
    time: Option<Time>,
}
map_only!(ManagedFieldsEntry(ManagedFieldsEntryFields));

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct OwnerReferenceFields {
    #[serde(default, deserialize_with = "or_default")]
    api_version: String,
    block_owner_deletion: Option<bool>,
    controller: Option<bool>,
    #[serde(default, deserialize_with = "or_default")]
    kind: String,
    #[serde(default, deserialize_with = "or_default")]
    name: String,
    #[serde(default, deserialize_with = "or_default")]
    uid: String,
}
map_only!(OwnerReference(OwnerReferenceFields));

// ---------------------------------------------------------------------------
// crd.rs: MaterializeCertSpec (serde derive, camelCase, Options written as
// null but for the two key fields) and the kopium-generated cert-manager
// types it holds (serde derive, field names as in the CRD).
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MaterializeCertSpec {
    dns_names: Option<Vec<String>>,
    duration: Option<String>,
    renew_before: Option<String>,
    issuer_ref: Option<CertificateIssuerRef>,
    secret_template: Option<CertificateSecretTemplate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    private_key_algorithm: Option<CertificatePrivateKeyAlgorithm>,
    #[serde(skip_serializing_if = "Option::is_none")]
    private_key_size: Option<i64>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct CertificateIssuerRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    name: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct CertificateSecretTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub enum CertificatePrivateKeyAlgorithm {
    #[serde(rename = "RSA")]
    Rsa,
    #[serde(rename = "ECDSA")]
    Ecdsa,
    Ed25519,
}

// ---------------------------------------------------------------------------
// crd/materialize.rs: the enums and newtypes both versions share.
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub enum MaterializeRolloutStrategy {
    #[default]
    WaitUntilReady,
    ManuallyPromote,
    ImmediatelyPromoteCausingDowntime,
}

/// mz_server_core::listeners::AuthenticatorKind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, Serialize)]
pub enum AuthenticatorKind {
    Frontegg,
    Password,
    Sasl,
    Oidc,
    #[default]
    None,
}

/// #[serde(transparent)], defaulting to "24h".
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct RolloutRequestTimeout(pub String);

impl Default for RolloutRequestTimeout {
    fn default() -> Self {
        RolloutRequestTimeout("24h".to_owned())
    }
}

// ---------------------------------------------------------------------------
// The partial mirrors: every field a PartialField (absent / null / value,
// serde's "double option"), unknown fields kept in a flattened map.
// ---------------------------------------------------------------------------

pub type PartialField = Option<Option<Value>>;

mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }

    pub fn serialize<T: Serialize, S: Serializer>(v: &Option<Option<T>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }
}

macro_rules! partial_struct {
    ($name:ident { $($field:ident),* $(,)? }) => {
        #[derive(Debug, Default, Deserialize, Serialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $(
                #[serde(default, with = "double_option", skip_serializing_if = "Option::is_none")]
                pub $field: PartialField,
            )*
            #[serde(flatten)]
            pub extra: Map<String, Value>,
        }
    };
}

/// The partial mirror of a whole object (either version).
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialObject<Spec, Status> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Spec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn present<T: Serialize>(v: T) -> PartialField {
    Some(Some(serde_json::to_value(v).expect("serializes")))
}

fn present_opt<T: Serialize>(v: Option<T>) -> PartialField {
    v.map(|v| Some(serde_json::to_value(v).expect("serializes")))
}

/// kube-derive's root type: metadata and spec required, status optional,
/// apiVersion, kind and anything else ignored (serde derive, camelCase).
#[derive(Clone, Debug, Deserialize)]
pub struct Object<Spec, Status> {
    pub metadata: ObjectMeta,
    pub spec: Spec,
    pub status: Option<Status>,
}

impl<Spec, Status> Object<Spec, Status> {
    fn annotations(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata.0.annotations.as_ref()
    }
}

// ---------------------------------------------------------------------------
// v1alpha1
// ---------------------------------------------------------------------------

pub mod v1alpha1 {
    use super::*;

    #[derive(Clone, Debug, Deserialize, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct MaterializeSpec {
        pub environmentd_image_ref: String,
        pub environmentd_extra_args: Option<Vec<String>>,
        pub environmentd_extra_env: Option<Vec<EnvVar>>,
        pub environmentd_iam_role_arn: Option<String>,
        pub environmentd_connection_role_arn: Option<String>,
        pub environmentd_resource_requirements: Option<ResourceRequirements>,
        pub environmentd_scratch_volume_storage_requirement: Option<Quantity>,
        pub balancerd_resource_requirements: Option<ResourceRequirements>,
        pub console_resource_requirements: Option<ResourceRequirements>,
        pub balancerd_replicas: Option<i32>,
        pub console_replicas: Option<i32>,
        pub service_account_name: Option<String>,
        pub service_account_annotations: Option<BTreeMap<String, String>>,
        pub service_account_labels: Option<BTreeMap<String, String>>,
        pub pod_annotations: Option<BTreeMap<String, String>>,
        pub pod_labels: Option<BTreeMap<String, String>>,
        #[serde(default)]
        pub request_rollout: Uuid,
        #[serde(default)]
        pub force_promote: String,
        #[serde(default)]
        pub force_rollout: Uuid,
        #[serde(default)]
        pub in_place_rollout: bool,
        #[serde(default)]
        pub rollout_strategy: MaterializeRolloutStrategy,
        #[serde(default)]
        pub rollout_request_timeout: RolloutRequestTimeout,
        pub backend_secret_name: String,
        #[serde(default)]
        pub authenticator_kind: AuthenticatorKind,
        #[serde(default)]
        pub enable_rbac: bool,
        #[serde(default)]
        pub environment_id: Uuid,
        pub system_parameter_configmap_name: Option<String>,
        pub balancerd_external_certificate_spec: Option<MaterializeCertSpec>,
        pub console_external_certificate_spec: Option<MaterializeCertSpec>,
        pub internal_certificate_spec: Option<MaterializeCertSpec>,
    }

    #[derive(Clone, Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct MaterializeStatus {
        pub resource_id: String,
        pub active_generation: u64,
        pub last_completed_rollout_request: Uuid,
        pub last_completed_rollout_environmentd_image_ref: Option<String>,
        pub resources_hash: String,
        pub last_completed_rollout_hash: Option<String>,
        pub conditions: Vec<Condition>,
    }

    pub type Materialize = Object<MaterializeSpec, MaterializeStatus>;

    impl Materialize {
        /// Any condition (of any type) whose reason is Promoting.
        pub fn is_promoting(&self) -> bool {
            self.status
                .as_ref()
                .map_or(false, |s| s.conditions.iter().any(|c| c.0.reason == "Promoting"))
        }
    }

    partial_struct!(PartialMaterializeSpec {
        environmentd_image_ref,
        environmentd_extra_args,
        environmentd_extra_env,
        environmentd_iam_role_arn,
        environmentd_connection_role_arn,
        environmentd_resource_requirements,
        environmentd_scratch_volume_storage_requirement,
        balancerd_resource_requirements,
        console_resource_requirements,
        balancerd_replicas,
        console_replicas,
        service_account_name,
        service_account_annotations,
        service_account_labels,
        pod_annotations,
        pod_labels,
        request_rollout,
        force_promote,
        force_rollout,
        in_place_rollout,
        rollout_strategy,
        rollout_request_timeout,
        backend_secret_name,
        authenticator_kind,
        enable_rbac,
        environment_id,
        system_parameter_configmap_name,
        balancerd_external_certificate_spec,
        console_external_certificate_spec,
        internal_certificate_spec,
    });

    partial_struct!(PartialMaterializeStatus {
        resource_id,
        active_generation,
        last_completed_rollout_request,
        last_completed_rollout_environmentd_image_ref,
        resources_hash,
        last_completed_rollout_hash,
        conditions,
    });

    pub type PartialMaterialize = PartialObject<PartialMaterializeSpec, PartialMaterializeStatus>;
}

// ---------------------------------------------------------------------------
// v1
// ---------------------------------------------------------------------------

pub mod v1 {
    use super::*;

    #[derive(Clone, Debug, Deserialize, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct MaterializeSpec {
        pub environmentd_image_ref: String,
        pub environmentd_extra_args: Option<Vec<String>>,
        pub environmentd_extra_env: Option<Vec<EnvVar>>,
        pub environmentd_connection_role_arn: Option<String>,
        pub environmentd_resource_requirements: Option<ResourceRequirements>,
        pub environmentd_scratch_volume_storage_requirement: Option<Quantity>,
        pub balancerd_resource_requirements: Option<ResourceRequirements>,
        pub console_resource_requirements: Option<ResourceRequirements>,
        pub balancerd_replicas: Option<i32>,
        pub console_replicas: Option<i32>,
        pub service_account_name: Option<String>,
        pub service_account_annotations: Option<BTreeMap<String, String>>,
        pub service_account_labels: Option<BTreeMap<String, String>>,
        pub pod_annotations: Option<BTreeMap<String, String>>,
        pub pod_labels: Option<BTreeMap<String, String>>,
        pub force_promote: Option<String>,
        #[serde(default)]
        pub force_rollout: Uuid,
        #[serde(default)]
        pub rollout_strategy: MaterializeRolloutStrategy,
        #[serde(default)]
        pub rollout_request_timeout: RolloutRequestTimeout,
        pub backend_secret_name: String,
        #[serde(default)]
        pub authenticator_kind: AuthenticatorKind,
        #[serde(default)]
        pub enable_rbac: bool,
        #[serde(default)]
        pub environment_id: Uuid,
        pub system_parameter_configmap_name: Option<String>,
        pub balancerd_external_certificate_spec: Option<MaterializeCertSpec>,
        pub console_external_certificate_spec: Option<MaterializeCertSpec>,
        pub internal_certificate_spec: Option<MaterializeCertSpec>,
    }

    #[derive(Clone, Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct MaterializeStatus {
        pub resource_id: String,
        pub active_generation: u64,
        pub last_completed_rollout_environmentd_image_ref: Option<String>,
        pub last_completed_rollout_hash: Option<String>,
        pub requested_rollout_hash: Option<String>,
        pub conditions: Vec<Condition>,
    }

    pub type Materialize = Object<MaterializeSpec, MaterializeStatus>;

    partial_struct!(PartialMaterializeSpec {
        environmentd_image_ref,
        environmentd_extra_args,
        environmentd_extra_env,
        environmentd_connection_role_arn,
        environmentd_resource_requirements,
        environmentd_scratch_volume_storage_requirement,
        balancerd_resource_requirements,
        console_resource_requirements,
        balancerd_replicas,
        console_replicas,
        service_account_name,
        service_account_annotations,
        service_account_labels,
        pod_annotations,
        pod_labels,
        force_promote,
        force_rollout,
        rollout_strategy,
        rollout_request_timeout,
        backend_secret_name,
        authenticator_kind,
        enable_rbac,
        environment_id,
        system_parameter_configmap_name,
        balancerd_external_certificate_spec,
        console_external_certificate_spec,
        internal_certificate_spec,
    });

    partial_struct!(PartialMaterializeStatus {
        resource_id,
        active_generation,
        last_completed_rollout_environmentd_image_ref,
        last_completed_rollout_hash,
        requested_rollout_hash,
        conditions,
    });

    pub type PartialMaterialize = PartialObject<PartialMaterializeSpec, PartialMaterializeStatus>;
}

// ---------------------------------------------------------------------------
// The rollout hash (v1 generate_rollout_hash): SHA-256 of serde_json of the
// v1 spec with the fields that need no new generation set to None, then the
// force-rollout annotation's value when there is one; lower-case hex.
// ---------------------------------------------------------------------------

fn rollout_hash(spec: &v1::MaterializeSpec, annotations: Option<&BTreeMap<String, String>>) -> String {
    let mut hashed = spec.clone();
    hashed.balancerd_resource_requirements = None;
    hashed.console_resource_requirements = None;
    hashed.balancerd_replicas = None;
    hashed.console_replicas = None;
    hashed.force_promote = None;
    hashed.balancerd_external_certificate_spec = None;
    hashed.console_external_certificate_spec = None;
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&hashed).expect("spec serializes"));
    if let Some(value) = annotations.and_then(|a| a.get(FORCE_ROLLOUT_ANNOTATION)) {
        hasher.update(value.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// requestRollout for a rollout hash: UUIDv5 in the OID namespace.
fn rollout_request(hash: &str) -> Uuid {
    Uuid::new_v5(&Uuid::NAMESPACE_OID, hash.as_bytes())
}

// ---------------------------------------------------------------------------
// The typed conversions (upstream's From impls between the two Materialize
// types), reduced to what the webhook splices into the partial result.
// ---------------------------------------------------------------------------

/// v1::Materialize::from(v1alpha1::Materialize): the v1 spec (role ARN
/// moved into serviceAccountAnnotations unless the key exists; forcePromote
/// "" or the nil UUID's exact spelling dropped) and the derived status.
struct TypedV1 {
    requested_rollout_hash: Option<String>,
    last_completed_rollout_hash: Option<String>,
}

fn typed_to_v1(mz: v1alpha1::Materialize) -> Option<TypedV1> {
    let promoting = mz.is_promoting();
    let s = mz.spec.clone();
    let service_account_annotations = match s.environmentd_iam_role_arn {
        Some(role) => {
            let mut annotations = s.service_account_annotations.unwrap_or_default();
            annotations.entry(IAM_ROLE_ANNOTATION.to_owned()).or_insert(role);
            Some(annotations)
        }
        None => s.service_account_annotations,
    };
    let spec = v1::MaterializeSpec {
        environmentd_image_ref: s.environmentd_image_ref,
        environmentd_extra_args: s.environmentd_extra_args,
        environmentd_extra_env: s.environmentd_extra_env,
        environmentd_connection_role_arn: s.environmentd_connection_role_arn,
        environmentd_resource_requirements: s.environmentd_resource_requirements,
        environmentd_scratch_volume_storage_requirement: s.environmentd_scratch_volume_storage_requirement,
        balancerd_resource_requirements: s.balancerd_resource_requirements,
        console_resource_requirements: s.console_resource_requirements,
        balancerd_replicas: s.balancerd_replicas,
        console_replicas: s.console_replicas,
        service_account_name: s.service_account_name,
        service_account_annotations,
        service_account_labels: s.service_account_labels,
        pod_annotations: s.pod_annotations,
        pod_labels: s.pod_labels,
        force_promote: if s.force_promote.is_empty() || s.force_promote == NIL_UUID {
            None
        } else {
            Some(s.force_promote)
        },
        force_rollout: s.force_rollout,
        rollout_strategy: s.rollout_strategy,
        rollout_request_timeout: s.rollout_request_timeout,
        backend_secret_name: s.backend_secret_name,
        authenticator_kind: s.authenticator_kind,
        enable_rbac: s.enable_rbac,
        environment_id: s.environment_id,
        system_parameter_configmap_name: s.system_parameter_configmap_name,
        balancerd_external_certificate_spec: s.balancerd_external_certificate_spec,
        console_external_certificate_spec: s.console_external_certificate_spec,
        internal_certificate_spec: s.internal_certificate_spec,
    };
    let hash = rollout_hash(&spec, mz.annotations());
    let status = mz.status.as_ref()?;
    let last_completed_rollout_hash = match &status.last_completed_rollout_hash {
        Some(h) => Some(h.clone()),
        None => {
            // Compared as UUIDs (values), not as spellings.
            let rolling_out = status.last_completed_rollout_request != mz.spec.request_rollout
                || status.last_completed_rollout_request.is_nil();
            if rolling_out {
                None
            } else {
                Some(hash.clone())
            }
        }
    };
    Some(TypedV1 {
        requested_rollout_hash: if promoting { None } else { Some(hash) },
        last_completed_rollout_hash,
    })
}

/// v1alpha1::Materialize::from(v1::Materialize), what the webhook uses of
/// it: requestRollout from the rollout hash, and for a status
/// lastCompletedRolloutRequest (from lastCompletedRolloutHash, else nil)
/// and resourcesHash "".
struct TypedV1alpha1 {
    request_rollout: Uuid,
    status: Option<(Uuid, String)>,
}

fn typed_to_v1alpha1(mz: v1::Materialize) -> TypedV1alpha1 {
    let hash = rollout_hash(&mz.spec, mz.annotations());
    TypedV1alpha1 {
        request_rollout: rollout_request(&hash),
        status: mz.status.map(|s| {
            let last = s
                .last_completed_rollout_hash
                .as_deref()
                .map(rollout_request)
                .unwrap_or_else(Uuid::nil);
            (last, String::new())
        }),
    }
}

// ---------------------------------------------------------------------------
// The partial conversions (upstream's From impls between the partial
// mirrors) and the webhook's two functions.
// ---------------------------------------------------------------------------

/// environmentdIamRoleArn (a value, not null) goes into
/// serviceAccountAnnotations unless the key is there; annotations that are
/// not an object are left as they are and the role dropped.
fn merge_role_arn(annotations: PartialField, role: PartialField) -> PartialField {
    let role = match role {
        Some(Some(role)) => role,
        _ => return annotations,
    };
    let mut map = match annotations {
        Some(Some(Value::Object(map))) => map,
        Some(Some(other)) => return Some(Some(other)),
        Some(None) | None => Map::new(),
    };
    map.entry(IAM_ROLE_ANNOTATION).or_insert(role);
    Some(Some(Value::Object(map)))
}

fn partial_to_v1(p: v1alpha1::PartialMaterialize) -> v1::PartialMaterialize {
    let spec = p.spec.map(|s| {
        let force_promote = match s.force_promote {
            Some(Some(Value::String(v))) if v.is_empty() || v == NIL_UUID => None,
            other => other,
        };
        v1::PartialMaterializeSpec {
            environmentd_image_ref: s.environmentd_image_ref,
            environmentd_extra_args: s.environmentd_extra_args,
            environmentd_extra_env: s.environmentd_extra_env,
            environmentd_connection_role_arn: s.environmentd_connection_role_arn,
            environmentd_resource_requirements: s.environmentd_resource_requirements,
            environmentd_scratch_volume_storage_requirement: s.environmentd_scratch_volume_storage_requirement,
            balancerd_resource_requirements: s.balancerd_resource_requirements,
            console_resource_requirements: s.console_resource_requirements,
            balancerd_replicas: s.balancerd_replicas,
            console_replicas: s.console_replicas,
            service_account_name: s.service_account_name,
            service_account_annotations: merge_role_arn(s.service_account_annotations, s.environmentd_iam_role_arn),
            service_account_labels: s.service_account_labels,
            pod_annotations: s.pod_annotations,
            pod_labels: s.pod_labels,
            force_promote,
            force_rollout: s.force_rollout,
            rollout_strategy: s.rollout_strategy,
            rollout_request_timeout: s.rollout_request_timeout,
            backend_secret_name: s.backend_secret_name,
            authenticator_kind: s.authenticator_kind,
            enable_rbac: s.enable_rbac,
            environment_id: s.environment_id,
            system_parameter_configmap_name: s.system_parameter_configmap_name,
            balancerd_external_certificate_spec: s.balancerd_external_certificate_spec,
            console_external_certificate_spec: s.console_external_certificate_spec,
            internal_certificate_spec: s.internal_certificate_spec,
            extra: s.extra,
        }
    });
    let status = p.status.map(|s| v1::PartialMaterializeStatus {
        resource_id: s.resource_id,
        active_generation: s.active_generation,
        last_completed_rollout_environmentd_image_ref: s.last_completed_rollout_environmentd_image_ref,
        last_completed_rollout_hash: s.last_completed_rollout_hash,
        requested_rollout_hash: None,
        conditions: s.conditions,
        extra: s.extra,
    });
    PartialObject {
        api_version: Some(V1.to_owned()),
        kind: p.kind,
        metadata: p.metadata,
        spec,
        status,
        extra: p.extra,
    }
}

fn partial_to_v1alpha1(p: v1::PartialMaterialize) -> v1alpha1::PartialMaterialize {
    let spec = p.spec.map(|s| v1alpha1::PartialMaterializeSpec {
        environmentd_image_ref: s.environmentd_image_ref,
        environmentd_extra_args: s.environmentd_extra_args,
        environmentd_extra_env: s.environmentd_extra_env,
        environmentd_iam_role_arn: None,
        environmentd_connection_role_arn: s.environmentd_connection_role_arn,
        environmentd_resource_requirements: s.environmentd_resource_requirements,
        environmentd_scratch_volume_storage_requirement: s.environmentd_scratch_volume_storage_requirement,
        balancerd_resource_requirements: s.balancerd_resource_requirements,
        console_resource_requirements: s.console_resource_requirements,
        balancerd_replicas: s.balancerd_replicas,
        console_replicas: s.console_replicas,
        service_account_name: s.service_account_name,
        service_account_annotations: s.service_account_annotations,
        service_account_labels: s.service_account_labels,
        pod_annotations: s.pod_annotations,
        pod_labels: s.pod_labels,
        request_rollout: None,
        force_promote: s.force_promote,
        force_rollout: s.force_rollout,
        in_place_rollout: None,
        rollout_strategy: s.rollout_strategy,
        rollout_request_timeout: s.rollout_request_timeout,
        backend_secret_name: s.backend_secret_name,
        authenticator_kind: s.authenticator_kind,
        enable_rbac: s.enable_rbac,
        environment_id: s.environment_id,
        system_parameter_configmap_name: s.system_parameter_configmap_name,
        balancerd_external_certificate_spec: s.balancerd_external_certificate_spec,
        console_external_certificate_spec: s.console_external_certificate_spec,
        internal_certificate_spec: s.internal_certificate_spec,
        extra: s.extra,
    });
    let status = p.status.map(|s| v1alpha1::PartialMaterializeStatus {
        resource_id: s.resource_id,
        active_generation: s.active_generation,
        last_completed_rollout_request: None,
        last_completed_rollout_environmentd_image_ref: s.last_completed_rollout_environmentd_image_ref,
        resources_hash: None,
        last_completed_rollout_hash: s.last_completed_rollout_hash,
        conditions: s.conditions,
        extra: s.extra,
    });
    PartialObject {
        api_version: Some(V1ALPHA1.to_owned()),
        kind: p.kind,
        metadata: p.metadata,
        spec,
        status,
        extra: p.extra,
    }
}

/// convert_v1alpha1_to_v1: field-wise, plus the derived status fields when
/// the whole object reads as a typed v1alpha1 Materialize.
fn convert_to_v1(value: Value) -> Result<Value, String> {
    let complete = serde_json::from_value::<v1alpha1::Materialize>(value.clone()).ok();
    let partial: v1alpha1::PartialMaterialize = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let mut out = partial_to_v1(partial);
    if let Some(typed) = complete.and_then(typed_to_v1) {
        if let Some(status) = out.status.as_mut() {
            status.requested_rollout_hash = present_opt(typed.requested_rollout_hash);
            status.last_completed_rollout_hash = present_opt(typed.last_completed_rollout_hash);
        }
    }
    serde_json::to_value(out).map_err(|e| e.to_string())
}

/// convert_v1_to_v1alpha1: field-wise, plus requestRollout (and the status
/// fields v1alpha1 requires) when the whole object reads as a typed v1
/// Materialize.
fn convert_to_v1alpha1(value: Value) -> Result<Value, String> {
    let complete = serde_json::from_value::<v1::Materialize>(value.clone()).ok();
    let partial: v1::PartialMaterialize = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let mut out = partial_to_v1alpha1(partial);
    if let Some(complete) = complete {
        let typed = typed_to_v1alpha1(complete);
        if let Some(spec) = out.spec.as_mut() {
            spec.request_rollout = present(typed.request_rollout);
        }
        if let (Some(status), Some((last, resources_hash))) = (out.status.as_mut(), typed.status) {
            status.last_completed_rollout_request = present(last);
            status.resources_hash = present(resources_hash);
        }
    }
    serde_json::to_value(out).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// The request loop.
// ---------------------------------------------------------------------------

/// Whether upstream's typed reader of a version (read_v1, read_v1alpha1)
/// reads a whole object: serde_json::from_value::<Materialize>.
fn read(op: &str, object: Value) -> Result<(), String> {
    let read = if op == "read_v1" {
        serde_json::from_value::<v1::Materialize>(object).map(drop)
    } else {
        serde_json::from_value::<v1alpha1::Materialize>(object).map(drop)
    };
    read.map_err(|e| e.to_string())
}

fn verdict(read: Result<(), String>) -> Value {
    let mut out = Map::new();
    out.insert("ok".into(), read.is_ok().into());
    if let Err(e) = read {
        out.insert("error".into(), e.into());
    }
    Value::Object(out)
}

fn answer(request: Value) -> Map<String, Value> {
    let mut out = Map::new();
    let field = |name: &str| request.get(name).cloned().unwrap_or(Value::Null);
    let op = request.get("op").and_then(Value::as_str).unwrap_or("").to_owned();
    match op.as_str() {
        "hash" => {
            // The spec and annotations, given or taken from an object.
            let (spec, annotations) = match request.get("object") {
                Some(object) => (
                    object.get("spec").cloned().unwrap_or(Value::Null),
                    object
                        .get("metadata")
                        .and_then(|m| m.get("annotations"))
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
                None => (field("spec"), field("annotations")),
            };
            let annotations: Option<BTreeMap<String, String>> = match serde_json::from_value(annotations) {
                Ok(a) => a,
                Err(e) => {
                    out.insert("error".into(), format!("annotations: {e}").into());
                    return out;
                }
            };
            match serde_json::from_value::<v1::MaterializeSpec>(spec) {
                Ok(spec) => out.insert("hash".into(), rollout_hash(&spec, annotations.as_ref()).into()),
                Err(e) => out.insert("error".into(), e.to_string().into()),
            };
        }
        "to_v1" | "to_v1alpha1" => {
            let object = field("object");
            let (converted, source) = if op == "to_v1" {
                (convert_to_v1(object.clone()), "read_v1alpha1")
            } else {
                (convert_to_v1alpha1(object.clone()), "read_v1")
            };
            let target = if op == "to_v1" { "read_v1" } else { "read_v1alpha1" };
            // Optionally: does the input read whole, and does the target
            // version's reader read what another converter made of it
            // ("read_back") and what this one made of it?
            let whole = read(source, object);
            out.insert("whole".into(), whole.is_ok().into());
            if let Err(e) = &whole {
                out.insert("whole_error".into(), e.clone().into());
            }
            match converted {
                Ok(v) => {
                    if request.get("read_back").is_some() && whole.is_ok() {
                        out.insert("read_back".into(), verdict(read(target, field("read_back"))));
                        out.insert("read_back_own".into(), verdict(read(target, v.clone())));
                    }
                    out.insert("object".into(), v);
                }
                Err(e) => {
                    out.insert("error".into(), e.into());
                }
            };
        }
        "read_v1" | "read_v1alpha1" => {
            if let Value::Object(v) = verdict(read(&op, field("object"))) {
                out.extend(v);
            }
        }
        _ => {
            out.insert("error".into(), format!("unknown op {op:?}").into());
        }
    }
    out
}

fn main() {
    let mut stdin = BufReader::with_capacity(1 << 20, io::stdin());
    let mut stdout = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.read_line(&mut line).expect("reading stdin") == 0 {
            break;
        }
        if !line.trim().is_empty() {
            let mut response = Map::new();
            match serde_json::from_str::<Value>(&line) {
                Ok(request) => {
                    response.insert("id".into(), request.get("id").cloned().unwrap_or(Value::Null));
                    response.extend(answer(request));
                }
                Err(e) => {
                    response.insert("error".into(), format!("request is not JSON: {e}").into());
                }
            }
            let text = serde_json::to_string(&Value::Object(response)).expect("response serializes");
            writeln!(stdout, "{text}").expect("writing stdout");
        }
        // Answer as soon as the requests sent so far are all read.
        if stdin.buffer().is_empty() {
            stdout.flush().expect("flushing stdout");
        }
    }
    stdout.flush().expect("flushing stdout");
}
