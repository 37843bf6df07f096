//! Objects compressed with `blosc2`, or whose NaN/Inf masks use the `blosc2` mask method,
//! decoded without c-blosc2 (which cannot be linked into the `tet` binaries: its bundled zstd
//! collides with zstd-sys).
//!
//! Tensogram 0.24 stores such a payload (and such a mask blob) as one Blosc2 *contiguous frame*
//! (`b2frame`, a serialised super-chunk without metalayers): one Blosc2 chunk per 256 MiB of the
//! stage's input, type size the element size (1 for masks: packed bits, bit-shuffled).
//! [`tet_blosc2::decode_frame`] decodes it to exactly the size the descriptor implies (the
//! encoded stream before compression; `ceil(n / 8)` bytes for a mask). The rest of the pipeline
//! is tensogram's: the frame is rebuilt with the decompressed payload and compression `none`
//! (or the payload as it was, when only masks are blosc2), the blosc2 masks as method `none`
//! (raw packed bits), and handed to `tensogram::decode::decode_object_from_frame`, which undoes
//! the filter (shuffle) and the encoding (simple_packing) and restores NaN/Inf as for any other
//! object. The frame's own hash was checked before (the rebuilt frame carries none). Such an
//! object is never read by ranges: it is decoded whole, as every compressed object is.
//!
//! Memory: the decompressed payload, the rebuilt frame and tensogram's decoded bytes; at most
//! two of them are alive at once (about two decoded objects, as for the other compressed
//! objects).

use std::panic::{catch_unwind, AssertUnwindSafe};

use tensogram::{DataObjectDescriptor, MaskDescriptor};
use tet_source::{Feature, Part, Result, SourceError};

/// The note every variable decoded here carries.
pub(crate) const BLOSC2_NOTE: &str =
    "blosc2 decoded by tet-blosc2 (the converter's own Blosc2 frame decoder, not c-blosc2)";

/// What [`decode_object`] needs from the descriptor, checked at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blosc2Plan {
    /// Bytes of the stream the compression stage took (after encoding and filter).
    pub stage_len: usize,
    /// Elements of the object (each mask holds one bit per element).
    pub elements: u64,
}

/// Size of a frame header (`FR`, type, version, flags, total length).
const FRAME_HEADER: usize = 16;

fn malformed(label: &str, why: impl std::fmt::Display) -> SourceError {
    Part::Chunk.malformed(format!("{label}: {why}"))
}

/// A blosc2 decoding error: a variant the decoder does not implement is unsupported (named),
/// anything else a damaged payload.
fn blosc2_error(label: &str, what: &str, e: &tet_blosc2::Blosc2Error) -> SourceError {
    if e.is_unsupported() {
        Feature::Codec.unsupported(format!("{label}: {what}: {e}"))
    } else {
        malformed(label, format!("{what}: {e}"))
    }
}

/// Decodes the object of data frame `frame` (its hash already checked) to tensogram's decoded
/// bytes, in the object's own byte order.
pub(crate) fn decode_object(frame: &[u8], plan: Blosc2Plan, label: &str) -> Result<Vec<u8>> {
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        tensogram::framing::decode_data_object_frame(frame)
    }));
    let (mut desc, payload) = match parsed {
        Ok(Ok((desc, payload, _, _))) => (desc, payload),
        Ok(Err(e)) => return Err(malformed(label, e)),
        Err(_) => return Err(malformed(label, "the tensogram frame parser panicked")),
    };
    let mut body = if desc.compression == "blosc2" {
        let body = tet_blosc2::decode_frame(payload, plan.stage_len)
            .map_err(|e| blosc2_error(label, "payload", &e))?;
        desc.compression = "none".into();
        desc.params.retain(|k, _| !k.starts_with("blosc2_"));
        body
    } else {
        // Only masks are blosc2: the payload goes to tensogram as it is.
        payload.to_vec()
    };
    rebuild_masks(frame, &mut desc, &mut body, plan.elements, label)?;
    let rebuilt = tensogram::framing::encode_data_object_frame(&desc, &body, false, false)
        .map_err(|e| malformed(label, format!("rebuilding the frame: {e}")))?;
    drop(body);
    // The frame's own hash was checked before; the rebuilt frame carries none.
    let options = crate::decode_options(false);
    let decoded = catch_unwind(AssertUnwindSafe(|| {
        tensogram::decode::decode_object_from_frame(&rebuilt, &options)
    }));
    match decoded {
        Ok(Ok((_, data))) => Ok(data),
        Ok(Err(e)) => Err(malformed(label, e)),
        Err(_) => Err(malformed(label, "the tensogram decoder panicked")),
    }
}

/// Appends the object's mask blobs to `body` (the decompressed payload), blosc2 ones decoded to
/// method `none`, and points the descriptor's masks at them.
fn rebuild_masks(
    frame: &[u8],
    desc: &mut DataObjectDescriptor,
    body: &mut Vec<u8>,
    elements: u64,
    label: &str,
) -> Result<()> {
    let Some(masks) = desc.masks.as_mut() else {
        return Ok(());
    };
    let packed_len = usize::try_from(elements.div_ceil(8))
        .map_err(|_| malformed(label, "the masks are too large"))?;
    let kinds = [
        ("nan", &mut masks.nan),
        ("inf+", &mut masks.pos_inf),
        ("inf-", &mut masks.neg_inf),
    ];
    for (kind, mask) in kinds {
        let Some(m) = mask.as_mut() else { continue };
        let blob = mask_blob(frame, m).ok_or_else(|| {
            malformed(
                label,
                format!(
                    "the {kind} mask ({} bytes at payload byte {}) lies outside the frame",
                    m.length, m.offset
                ),
            )
        })?;
        let offset = body.len() as u64;
        if m.method == "blosc2" && !blob.is_empty() {
            let bits = tet_blosc2::decode_frame(blob, packed_len)
                .map_err(|e| blosc2_error(label, &format!("{kind} mask"), &e))?;
            body.extend_from_slice(&bits);
            m.method = "none".into();
            m.params.clear();
        } else {
            body.extend_from_slice(blob);
        }
        m.offset = offset;
        m.length = body.len() as u64 - offset;
    }
    Ok(())
}

/// The bytes of mask `m` in `frame` (its offset counts from the end of the frame header).
fn mask_blob<'f>(frame: &'f [u8], m: &MaskDescriptor) -> Option<&'f [u8]> {
    let start = usize::try_from(m.offset).ok()?.checked_add(FRAME_HEADER)?;
    let end = start.checked_add(usize::try_from(m.length).ok()?)?;
    frame.get(start..end)
}
