//! The status vocabulary: condition types and reasons, per object kind, and the
//! only place they become the Gateway API's strings.
//!
//! ```text
//!  gateway_class::{Type, Reason}   GatewayClass conditions
//!  gateway::{Type, Reason}         Gateway conditions
//!  listener::{Type, Reason}        a Gateway listener's conditions
//!  route::{Type, Reason}           a route's conditions on one parentRef (every route kind)
//!  policy::{Type, Reason}          a policy's conditions on one ancestor (BackendTLSPolicy)
//!  xbackend::{Type, Reason}        an XBackend's conditions on one ancestor
//! ```
//!
//! Every status stage works with these enums; [`Word::as_str`] is called only
//! where status leaves the process: the condition's `Serialize` (YAML output) and
//! the Kubernetes patch (`aether-k8s`). A reason of one kind cannot be put on
//! another kind's condition: the compiler says no.

/// A condition type or reason: a closed set of API strings.
pub trait Word: Copy + Eq + Ord + std::fmt::Debug {
    /// The string the API carries.
    fn as_str(self) -> &'static str;
}

/// An enum whose variants are spelled as the API spells them.
macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $crate::vocabulary::Word for $name {
            fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => stringify!($variant)),*
                }
            }
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$(Self::$variant),*];
        }
    };
}

/// GatewayClass conditions.
pub mod gateway_class {
    words!(Type {
        Accepted,
        /// Whether the installed CRDs are of a release we support (Kubernetes
        /// mode; experimental channel).
        SupportedVersion
    });
    words!(Reason {
        Accepted,
        InvalidParameters,
        Pending,
        SupportedVersion,
        UnsupportedVersion
    });
}

/// Gateway conditions.
pub mod gateway {
    words!(Type {
        Accepted,
        Programmed,
        /// A frontend validation lets clients in without a valid certificate.
        InsecureFrontendValidationMode,
        /// Written when `spec.tls.backend.clientCertificateRef` is set.
        ResolvedRefs,
        /// Whether every `spec.addresses` entry got an address (GEP-5093);
        /// omitted until addresses are known.
        AddressesAssigned,
    });
    words!(Reason {
        Accepted,
        /// InsecureFrontendValidationMode is True.
        ConfigurationChanged,
        /// Some listeners are invalid (Accepted True while any listener is).
        ListenersNotValid,
        InvalidParameters,
        UnsupportedAddress,
        Programmed,
        /// The Gateway cannot be served, or an Envoy rejected its config.
        Invalid,
        /// Waiting for every Envoy that serves the Gateway to ACK its config.
        Pending,
        /// No load balancer address (service mode).
        AddressNotAssigned,
        AddressNotUsable,
        ResolvedRefs,
        InvalidClientCertificateRef,
        RefNotPermitted,
        /// AddressesAssigned: every entry got an address.
        AddressesAssigned,
        /// AddressesAssigned: some entries did not.
        PartiallyAssigned,
        /// AddressesAssigned: no entry did.
        NotAssigned,
    });
}

/// A Gateway listener's conditions.
pub mod listener {
    words!(Type {
        Accepted,
        Conflicted,
        OverlappingTLSConfig,
        Programmed,
        ResolvedRefs,
    });
    words!(Reason {
        Accepted,
        PortUnavailable,
        UnsupportedProtocol,
        UnsupportedValue,
        HostnameConflict,
        ProtocolConflict,
        NoConflicts,
        OverlappingHostnames,
        ResolvedRefs,
        InvalidCertificateRef,
        InvalidCACertificateRef,
        InvalidCACertificateKind,
        /// No caCertificateRef of the listener's frontend validation resolves.
        NoValidCACertificate,
        InvalidRouteKinds,
        RefNotPermitted,
        /// A pre-routing filter that cannot be encoded as written (GEP-5224).
        InvalidListenerFilter,
        /// A pre-routing filter's reference does not resolve (GEP-5224).
        InvalidListenerFilterRef,
        Programmed,
        Invalid,
        Pending,
    });
}

