//! Provenance an auditor can check with tools we did not write.
//!
//! - [`sign`]: OpenSSH `SSHSIG` signatures over a file's content digest, stored in its footer
//!   (`tet sign`), which `ssh-keygen -Y verify` accepts; [`allowed`] reads the `allowed_signers`
//!   files that name the trusted keys, [`check`] checks a file's signatures (`tet verify
//!   --signers`, `tet audit`).
//! - [`lineage`]: the history rows of several files as one graph of entities and activities,
//!   joined by digest; written as W3C PROV-JSON by [`prov`] (`tet audit --prov`) and drawn with
//!   Graphviz by [`graph`] (`tet audit --graph`).
//! - [`report`]: the reports of `tet verify` and `tet audit` (`--json`), which the Python
//!   package's `tet.verify` and `tet.audit` return as they are.
//! - [`reproduce`]: a file re-made from what its footer records and compared with it
//!   (`tet audit --reproduce`).
//!
//! docs/FORMAT.md ("Signatures") defines the signed content and the stored form;
//! docs/guide/provenance.md is the auditor's guide.

pub mod allowed;
pub mod check;
pub mod graph;
pub mod lineage;
pub mod prov;
pub mod report;
pub mod reproduce;
pub mod sign;
