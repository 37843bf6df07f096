//! Signatures of `.tet` files: OpenSSH `SSHSIG` signatures (what `ssh-keygen -Y sign` writes)
//! over the file's **content digest**, kept in the footer's top-level `tet_signatures` member,
//! which the reference reader ignores (docs/FORMAT.md, "Signatures").
//!
//! - **The content** is every byte of the file before the footer's trailing members: the
//!   superblock, directory, chunk index, payloads, metadata spill and the footer JSON text up to
//!   (not including) `,"tet_signatures":` — or, in a file without signatures, up to
//!   `,"tet_footer_digest":` (or the closing `}` of a footer without that key). Signing only
//!   rewrites what follows, so the content, and so the digest, is the same before and after any
//!   number of signatures.
//! - **The message** signed is the ASCII text `sha256:<64 lowercase hex>` of the SHA-256 of the
//!   content, without a newline; the namespace is [`NAMESPACE`]. `ssh-keygen -Y verify -n
//!   tet-convert@file-content` accepts our signatures given that message, and a signature
//!   `ssh-keygen -Y sign` made over it can be attached ([`attach`]).
//! - **The member** is `,"tet_signatures":[{"content":"sha256:…","sshsig":"-----BEGIN SSH
//!   SIGNATURE-----\n…"}, …]`, written compact (serde's order of [`StoredSignature`]'s fields,
//!   which is alphabetical), right before `,"tet_footer_digest":…}`, whose xxh3-64 is computed
//!   again over the new footer text. One entry per key, in the order they were added; signing
//!   again with a key that signed already replaces its entry (Ed25519 is deterministic: the same
//!   bytes).

use std::borrow::Cow;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use crate::format::{integrity, TetError, TetFile};

/// The `SSHSIG` namespace of a `.tet` content signature (`ssh-keygen -Y … -n NAMESPACE`).
pub const NAMESPACE: &str = "tet-convert@file-content";
/// The top-level footer key holding the signatures.
pub const SIGNATURES_KEY: &str = "tet_signatures";
/// The footer text that opens the signatures member.
const MEMBER_PREFIX: &str = ",\"tet_signatures\":";
/// How much of the content is hashed per read.
const PIECE: u64 = 4 << 20;

/// One stored signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredSignature {
    /// The message that was signed: `sha256:<hex>` of the content it was made over.
    pub content: String,
    /// The armored `SSHSIG` (`-----BEGIN SSH SIGNATURE-----` …), as `ssh-keygen -Y sign` writes it.
    pub sshsig: String,
}

