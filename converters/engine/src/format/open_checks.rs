//! The checks a reader runs on an open `.tet` file before it trusts a value of it: the
//! checksum records consistent and the footer digest matching ([`check_integrity`]), and the
//! chunk index covering every dataset's grid exactly once with sizes the stored bytes can hold
//! ([`check_index_covers`]). Every way in that returns values uses them: the Python reader and
//! `tet export` through [`crate::export::Plan::for_reading`] and `export::write`, and a `.tet`
//! converted again ([`crate::tet_input`]).

use super::integrity::{self, FooterDigest};
use super::{corrupt, zstd_max_raw_len, Codec, TetError, TetFile};

/// Checks the checksums a file with a readable footer records, as far as opening can: the
/// footer digest and the chunk digest list present together, the list usable, and the footer
/// digest equal to the bytes it covers. `Ok(true)` when the file records checksums and they
/// held, `Ok(false)` when it records none (the files of the reference tools).
pub fn check_integrity(tet: &TetFile) -> std::result::Result<bool, TetError> {
    let digests = tet.chunk_digests();
    match tet.footer_digest() {
        FooterDigest::Mismatch { recorded, computed } => Err(corrupt(format!(
            "the superblock, directory, chunk index and footer hash to {} but the footer \
             records {} (bytes 0..{} or the footer changed)",
            integrity::hex(computed),
            integrity::hex(recorded),
            tet.chunk_index_offset
                .saturating_add(tet.chunk_index_length)
        ))),
        FooterDigest::Malformed(m) => Err(corrupt(format!("footer digest: {m}"))),
        FooterDigest::Absent => match digests {
            None => Ok(false),
            Some(_) => Err(corrupt(
                "chunk digests are recorded but the footer digest is missing",
            )),
        },
        FooterDigest::Ok(_) => match digests {
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(corrupt(format!("chunk digests: {e}"))),
            None => Err(corrupt(format!(
                "the footer digest is recorded but `tet_ext.{}` is missing",
                integrity::CHUNK_DIGESTS_KEY
            ))),
        },
    }
}

/// Checks that the chunk index covers every dataset's grid exactly once, each row inside its
/// grid, its `raw_byte_len` that of its (clipped) chunk, its stored bytes inside the file and
/// able to hold that many bytes (a raw payload as long, a zstd frame within the format's
/// ratio). What a reader needs before it sizes a buffer from a dataset's shape: a shape the
/// index contradicts is refused here, not met as an allocation of exabytes. Linear in the
/// index rows; allocates nothing in proportion to a claimed size.
pub fn check_index_covers(tet: &TetFile) -> std::result::Result<(), TetError> {
    let mut keys: Vec<(u64, u64)> = Vec::with_capacity(tet.entries.len());
    for (row, e) in tet.entries.iter().enumerate() {
        let d = usize::try_from(e.dataset_id)
            .ok()
            .and_then(|i| tet.datasets.get(i))
            .ok_or_else(|| {
                corrupt(format!(
                    "chunk index row {row} names dataset {} of {}",
                    e.dataset_id,
                    tet.datasets.len()
                ))
            })?;
        let coords = e.coords.get(..d.grid.rank()).unwrap_or(&e.coords[..]);
        let at = |m: String| {
            corrupt(format!(
                "dataset `{}` chunk {coords:?} (index row {row}): {m}",
                d.name
            ))
        };
        let linear = d.grid.linear(coords).ok_or_else(|| {
            at(format!(
                "outside the grid of shape {:?} in chunks of {:?}",
                d.shape, d.chunk_shape
            ))
        })?;
        let want = d
            .grid
            .chunk_elements(coords)
            .checked_mul(d.dtype.size() as u64);
        if want != Some(e.raw_byte_len) {
            return Err(at(format!(
                "raw_byte_len {} but the chunk holds {} bytes",
                e.raw_byte_len,
                want.map_or("more than 2^64".into(), |w| w.to_string())
            )));
        }
        match e.codec() {
            Some(Codec::Raw) if e.stored_byte_len != e.raw_byte_len => {
                return Err(at(format!(
                    "raw chunk has stored_byte_len {} but raw_byte_len {}",
                    e.stored_byte_len, e.raw_byte_len
                )));
            }
            // zstd and the extension codecs (one zstd frame of raw_byte_len bytes each).
            Some(c)
                if c.is_zstd_frame() && e.raw_byte_len > zstd_max_raw_len(e.stored_byte_len) =>
            {
                return Err(at(format!(
                    "raw_byte_len {} is more than a {}-byte zstd frame can hold",
                    e.raw_byte_len, e.stored_byte_len
                )));
            }
            _ => {}
        }
        let inside = e
            .payload_offset
            .checked_add(e.stored_byte_len)
            .is_some_and(|end| end <= tet.file_len());
        if !inside {
            return Err(at(format!(
                "payload {}+{} lies past the end of the file ({} bytes)",
                e.payload_offset,
                e.stored_byte_len,
                tet.file_len()
            )));
        }
        keys.push((e.dataset_id, linear));
    }
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        let d = &tet.datasets[w[0].0 as usize];
        return Err(corrupt(format!(
            "dataset `{}` chunk {:?} is in the chunk index twice",
            d.name,
            d.grid.coords(w[0].1)
        )));
    }
    for (id, d) in tet.datasets.iter().enumerate() {
        let id = id as u64;
        let have = keys.partition_point(|k| k.0 <= id) - keys.partition_point(|k| k.0 < id);
        if have as u64 != d.grid.total {
            return Err(corrupt(format!(
                "dataset `{}` of shape {:?} in chunks of {:?} has {} chunks, the chunk index \
                 {have}",
                d.name, d.shape, d.chunk_shape, d.grid.total
            )));
        }
    }
    Ok(())
}
