//! The builder every hearth HTTP client starts from.
//!
//! reqwest's own builder reads and parses the system's CA roots
//! (`/etc/ssl/certs`, a few hundred files) each time a client is built, and
//! hearth builds several clients at start-up (providers, web tools). A server
//! that talks only to a local model never needs them. Here every client shares
//! one TLS configuration whose verifier loads the roots once, on the first
//! TLS handshake, with the same platform verifier reqwest would use.

use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A client builder with hearth's shared TLS configuration (HTTP/1.1, system
/// roots loaded on first use). Set timeouts and the rest on it as usual.
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match TLS.as_ref() {
        Some(tls) => builder.tls_backend_preconfigured(tls.clone()),
        // Unreachable with rustls' own provider; reqwest's default then.
        None => builder,
    }
}

/// Whether the system roots have been loaded in this process (for tests).
pub fn roots_loaded() -> bool {
    VERIFIER.platform.get().is_some()
}

static VERIFIER: LazyLock<Arc<LazyRootsVerifier>> =
    LazyLock::new(|| Arc::new(LazyRootsVerifier::new(provider())));

/// `None` only if the provider offers no safe protocol version.
static TLS: LazyLock<Option<rustls::ClientConfig>> = LazyLock::new(|| {
    let verifier: Arc<dyn ServerCertVerifier> = VERIFIER.clone();
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // reqwest is built without HTTP/2, so offer what it speaks (as it does).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Some(config)
});

/// The process's default crypto provider, else aws-lc-rs (reqwest's choice).
fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// The platform verifier, built on the first certificate it must check.
struct LazyRootsVerifier {
    provider: Arc<CryptoProvider>,
    platform: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyRootsVerifier {
    fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            platform: OnceLock::new(),
        }
    }

    fn algorithms(&self) -> &WebPkiSupportedAlgorithms {
        &self.provider.signature_verification_algorithms
    }

    fn platform(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.platform
            .get_or_init(|| rustls_platform_verifier::Verifier::new(self.provider.clone()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl fmt::Debug for LazyRootsVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyRootsVerifier")
            .field("roots_loaded", &self.platform.get().is_some())
            .finish()
    }
}

impl ServerCertVerifier for LazyRootsVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.platform()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    // Signatures need no roots: checked with the provider's algorithms, as the
    // platform verifier does.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, self.algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, self.algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms().supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn building_clients_loads_no_roots_until_a_certificate_is_checked() {
        let _a = client_builder().build().unwrap();
        let _b = client_builder().build().unwrap();
        assert!(!roots_loaded(), "building a client must not read the roots");

        // A certificate that is not even DER: refused, after the roots load.
        let verdict = VERIFIER.verify_server_cert(
            &CertificateDer::from(vec![1, 2, 3]),
            &[],
            &ServerName::try_from("example.com").unwrap(),
            &[],
            UnixTime::now(),
        );
        assert!(verdict.is_err());
        assert!(roots_loaded());
    }
}