/// A ListenerSet's conditions (its listeners' are [`listener`]'s).
pub mod listener_set {
    words!(Type {
        Accepted,
        Programmed
    });
    words!(Reason {
        Accepted,
        /// The Gateway's allowedListeners does not admit the set's namespace.
        NotAllowed,
        /// No listener of the set is valid.
        ListenersNotValid,
        Programmed,
        Invalid,
        /// Waiting for every Envoy that serves the Gateway to ACK its config.
        Pending,
    });
}

/// A policy's conditions on one ancestor (BackendTLSPolicy).
pub mod policy {
    words!(Type {
        Accepted,
        ResolvedRefs
    });
    words!(Reason {
        Accepted,
        /// An older policy targets the same backend.
        Conflicted,
        Invalid,
        /// No CA certificate reference resolves.
        NoValidCACertificate,
        ResolvedRefs,
        InvalidCACertificateRef,
        InvalidKind,
    });
}

/// An XBackend's conditions on one ancestor (a Gateway that routes to it).
pub mod xbackend {
    words!(Type {
        Accepted,
        ResolvedRefs
    });
    words!(Reason {
        Accepted,
        /// What the CRD's validation would refuse on a cluster (standalone
        /// has no CEL): the message is the CRD's.
        Invalid,
        /// Valid, but Envoy cannot do what it says.
        UnsupportedValue,
        UnsupportedProtocol,
        /// No CA certificate reference of `tls.validation` resolves.
        NoValidCACertificate,
        ResolvedRefs,
        InvalidCACertificateRef,
        InvalidKind,
        InvalidClientCertificateRef,
        RefNotPermitted,
        /// EndpointSelector: no Service made for the XBackend yet, so its
        /// endpoints are not resolved.
        BackendNotFound,
    });
}

/// A route's conditions on one parentRef (HTTPRoute, GRPCRoute, TLSRoute,
/// TCPRoute, UDPRoute).
pub mod route {
    words!(Type {
        Accepted,
        PartiallyInvalid,
        ResolvedRefs
    });
    words!(Reason {
        Accepted,
        NoMatchingParent,
        NotAllowedByListeners,
        NoMatchingListenerHostname,
        UnsupportedValue,
        /// An older route of the other kind (HTTPRoute/GRPCRoute) serves the
        /// hostnames on that listener. Not one of the API's route reasons (it
        /// has none for this); named as GEP-1426 names the same case.
        Conflicted,
        /// Waiting for every Envoy that serves the parent to serve the route.
        Pending,
        ResolvedRefs,
        RefNotPermitted,
        InvalidKind,
        BackendNotFound,
        /// The backend's BackendTLSPolicy cannot be met (the API names no
        /// reason for this invalid backendRef).
        InvalidBackendTLSPolicy,
        UnsupportedProtocol,
        /// The XBackend is not accepted, or its TLS references do not
        /// resolve (the API names no reason for this invalid backendRef;
        /// named like InvalidBackendTLSPolicy).
        InvalidXBackend,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelled<W: Word>(all: &[W]) -> Vec<&'static str> {
        all.iter().map(|w| w.as_str()).collect()
    }

    #[test]
    fn words_are_the_api_strings() {
        assert_eq!(
            spelled(gateway::Type::ALL),
            [
                "Accepted",
                "Programmed",
                "InsecureFrontendValidationMode",
                "ResolvedRefs",
                "AddressesAssigned"
            ]
        );
        assert_eq!(
            gateway::Reason::PartiallyAssigned.as_str(),
            "PartiallyAssigned"
        );
        assert_eq!(
            listener::Reason::NoValidCACertificate.as_str(),
            "NoValidCACertificate"
        );
        assert_eq!(
            listener::Type::OverlappingTLSConfig.as_str(),
            "OverlappingTLSConfig"
        );
        assert_eq!(
            gateway::Reason::AddressNotAssigned.as_str(),
            "AddressNotAssigned"
        );
        assert_eq!(
            route::Reason::NoMatchingListenerHostname.as_str(),
            "NoMatchingListenerHostname"
        );
    }
}
