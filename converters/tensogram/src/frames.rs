//! The frame structure of one message: tensogram's own parse of it (run with panics caught,
//! since the bytes are untrusted), plus a walk over its frames that checks the hash of every
//! non-data frame and that every frame the preamble declares is there.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ciborium::Value;
use tensogram::DataObjectDescriptor;

/// What `framing::decode_message` tells about one message, owned.
pub(crate) struct ParsedMessage {
    pub(crate) base: Vec<std::collections::BTreeMap<String, Value>>,
    pub(crate) extra: std::collections::BTreeMap<String, Value>,
    pub(crate) encoder: Option<String>,
    /// Descriptor, payload length, frame offset in the message, first (up to) 4 payload bytes.
    pub(crate) objects: Vec<(DataObjectDescriptor, usize, usize, Vec<u8>)>,
    /// Per object, where its payload starts in the message (for reads of element ranges of a
    /// message read by ranges).
    pub(crate) payload_offsets: Vec<Option<u64>>,
    pub(crate) index: Option<(Vec<u64>, Vec<u64>)>,
}

/// Why the frames of a message cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// tensogram refused the bytes (its error, kept).
    #[error(transparent)]
    Tensogram(#[from] tensogram::TensogramError),
    /// tensogram's decoder panicked on them (the panic's text).
    #[error("the tensogram decoder panicked: {0}")]
    Panicked(String),
    /// A frame that runs past the postamble (its position in the message).
    #[error("the frame at message byte {0} runs past the postamble")]
    PastEnd(usize),
    /// A frame whose hash check failed: which, where, and why.
    #[error("{frame:?} frame at message byte {pos}: {source}")]
    Frame {
        /// The frame's type.
        frame: tensogram::wire::FrameType,
        /// Its position in the message.
        pos: usize,
        /// The check's error.
        source: Box<FrameError>,
    },
    /// Frames the preamble declares that the message does not hold (their names).
    #[error("the preamble declares {0} frame(s) that the message does not hold")]
    Missing(String),
}

/// Runs a `tensogram` call on untrusted bytes, turning a panic into an error.
pub(crate) fn guarded<T>(
    f: impl FnOnce() -> tensogram::Result<T>,
) -> std::result::Result<T, FrameError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(FrameError::Tensogram(e)),
        Err(p) => Err(FrameError::Panicked(tet_source::panic_text(&*p))),
    }
}

/// Walks the frames of a message the way `framing::decode_message` does, verifying the inline
/// xxh3 hash of every frame except the data frames (whose hashes are checked when they are
/// decoded), so that corrupt metadata, index or hash frames are refused at open. Also requires
/// every metadata, index and hash frame the preamble flags declare to be there: a frame whose
/// type was damaged (an index read as metadata, say) would otherwise pass unnoticed, since the
/// hash does not cover the frame header. (A message without data frames may leave out the hash
/// frames it declares: tensogram's streaming encoder writes none when no object came.)
fn walk_frames(bytes: &[u8]) -> std::result::Result<(), FrameError> {
    use tensogram::wire::{FrameHeader, FrameType};
    let declared = be_u16(bytes, 10).unwrap_or(0);
    let mut observed = 0u16;
    let mut data_frames = 0usize;
    let end = bytes.len().saturating_sub(24);
    let mut pos = 24;
    while pos + 16 <= end {
        if &bytes[pos..pos + 2] != b"FR" {
            pos += 1;
            continue;
        }
        let header = guarded(|| FrameHeader::read_from(&bytes[pos..]))?;
        let frame_end = usize::try_from(header.total_length)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= end && e >= pos + 16)
            .ok_or(FrameError::PastEnd(pos))?;
        observed |= match header.frame_type {
            FrameType::HeaderMetadata => 1,
            FrameType::FooterMetadata => 2,
            FrameType::HeaderIndex => 4,
            FrameType::FooterIndex => 8,
            FrameType::HeaderHash => 0x10,
            FrameType::FooterHash => 0x20,
            FrameType::NTensorFrame => {
                data_frames += 1;
                0
            }
            FrameType::PrecederMetadata => 0,
        };
        if header.frame_type != FrameType::NTensorFrame {
            let frame = &bytes[pos..frame_end];
            guarded(|| tensogram::hash::check_frame_hash(frame, header.frame_type)).map_err(
                |e| FrameError::Frame {
                    frame: header.frame_type,
                    pos,
                    source: Box::new(e),
                },
            )?;
        }
        // Padding to the next 8-byte boundary of the frame, as tensogram's reader skips it.
        pos += (frame_end - pos).div_ceil(8) * 8;
    }
    let mut missing = declared & 0x3f & !observed;
    if data_frames == 0 {
        // A hash frame lists the hashes of the data objects: tensogram's streaming encoder
        // declares its footer hash frame up front but writes none when no object came.
        missing &= !0x30;
    }
    if missing != 0 {
        let names: Vec<&str> = [
            "header metadata",
            "footer metadata",
            "header index",
            "footer index",
            "header hash",
            "footer hash",
        ]
        .iter()
        .enumerate()
        .filter(|(bit, _)| missing & (1 << bit) != 0)
        .map(|(_, n)| *n)
        .collect();
        return Err(FrameError::Missing(names.join(", ")));
    }
    Ok(())
}

pub(crate) fn parse_message(bytes: &[u8]) -> std::result::Result<ParsedMessage, FrameError> {
    let msg = guarded(|| tensogram::framing::decode_message(bytes))?;
    walk_frames(bytes)?;
    let encoder = match msg.global_metadata.reserved.get("encoder") {
        Some(Value::Map(m)) => {
            let field = |name: &str| {
                m.iter().find_map(|(k, v)| match (k, v) {
                    (Value::Text(k), Value::Text(v)) if k == name => Some(v.clone()),
                    _ => None,
                })
            };
            match (field("name"), field("version")) {
                (Some(n), Some(v)) => Some(format!("{n} {v}")),
                (Some(n), None) => Some(n),
                _ => None,
            }
        }
        _ => None,
    };
    let start = bytes.as_ptr() as usize;
    let payload_offsets = msg
        .objects
        .iter()
        .map(|(_, payload, _, _)| {
            let off = (payload.as_ptr() as usize).checked_sub(start)?;
            (off.checked_add(payload.len())? <= bytes.len()).then_some(off as u64)
        })
        .collect();
    Ok(ParsedMessage {
        payload_offsets,
        base: msg.global_metadata.base,
        extra: msg.global_metadata.extra,
        encoder,
        objects: msg
            .objects
            .into_iter()
            .map(|(d, payload, _, off)| {
                let head = payload[..payload.len().min(4)].to_vec();
                (d, payload.len(), off, head)
            })
            .collect(),
        index: msg.index.map(|i| (i.offsets, i.lengths)),
    })
}

pub(crate) fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

pub(crate) fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}
