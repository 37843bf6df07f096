//! Recognising an HDF5 file from its first bytes: the signature (at 0 or after a user block),
//! the end of file the superblock records, and a truncated file refused before libhdf5 sees it.

use tet_source::{Part, Result};

/// The HDF5 signature; at offset 0, or at 512, 1024, 2048, … after a user block.
pub const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Whether `head` carries the HDF5 signature at 0 or at a user-block boundary.
pub fn has_signature(head: &[u8]) -> bool {
    let mut off = 0usize;
    loop {
        match head.get(off..off + 8) {
            Some(s) if s == SIGNATURE => return true,
            Some(_) => {}
            None => return false,
        }
        off = if off == 0 { 512 } else { off * 2 };
    }
}

/// What the first bytes of a file say about its HDF5 superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuperblockEnd {
    /// Where the file ends as its superblock records it (the end-of-file address, which
    /// libhdf5 stores as an absolute offset).
    At(u64),
    /// The bytes end inside the superblock's fixed fields.
    CutOff,
    /// No signature, a version other than 0–3, addresses not 8 bytes wide, or an undefined
    /// end-of-file address: nothing to check.
    Unknown,
}

/// Reads the end-of-file address of the HDF5 superblock in `head` (the first bytes of the file;
/// the superblock is at 0, 512, 1024, … after a user block).
pub fn superblock_end_of_file(head: &[u8]) -> SuperblockEnd {
    let mut off = 0usize;
    loop {
        match head.get(off..off + 8) {
            Some(s) if s == SIGNATURE => break,
            Some(_) => {}
            None => return SuperblockEnd::Unknown,
        }
        off = if off == 0 { 512 } else { off * 2 };
    }
    let sb = &head[off..];
    let Some(&version) = sb.get(8) else {
        return SuperblockEnd::CutOff;
    };
    // Where the addresses (base, free space or extension, end of file, …) start, and where the
    // size of an address is.
    let (addresses, size_at) = match version {
        0 => (24, 13),
        1 => (28, 13),
        2 | 3 => (12, 9),
        _ => return SuperblockEnd::Unknown,
    };
    let Some(&size_of_offsets) = sb.get(size_at) else {
        return SuperblockEnd::CutOff;
    };
    if size_of_offsets != 8 {
        return SuperblockEnd::Unknown;
    }
    let addr = |k: usize| -> Option<u64> {
        let at = addresses + 8 * k;
        Some(u64::from_le_bytes(sb.get(at..at + 8)?.try_into().ok()?))
    };
    let Some(eof) = addr(2) else {
        return SuperblockEnd::CutOff;
    };
    if eof == u64::MAX {
        return SuperblockEnd::Unknown;
    }
    SuperblockEnd::At(eof)
}

/// Refuses a file shorter than its HDF5 superblock says it is, before libhdf5 parses it. This is
/// libhdf5's own test (`H5F__super_read`: the file's size against the stored end-of-file
/// address), done first so that the error is clear (netCDF-C reports it as "HDF error") and a
/// cut file never reaches the library's parsers (libhdf5 1.10.8 handles some damaged files
/// badly). `head` is the first bytes of the file (up to 64 KiB), `len` its length, `what` the
/// format for the message (`HDF5`, `netCDF-4`).
pub fn check_not_truncated(head: &[u8], len: u64, what: &str) -> Result<()> {
    match superblock_end_of_file(head) {
        SuperblockEnd::At(end) if end > len => Err(Part::Header.malformed(format!(
            "truncated {what} file: its superblock says it ends at byte {end}, the file has {len} bytes"
        ))),
        SuperblockEnd::CutOff if head.len() as u64 == len => Err(Part::Header.malformed(format!(
            "truncated {what} file: it ends inside its superblock ({len} bytes)"
        ))),
        _ => Ok(()),
    }
}
