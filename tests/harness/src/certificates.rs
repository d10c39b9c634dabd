//! [`TestCa`]: a certificate authority made for one test (with `rcgen`), which issues server
//! certificates for `localhost` and `127.0.0.1`, so TLS tests run against real TLS servers
//! without any certificate checked into the repository. Its files live in a scratch directory
//! removed when the value is dropped.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// The names every issued certificate is valid for.
pub const LOCAL_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// A certificate authority of the test's own.
pub struct TestCa {
    directory: PathBuf,
    certificate: rcgen::Certificate,
    key: KeyPair,
}

/// A server certificate (valid for [`LOCAL_NAMES`]) and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    /// The certificate, PEM.
    pub certificate_file: PathBuf,
    /// Its private key, PEM (PKCS#8).
    pub key_file: PathBuf,
}

impl TestCa {
    /// A new CA named `name`, its certificate written to [`TestCa::certificate_file`].
    pub fn new(name: &str) -> TestCa {
        let directory = std::env::temp_dir().join(format!("test-ca-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&directory).expect("the CA's scratch directory");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("the CA's key");
        let certificate = params.self_signed(&key).expect("the CA's certificate");
        std::fs::write(directory.join("ca.pem"), certificate.pem()).expect("write ca.pem");
        TestCa {
            directory,
            certificate,
            key,
        }
    }

    /// The CA's certificate, PEM: what a client is told to trust.
    pub fn certificate_file(&self) -> PathBuf {
        self.directory.join("ca.pem")
    }

    /// Issues a server certificate for [`LOCAL_NAMES`], written as `{name}.crt` and
    /// `{name}.key`.
    pub fn issue(&self, name: &str) -> ServerIdentity {
        let mut params = CertificateParams::new(LOCAL_NAMES.map(str::to_owned).to_vec())
            .expect("server parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("the server's key");
        let certificate = params
            .signed_by(&key, &self.certificate, &self.key)
            .expect("the server's certificate");
        let identity = ServerIdentity {
            certificate_file: self.directory.join(format!("{name}.crt")),
            key_file: self.directory.join(format!("{name}.key")),
        };
        std::fs::write(&identity.certificate_file, certificate.pem()).expect("write the crt");
        std::fs::write(&identity.key_file, key.serialize_pem()).expect("write the key");
        identity
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}
