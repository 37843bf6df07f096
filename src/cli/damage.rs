//! What is wrong with a `.tet` file that opens but is damaged, in the words of someone who
//! copied it, not of the format: a file cut short (a copy or a download that stopped, a disk
//! that filled) says how many bytes it has, how many its data needs and what is missing; a
//! footer that cannot be read says so. `tet info` of such a file exits 1 with this line, and
//! `tet verify` and `tet audit` put it first. A file whose superblock or index is cut is refused
//! when it is opened, with the same kind of words ([`tet::format::TetFile::open`]).

use tet::format::integrity::FooterDigest;
use tet::format::TetFile;

pub(crate) use tet::provenance::report::truncation;

/// What is wrong with a file that opened: [`truncation`], a footer that cannot be read, or a
/// footer digest that does not match the bytes; `None` when none of these.
pub(crate) fn describe(f: &TetFile) -> Option<String> {
    if let Some(t) = truncation(f) {
        return Some(t);
    }
    if let Err(e) = f.footer() {
        return Some(format!(
            "file is damaged: its footer (the metadata and history) cannot be read: {e}"
        ));
    }
    if let FooterDigest::Mismatch { .. } = f.footer_digest() {
        return Some(
            "file is damaged: its index or footer changed since it was written (the digest it \
             records does not match; tet verify says more)"
                .into(),
        );
    }
    None
}
