//! https upstreams: rustls with the Mozilla roots (`webpki-roots`, as `kvlint probe` uses
//! through ureq), plus the certificate authorities of `--upstream-ca` (a gateway or engine
//! with a certificate of its own).

use std::path::Path;
use std::sync::Arc;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::ProxyError;

/// The certificates of a PEM file.
pub(super) fn read_authorities(path: &Path) -> Result<Vec<CertificateDer<'static>>, ProxyError> {
    let invalid = |reason: String| ProxyError::UpstreamCa {
        path: path.display().to_string(),
        reason,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|error| invalid(error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| invalid(error.to_string()))?;
    if certificates.is_empty() {
        return Err(invalid("no certificate in the file".into()));
    }
    // Each must be one a root store accepts, said now rather than at the first request.
    let mut store = rustls::RootCertStore::empty();
    for certificate in &certificates {
        store
            .add(certificate.clone())
            .map_err(|error| invalid(error.to_string()))?;
    }
    Ok(certificates)
}

/// A connector for http and https upstreams, trusting the usual roots and `authorities`.
pub(super) fn connector(
    authorities: &[CertificateDer<'static>],
) -> Result<HttpsConnector<HttpConnector>, ProxyError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    // Each was checked when read.
    let _ = roots.add_parsable_certificates(authorities.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| ProxyError::Tls(error.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build())
}
