//! Checking the signatures a `.tet` file carries: each one against the file's content digest
//! (a signature made over other content — the file changed since, or the signature was copied
//! from another file — fails), and its key against an `allowed_signers` file when one is given.

use serde::Serialize;
use ssh_key::SshSig;

use super::allowed::AllowedSigners;
use super::sign::{check_signature, fingerprint, SignError, Signed, NAMESPACE};
use crate::format::TetFile;

/// The verdict on one stored signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SigStatus {
    /// Valid over this content, by a key the allowed signers list (for our namespace).
    Trusted,
    /// Valid over this content; no allowed-signers file was given to name the key.
    Valid,
    /// Valid over this content, but the key is not allowed (absent, or not for our namespace).
    Unknown,
    /// Not a valid signature of this content (changed content, copied, malformed).
    Invalid,
}

impl SigStatus {
    pub fn name(self) -> &'static str {
        match self {
            SigStatus::Trusted => "trusted",
            SigStatus::Valid => "valid",
            SigStatus::Unknown => "unknown-key",
            SigStatus::Invalid => "invalid",
        }
    }
}

/// One stored signature, checked.
#[derive(Debug, Clone, Serialize)]
pub struct SigCheck {
    /// Its index in `tet_signatures` (from 1).
    pub index: usize,
    /// `SHA256:…` of its key (`None` when it could not be read at all).
    pub fingerprint: Option<String>,
    /// The principals of the allowed-signers line that lists its key.
    pub principal: Option<String>,
    pub status: SigStatus,
    /// Why it is invalid or unknown.
    pub reason: Option<String>,
}

impl SigCheck {
    /// `alice@example.org (SHA256:…)`, or the fingerprint alone.
    pub fn signer(&self) -> String {
        let fp = self.fingerprint.as_deref().unwrap_or("an unreadable key");
        match &self.principal {
            Some(p) => format!("{p} ({fp})"),
            None => fp.to_string(),
        }
    }
}

/// A file's content digest and its checked signatures.
#[derive(Debug, Clone, Serialize)]
pub struct Signatures {
    /// `sha256:<hex>`: the message a signature of this file signs.
    pub content_digest: String,
    pub signatures: Vec<SigCheck>,
}

impl Signatures {
    /// Every signature valid over this content, and at least one by an allowed signer: what
    /// `tet verify --signers` requires.
    pub fn trusted(&self) -> bool {
        self.signatures
            .iter()
            .any(|s| s.status == SigStatus::Trusted)
            && self
                .signatures
                .iter()
                .all(|s| s.status != SigStatus::Invalid)
    }
}

fn check_one(
    signed: &Signed,
    index: usize,
    armored: &str,
    content: &str,
    allowed: Option<&AllowedSigners>,
) -> SigCheck {
    let mut c = SigCheck {
        index,
        fingerprint: None,
        principal: None,
        status: SigStatus::Invalid,
        reason: None,
    };
    let sig = match SshSig::from_pem(armored.trim()) {
        Ok(s) => s,
        Err(e) => {
            c.reason = Some(SignError::Parse(e).to_string());
            return c;
        }
    };
    c.fingerprint = Some(fingerprint(&sig));
    if content != signed.digest {
        c.reason = Some(format!(
            "made over the content {content}, but this file's content is {} (the file changed \
             since it was signed, or the signature was copied from another file)",
            signed.digest
        ));
        return c;
    }
    if let Err(e) = check_signature(signed, &sig) {
        c.reason = Some(e.to_string());
        return c;
    }
    let Some(allowed) = allowed else {
        c.status = SigStatus::Valid;
        return c;
    };
    match allowed.principals_for(sig.public_key(), NAMESPACE) {
        Some(p) => {
            c.principal = Some(p.to_string());
            c.status = SigStatus::Trusted;
        }
        None => {
            c.status = SigStatus::Unknown;
            c.reason = Some(if allowed.lists(sig.public_key()) {
                format!("the allowed signers do not allow this key for the namespace {NAMESPACE}")
            } else {
                "the key is not in the allowed signers".to_string()
            });
        }
    }
    c
}

/// Checks every signature of `f` (against `allowed` when given).
pub fn check(f: &TetFile, allowed: Option<&AllowedSigners>) -> Result<Signatures, SignError> {
    let signed = Signed::read(f)?;
    let signatures = signed
        .signatures
        .iter()
        .enumerate()
        .map(|(i, s)| check_one(&signed, i + 1, &s.sshsig, &s.content, allowed))
        .collect();
    Ok(Signatures {
        content_digest: signed.digest.clone(),
        signatures,
    })
}
