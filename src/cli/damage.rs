//! What is wrong with a `.tet` file that opens but is damaged, in the words of someone who
//! copied it, not of the format: a file cut short (a copy or a download that stopped, a disk
//! that filled) says how many bytes it has, how many its data needs and what is missing; a
//! footer that cannot be read says so. `tet info` of such a file exits 1 with this line, and
//! `tet verify` and `tet audit` put it first. A file whose superblock or index is cut is refused
//! when it is opened, with the same kind of words ([`tet::format::TetFile::open`]).

use tet::format::integrity::FooterDigest;
use tet::format::{TetFile, FLAG_FOOTER, FOOTER_MAGIC, FOOTER_TRAILER_LEN};

/// Where the file's bytes should end, as its chunk index says: the end of the index and of
/// the last chunk payload.
fn data_end(f: &TetFile) -> u64 {
    let index_end = f.chunk_index_offset.saturating_add(f.chunk_index_length);
    f.entries
        .iter()
        .map(|e| e.payload_offset.saturating_add(e.stored_byte_len))
        .fold(index_end, u64::max)
}

/// Whether the file's last bytes are the footer's end marker.
fn ends_with_marker(f: &TetFile) -> bool {
    let len = f.file_len();
    len >= FOOTER_TRAILER_LEN
        && matches!(f.read_bytes(len - 4, 4), Ok(Some(b)) if *b == FOOTER_MAGIC)
}

/// "1234 bytes (1.2 KiB)" above a few KiB, "12 bytes" below.
fn bytes(n: u64) -> String {
    if n < 10 << 10 {
        format!("{n} bytes")
    } else {
        format!("{n} bytes ({})", super::human_bytes(n))
    }
}

/// A file cut short: what is missing and how much; `None` when every byte the index and the
/// footer flag promise is there.
pub(crate) fn truncation(f: &TetFile) -> Option<String> {
    let len = f.file_len();
    let end = data_end(f);
    let has_footer = f.flags & FLAG_FOOTER != 0;
    if end > len {
        let cut = f
            .entries
            .iter()
            .filter(|e| e.payload_offset.saturating_add(e.stored_byte_len) > len)
            .count();
        let footer = if has_footer {
            ", and the footer with the metadata and history"
        } else {
            ""
        };
        return Some(format!(
            "file is truncated: it has {} where its data needs {}; the last {} or more are \
             missing ({cut} of {} chunks cut off{footer}). The copy or download did not finish, \
             or the disk filled while it was written",
            bytes(len),
            bytes(end),
            bytes(end - len),
            f.entries.len()
        ));
    }
    if has_footer && f.footer_layout().is_none() && !ends_with_marker(f) {
        return Some(format!(
            "file is truncated: it ends inside its footer (the metadata and history): {} of the \
             footer are there, its end (at least the last {FOOTER_TRAILER_LEN} bytes) is \
             missing; the data of all {} chunks is complete. The copy or download did not \
             finish, or the disk filled while it was written",
            bytes(len - end),
            f.entries.len()
        ));
    }
    None
}

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