/// Why a file cannot be signed, or its signatures not read.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("cannot read the file: {0}")]
    Read(#[source] TetError),
    #[error("the file has no footer (superblock flag 1 unset): there is no place for a signature")]
    NoFooter,
    #[error("the footer is unreadable: {0}")]
    Footer(String),
    #[error("the footer JSON is no JSON object: {0}")]
    Json(#[source] serde_json::Error),
    #[error("`tet_signatures` is malformed: {0}")]
    Block(String),
    #[error("cannot read the key {path}: {source}")]
    KeyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is no OpenSSH private key: {source}")]
    Key {
        path: PathBuf,
        #[source]
        source: ssh_key::Error,
    },
    #[error(
        "the key {0} has a passphrase: sign with `ssh-keygen -Y sign -n {NAMESPACE}` over the \
         message of `tet sign --message` and attach it with `tet sign --signature`"
    )]
    Encrypted(PathBuf),
    #[error("the key {path} is {algorithm}: only ssh-ed25519 keys are supported")]
    Algorithm { path: PathBuf, algorithm: String },
    #[error("signing failed: {0}")]
    Sign(#[source] ssh_key::Error),
    #[error("not an SSH signature: {0}")]
    Parse(#[source] ssh_key::Error),
    #[error("the signature's namespace is {found:?}, not {NAMESPACE:?}")]
    Namespace { found: String },
    #[error("the signature does not verify over this file's content {digest}: {source}")]
    Mismatch {
        digest: String,
        #[source]
        source: ssh_key::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A file's content digest and signatures, and where they lie.
#[derive(Debug, Clone)]
pub struct Signed {
    /// `sha256:<hex>` of the content: the message a signature signs.
    pub digest: String,
    /// The content is the file's bytes `0 .. content_len`.
    pub content_len: u64,
    /// The signatures as stored, in order.
    pub signatures: Vec<StoredSignature>,
    json_offset: u64,
    /// The footer JSON text up to its trailing members (the end of the content).
    prefix: Vec<u8>,
    version: u32,
    /// The bytes the footer digest hashes before the footer text: up to the end of the chunk
    /// index, and the metadata spill.
    head_end: u64,
    spill: Option<(u64, u64)>,
}

fn read_range(f: &TetFile, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, SignError> {
    f.read_bytes(offset, len)
        .map_err(SignError::Read)?
        .ok_or_else(|| {
            SignError::Footer(format!(
                "bytes {offset}..{} lie outside the file",
                offset.saturating_add(len)
            ))
        })
}

/// Where the content ends inside the footer text, and the signatures stored after it.
fn split_footer(text: &[u8]) -> Result<(usize, Vec<StoredSignature>), SignError> {
    let doc: serde_json::Value = serde_json::from_slice(text).map_err(SignError::Json)?;
    let obj = doc
        .as_object()
        .ok_or_else(|| SignError::Footer("the footer JSON is no object".into()))?;
    // The closing brace, then the footer digest member just before it when it is there.
    let close = text
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .filter(|&i| text[i] == b'}')
        .ok_or_else(|| SignError::Footer("the footer JSON does not end with `}`".into()))?;
    let mut end = close;
    if obj.contains_key(integrity::FOOTER_DIGEST_KEY) {
        let member = integrity::FOOTER_DIGEST_PREFIX.len() + integrity::HEX_LEN + 1;
        let start = end.checked_sub(member).filter(|&s| {
            text[s..end].starts_with(integrity::FOOTER_DIGEST_PREFIX.as_bytes())
                && text[end - 1] == b'"'
        });
        end = start.ok_or_else(|| {
            SignError::Footer(
                "`tet_footer_digest` is not the footer's last member in its form".into(),
            )
        })?;
    }
    let signatures: Vec<StoredSignature> = match obj.get(SIGNATURES_KEY) {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| SignError::Block(format!("not a list of {{content, sshsig}}: {e}")))?,
    };
    if obj.contains_key(SIGNATURES_KEY) {
        let member = member_text(&signatures)?;
        end = end
            .checked_sub(member.len())
            .filter(|&s| text[s..end] == *member.as_bytes())
            .ok_or_else(|| {
                SignError::Block(
                    "it is not the member right before the footer digest, in its compact form"
                        .into(),
                )
            })?;
    }
    let last = text[..end].iter().rposition(|b| !b.is_ascii_whitespace());
    if last.is_none_or(|i| text[i] == b'{') {
        return Err(SignError::Footer("the footer JSON object is empty".into()));
    }
    Ok((end, signatures))
}

/// `,"tet_signatures":[…]` as written.
fn member_text(signatures: &[StoredSignature]) -> Result<String, SignError> {
    let list = serde_json::to_string(signatures).map_err(SignError::Json)?;
    Ok(format!("{MEMBER_PREFIX}{list}"))
}

impl Signed {
    /// Reads the content digest and the stored signatures of a file (one pass over its bytes).
    pub fn read(f: &TetFile) -> Result<Signed, SignError> {
        if f.flags & 1 == 0 {
            return Err(SignError::NoFooter);
        }
        let layout = match (f.footer_layout(), f.footer_json().0) {
            (Some(l), Some(_)) => l.clone(),
            _ => {
                let why = f
                    .footer()
                    .err()
                    .map_or("no footer JSON".into(), |e| e.to_string());
                return Err(SignError::Footer(why));
            }
        };
        let text = read_range(f, layout.json_offset, layout.json_len)?;
        let (prefix_len, signatures) = split_footer(&text)?;
        let content_len = layout.json_offset + prefix_len as u64;
        let mut h = Sha256::new();
        let mut at = 0u64;
        while at < content_len {
            let n = PIECE.min(content_len - at);
            h.update(&*read_range(f, at, n)?);
            at += n;
        }
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Ok(Signed {
            digest: format!("sha256:{hex}"),
            content_len,
            signatures,
            json_offset: layout.json_offset,
            prefix: text[..prefix_len].to_vec(),
            version: layout.version,
            head_end: f.chunk_index_offset.saturating_add(f.chunk_index_length),
            spill: layout.spill,
        })
    }

    /// The message a signature of this content signs.
    pub fn message(&self) -> &[u8] {
        self.digest.as_bytes()
    }

    /// The footer JSON and trailer with `signatures` as the signatures member (none: no member),
    /// the footer digest computed again: what follows `json_offset` in the signed file.
    fn tail(&self, f: &TetFile, signatures: &[StoredSignature]) -> Result<Vec<u8>, SignError> {
        let mut text = self.prefix.clone();
        if !signatures.is_empty() {
            text.extend_from_slice(member_text(signatures)?.as_bytes());
        }
        text.extend_from_slice(integrity::FOOTER_DIGEST_PREFIX.as_bytes());
        let mut h = integrity::Hasher::default();
        h.update(&read_range(f, 0, self.head_end)?);
        if let Some((off, len)) = self.spill {
            h.update(&read_range(f, off, len)?);
        }
        h.update(&text);
        text.extend_from_slice(integrity::hex(h.finish()).as_bytes());
        text.extend_from_slice(integrity::FOOTER_DIGEST_END.as_bytes());
        let mut tail = text;
        let json_len = tail.len() as u64;
        tail.extend_from_slice(&json_len.to_le_bytes());
        tail.extend_from_slice(&self.version.to_le_bytes());
        tail.extend_from_slice(b"THST");
        Ok(tail)
    }
}

/// A signature's key, as its SHA-256 fingerprint (`SHA256:…`, as `ssh-keygen -l` shows it).
pub fn fingerprint(sig: &SshSig) -> String {
    sig.public_key().fingerprint(HashAlg::Sha256).to_string()
}

/// Reads an unencrypted OpenSSH ed25519 private key.
pub fn load_key(path: &Path) -> Result<PrivateKey, SignError> {
    let text = std::fs::read(path).map_err(|source| SignError::KeyFile {
        path: path.to_path_buf(),
        source,
    })?;
    let key = PrivateKey::from_openssh(text).map_err(|source| SignError::Key {
        path: path.to_path_buf(),
        source,
    })?;
    if key.is_encrypted() {
        return Err(SignError::Encrypted(path.to_path_buf()));
    }
    if key.algorithm() != ssh_key::Algorithm::Ed25519 {
        return Err(SignError::Algorithm {
            path: path.to_path_buf(),
            algorithm: key.algorithm().to_string(),
        });
    }
    Ok(key)
}

/// Checks that `sig` is a signature of `signed`'s content in our namespace, by the key it names.
pub fn check_signature(signed: &Signed, sig: &SshSig) -> Result<(), SignError> {
    if sig.namespace() != NAMESPACE {
        return Err(SignError::Namespace {
            found: sig.namespace().to_string(),
        });
    }
    let key = PublicKey::from(sig.public_key().clone());
    key.verify(NAMESPACE, signed.message(), sig)
        .map_err(|source| SignError::Mismatch {
            digest: signed.digest.clone(),
            source,
        })
}

/// What [`sign`] and [`attach`] did.
#[derive(Debug, Clone)]
pub struct Added {
    /// The content digest signed.
    pub digest: String,
    /// The signer's key fingerprint.
    pub fingerprint: String,
    /// Whether an earlier signature of the same key was replaced.
    pub replaced: bool,
}

/// Signs the file at `path` with `key` (see the module docs); the file is replaced atomically.
pub fn sign(path: &Path, key: &PrivateKey) -> Result<Added, SignError> {
    let f = TetFile::open(path).map_err(SignError::Read)?;
    let signed = Signed::read(&f)?;
    let sig = key
        .sign(NAMESPACE, HashAlg::Sha512, signed.message())
        .map_err(SignError::Sign)?;
    store(path, &f, &signed, &sig)
}

/// Attaches an armored signature made elsewhere (`ssh-keygen -Y sign -n NAMESPACE` over the
/// message) to the file at `path`, after checking it over the file's content.
pub fn attach(path: &Path, armored: &str) -> Result<Added, SignError> {
    let sig = SshSig::from_pem(armored.trim()).map_err(SignError::Parse)?;
    let f = TetFile::open(path).map_err(SignError::Read)?;
    let signed = Signed::read(&f)?;
    check_signature(&signed, &sig)?;
    store(path, &f, &signed, &sig)
}

fn store(path: &Path, f: &TetFile, signed: &Signed, sig: &SshSig) -> Result<Added, SignError> {
    let entry = StoredSignature {
        content: signed.digest.clone(),
        sshsig: sig.to_pem(LineEnding::LF).map_err(SignError::Sign)?,
    };
    let mut list = signed.signatures.clone();
    let same_key = |s: &StoredSignature| {
        SshSig::from_pem(s.sshsig.trim()).is_ok_and(|o| o.public_key() == sig.public_key())
    };
    let replaced = match list.iter().position(same_key) {
        Some(i) => {
            list[i] = entry;
            true
        }
        None => {
            list.push(entry);
            false
        }
    };
    let tail = signed.tail(f, &list)?;
    replace_tail(path, signed.json_offset, &tail)?;
    Ok(Added {
        digest: signed.digest.clone(),
        fingerprint: fingerprint(sig),
        replaced,
    })
}

/// Writes a copy of `path` cut at `offset` with `tail` appended beside it, then renames it over
/// `path`: a reader sees the old file or the new one, never a mix.
fn replace_tail(path: &Path, offset: u64, tail: &[u8]) -> Result<(), SignError> {
    let err = |source| SignError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".tet-sign-")
        .tempfile_in(dir)
        .map_err(err)?;
    // A copy in the kernel (copy_file_range, or a reflink), the permissions kept.
    std::fs::copy(path, tmp.path()).map_err(err)?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .open(tmp.path())
        .map_err(err)?;
    out.set_len(offset).map_err(err)?;
    out.seek(SeekFrom::Start(offset)).map_err(err)?;
    out.write_all(tail).map_err(err)?;
    out.sync_all().map_err(err)?;
    drop(out);
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = ",\"tet_footer_digest\":\"xxh3-64:0123456789abcdef\"}";

    #[test]
    fn the_content_ends_before_the_trailing_members() {
        let body = "{\"history\":[],\"metadata\":{}";
        let unsigned = format!("{body}{DIGEST}");
        let (end, sigs) = split_footer(unsigned.as_bytes()).unwrap();
        assert_eq!((end, sigs.len()), (body.len(), 0));
        let entry = StoredSignature {
            content: "sha256:00".into(),
            sshsig: "-----BEGIN SSH SIGNATURE-----\nAA==\n-----END SSH SIGNATURE-----\n".into(),
        };
        let member = member_text(std::slice::from_ref(&entry)).unwrap();
        let signed = format!("{body}{member}{DIGEST}");
        let (end, sigs) = split_footer(signed.as_bytes()).unwrap();
        assert_eq!((end, sigs), (body.len(), vec![entry]));
        // A footer without a digest (the reference's): up to its closing brace.
        let plain = format!("{body}}}");
        assert_eq!(split_footer(plain.as_bytes()).unwrap().0, body.len());
    }

    #[test]
    fn a_member_out_of_place_or_form_is_malformed() {
        let body = "{\"history\":[],\"metadata\":{}";
        let spaced = format!("{body},\"tet_signatures\": []{DIGEST}");
        assert!(matches!(
            split_footer(spaced.as_bytes()),
            Err(SignError::Block(_))
        ));
        let first = format!("{{\"tet_signatures\":[],\"history\":[]{DIGEST}");
        assert!(matches!(
            split_footer(first.as_bytes()),
            Err(SignError::Block(_))
        ));
        let extra = format!(
            "{body},\"tet_signatures\":[{{\"content\":\"x\",\"sshsig\":\"y\",\"z\":1}}]{DIGEST}"
        );
        assert!(matches!(
            split_footer(extra.as_bytes()),
            Err(SignError::Block(_))
        ));
        assert!(split_footer(b"{}").is_err());
        assert!(split_footer(&DIGEST.as_bytes()[1..]).is_err());
    }
}
