//! `allowed_signers` files, the format `ssh-keygen -Y verify -f FILE` reads (ssh-keygen(1),
//! "ALLOWED SIGNERS"): one key per line, `PRINCIPALS [OPTIONS] KEYTYPE BASE64 [COMMENT]`; blank
//! lines and `#` comments are skipped.
//!
//! - `PRINCIPALS`: a comma-separated list of names or patterns (`*`, `?`), possibly quoted;
//!   shown as the signer's name when the key matches.
//! - `OPTIONS` (comma-separated, values may be quoted): `namespaces="PATTERN,…"` restricts the
//!   key to those signature namespaces (`!PATTERN` excludes), as ssh-keygen does. A line with
//!   `cert-authority` (a CA key: it certifies other keys, it does not sign files itself),
//!   `valid-after`/`valid-before` (time limits, not checked here) or an unknown option is left
//!   out, with a warning: never wider than ssh-keygen.
//! - Keys that this build cannot read (algorithms other than those `ssh-key` decodes) are left
//!   out with a warning; the other lines still count.

use std::path::{Path, PathBuf};

use ssh_key::public::KeyData;
use ssh_key::PublicKey;

/// A malformed `allowed_signers` file, named with its line.
#[derive(Debug, thiserror::Error)]
pub enum AllowedError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {reason}")]
    Line {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// One usable line.
#[derive(Debug, Clone)]
struct Entry {
    principals: String,
    /// `namespaces="…"` patterns; `None`: any namespace.
    namespaces: Option<Vec<String>>,
    key: KeyData,
}

/// The keys of an `allowed_signers` file.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    entries: Vec<Entry>,
    /// Lines left out, and why (printed as warnings by the command line).
    pub skipped: Vec<String>,
}

/// Splits at unquoted whitespace (`sep` = None) or at unquoted `sep`, keeping quotes.
fn split_unquoted(s: &str, sep: Option<char>) -> Vec<&str> {
    let mut out = Vec::new();
    let mut quoted = false;
    let mut start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        let is_sep = match sep {
            Some(x) => c == x,
            None => c.is_ascii_whitespace(),
        };
        if c == '"' {
            quoted = !quoted;
        }
        if is_sep && !quoted {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            } else if sep.is_some() {
                out.push("");
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(s)
}

/// Whether a token names an SSH key type (so that no options field precedes it).
fn is_key_type(t: &str) -> bool {
    t.starts_with("ssh-")
        || t.starts_with("ecdsa-sha2-")
        || t.starts_with("sk-ssh-")
        || t.starts_with("sk-ecdsa-")
}

/// `*` and `?` glob match, as OpenSSH's `match_pattern`.
fn glob(pattern: &[u8], s: &[u8]) -> bool {
    match pattern.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((b'?', rest)) => !s.is_empty() && glob(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// OpenSSH's pattern-list match: a negated pattern (`!p`) that matches wins (no match), else any
/// matching pattern.
fn match_list(patterns: &[String], s: &str) -> bool {
    let mut any = false;
    for p in patterns {
        match p.strip_prefix('!') {
            Some(neg) if glob(neg.as_bytes(), s.as_bytes()) => return false,
            Some(_) => {}
            None => any |= glob(p.as_bytes(), s.as_bytes()),
        }
    }
    any
}

/// The `namespaces` of an options field; `Err` names an option the line is left out for.
fn parse_options(options: &str) -> Result<Option<Vec<String>>, String> {
    let mut namespaces = None;
    for opt in split_unquoted(options, Some(',')) {
        let (name, value) = opt.split_once('=').unwrap_or((opt, ""));
        match name.to_ascii_lowercase().as_str() {
            "namespaces" => {
                let list = unquote(value).split(',').map(str::to_string).collect();
                namespaces = Some(list);
            }
            other => return Err(format!("option `{other}` is not supported")),
        }
    }
    Ok(namespaces)
}

impl AllowedSigners {
    /// Reads an `allowed_signers` file.
    pub fn load(path: &Path) -> Result<AllowedSigners, AllowedError> {
        let text = std::fs::read_to_string(path).map_err(|source| AllowedError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        AllowedSigners::parse(&text).map_err(|(line, reason)| AllowedError::Line {
            path: path.to_path_buf(),
            line,
            reason,
        })
    }

    /// Parses the text of an `allowed_signers` file; `Err((line, reason))` for a malformed line.
    pub fn parse(text: &str) -> Result<AllowedSigners, (usize, String)> {
        let mut all = AllowedSigners::default();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let tokens = split_unquoted(line, None);
            let (principals, rest) = match tokens.split_first() {
                Some((p, rest)) if !rest.is_empty() => (unquote(p).to_string(), rest),
                _ => return Err((n, "expected `PRINCIPALS [OPTIONS] KEYTYPE BASE64`".into())),
            };
            let (options, key) = match rest {
                [t, k, ..] if is_key_type(t) => (None, (*t, *k)),
                [o, t, k, ..] if is_key_type(t) => (Some(*o), (*t, *k)),
                _ => return Err((n, "no key (`KEYTYPE BASE64`) on the line".into())),
            };
            let namespaces = match options.map(parse_options).transpose() {
                Ok(ns) => ns.flatten(),
                Err(why) => {
                    all.skipped
                        .push(format!("line {n} ({principals}): {why}; left out"));
                    continue;
                }
            };
            match PublicKey::from_openssh(&format!("{} {}", key.0, key.1)) {
                Ok(k) => all.entries.push(Entry {
                    principals,
                    namespaces,
                    key: k.key_data().clone(),
                }),
                Err(e) => all.skipped.push(format!(
                    "line {n} ({principals}): cannot read its {} key ({e}); left out",
                    key.0
                )),
            }
        }
        Ok(all)
    }

    /// The principals of the first line that allows `key` to sign in `namespace`.
    pub fn principals_for(&self, key: &KeyData, namespace: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| {
                e.key == *key
                    && e.namespaces
                        .as_ref()
                        .is_none_or(|ns| match_list(ns, namespace))
            })
            .map(|e| e.principals.as_str())
    }

    /// Whether the file lists `key` at all (for any namespace).
    pub fn lists(&self, key: &KeyData) -> bool {
        self.entries.iter().any(|e| e.key == *key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_negation() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(match_list(&l(&["tet-*"]), "tet-convert@file-content"));
        assert!(!match_list(&l(&["git"]), "tet-convert@file-content"));
        assert!(!match_list(
            &l(&["*", "!tet-*"]),
            "tet-convert@file-content"
        ));
        assert!(match_list(
            &l(&["git", "tet-convert@file-content"]),
            "tet-convert@file-content"
        ));
    }

    #[test]
    fn lines_with_and_without_options() {
        let key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDlTv8l90KOGjUCM4NDqsBk+LoSa671xOG7TzKqpbB59";
        let text = format!(
            "# team\n\nalice@example.org {key} laptop\n\"bob,carol\" namespaces=\"git,tet-*\" {key}\n\
             ca@example.org cert-authority {key}\n"
        );
        let a = AllowedSigners::parse(&text).unwrap();
        assert_eq!(a.entries.len(), 2);
        assert_eq!(a.entries[1].principals, "bob,carol");
        assert_eq!(
            a.entries[1].namespaces,
            Some(vec!["git".to_string(), "tet-*".to_string()])
        );
        assert_eq!(a.skipped.len(), 1, "{:?}", a.skipped);
        assert!(AllowedSigners::parse("alice\n").is_err());
    }
}
