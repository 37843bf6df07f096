//! The errors an importer returns, classified by variant: the bytes are wrong ([`Part`] says
//! where), the file is valid but uses something the importer cannot map ([`Feature`] says
//! what), a library failed (its error kept as the `source()`), or the caller asked for
//! something impossible ([`Request`]). Context is added by wrapping
//! ([`SourceError::InVariable`]), never by rewriting a message; every `Display` is one line,
//! since front ends print one line.

use std::fmt;
use std::path::PathBuf;

/// Errors an importer returns.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading the file failed; the I/O error is kept as it is.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The bytes are not a valid file of the format (truncated, corrupt, inconsistent header):
    /// where, what, and the decoder's or parser's own error when one found it.
    #[error("{}", with_cause(.detail, .cause))]
    Malformed {
        /// Where the bytes are wrong.
        part: Part,
        /// What is wrong, one line (empty when the cause says it all).
        detail: String,
        /// The error of the decoder or parser that found it, kept.
        #[source]
        cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// Valid, but something the importer cannot map (and `skip_unsupported` was not set).
    #[error("unsupported: {detail}")]
    Unsupported {
        /// What kind of thing is not supported.
        feature: Feature,
        /// What exactly, one line.
        detail: String,
    },
    /// An error reported by an underlying library: which one, what was being done, and the
    /// library's own error as the [`std::error::Error::source`] (its text ends the message too,
    /// since front ends print one line).
    #[error("{context}: {source}")]
    Library {
        /// The library that reported it.
        lib: Lib,
        /// What was being done (`dataset 'x': creation properties`).
        context: String,
        /// The library's error, kept.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A caller error: a region outside the variable, a wrong buffer size, a bad variable index.
    #[error("invalid request: {0}")]
    InvalidRequest(Request),
    /// An error about one variable, with the variable's name as context (its text follows the
    /// name, so the message stays one line; the error is also the `source()`).
    #[error("variable '{name}': {source}")]
    InVariable {
        /// The variable's name in the source.
        name: String,
        /// What went wrong.
        #[source]
        source: Box<SourceError>,
    },
}

/// Where the bytes of a malformed file are wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// The signature or the fixed header (superblock, NPY header, TeaFile header, preamble):
    /// not the format at all, truncated, or an inconsistent header field.
    Header,
    /// A metadata document or table (Zarr JSON, Tensogram metadata, an object's messages).
    Metadata,
    /// A data type's description (a record whose fields overlap or exceed it, an unknown code).
    Type,
    /// A shape, an extent or a size that is inconsistent or overflows.
    Shape,
    /// An index of the data (chunk B-tree, shard index, frame or item table, offsets).
    Index,
    /// A chunk's or a frame's stored bytes (a compressed stream that does not decode, a
    /// checksum that does not match, fewer bytes than declared).
    Chunk,
    /// Decoded values that contradict their own description (text that does not decode,
    /// counts of a ragged array that do not add up).
    Values,
    /// An attribute.
    Attribute,
}

impl Part {
    /// A malformed-file error in this part, with what is wrong (one line).
    pub fn malformed(self, detail: impl Into<String>) -> SourceError {
        SourceError::Malformed {
            part: self,
            detail: detail.into(),
            cause: None,
        }
    }

    /// A malformed-file error in this part found by a decoder or parser, whose own error is
    /// kept as the cause: `detail` says where (`array 'x': cannot decode [0..4]`), the cause
    /// what (its text follows, after `: `).
    pub fn malformed_by(
        self,
        detail: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> SourceError {
        SourceError::Malformed {
            part: self,
            detail: detail.into(),
            cause: Some(Box::new(cause)),
        }
    }

    /// A malformed-file error in this part that a decoder or parser reported, its error kept as
    /// the cause and as the whole message.
    pub fn malformed_from(
        self,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> SourceError {
        SourceError::Malformed {
            part: self,
            detail: String::new(),
            cause: Some(Box::new(cause)),
        }
    }
}

/// What a valid file uses that the importer cannot map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// A data type (an element type, a record layout, a string or object kind).
    DataType,
    /// A codec, compressor or filter, or its configuration.
    Codec,
    /// A storage layout (virtual or external storage, a chunk grid, strides, memory order).
    Layout,
    /// A structure of the file (links, references, nested groups or types, object kinds).
    Structure,
    /// An attribute's type or shape.
    Attribute,
    /// A version or variant of the format.
    Version,
    /// A size beyond what the importer holds in memory (values gathered whole at open).
    Size,
}

impl Feature {
    /// An unsupported-feature error, with what exactly is not supported (one line).
    pub fn unsupported(self, detail: impl Into<String>) -> SourceError {
        SourceError::Unsupported {
            feature: self,
            detail: detail.into(),
        }
    }
}

/// What was wrong with a caller's request ([`SourceError::InvalidRequest`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Request {
    /// The variable index is not one of the source's.
    #[error("no variable {var} ({count} variables)")]
    NoVariable {
        /// The index asked for.
        var: usize,
        /// How many variables there are.
        count: usize,
    },
    /// An index into one of the importer's own tables that holds no entry (an object, a field
    /// layout): the caller's index does not belong to this source.
    #[error("no {table} {index}")]
    NoEntry {
        /// What the table holds.
        table: &'static str,
        /// The index asked for.
        index: usize,
    },
    /// The region's start or count has not the variable's rank.
    #[error("region rank {start}/{count} does not match variable rank {rank}")]
    Rank {
        /// Length of the start.
        start: usize,
        /// Length of the count.
        count: usize,
        /// The variable's rank.
        rank: usize,
    },
    /// The region ends past an axis.
    #[error("region {start}+{count} exceeds axis length {len}")]
    OutOfBounds {
        /// Start on the axis.
        start: u64,
        /// Count on the axis.
        count: u64,
        /// The axis length.
        len: u64,
    },
    /// A chunk position outside the chunk grid.
    #[error("chunk {pos:?} is outside the chunk grid {grid:?}")]
    OutsideGrid {
        /// The position asked for.
        pos: Vec<u64>,
        /// Chunks per axis.
        grid: Vec<u64>,
    },
    /// The region's size (or a position in it) does not fit in memory's integers.
    #[error("region size overflows")]
    TooLarge,
    /// The output buffer has not the region's size.
    #[error("output buffer is {got} bytes, region needs {expected}")]
    BufferSize {
        /// Bytes the region needs.
        expected: u64,
        /// Bytes given.
        got: u64,
    },
    /// Fewer bytes given than the request needs (a header prefix cut before its end).
    #[error("{what} needs {needed} bytes, {given} were given")]
    TooFewBytes {
        /// What was asked for (`the header`).
        what: &'static str,
        /// Bytes it needs.
        needed: u64,
        /// Bytes given.
        given: u64,
    },
    /// Whole bytes asked of an input that is read by ranges.
    #[error("the input is read by ranges: its bytes are not held whole")]
    NotWhole,
    /// A path the library cannot be given.
    #[error("path {path:?} {issue}")]
    Path {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        issue: PathIssue,
    },
    /// The variable is not read this way (no numeric values, not a whole record, …).
    #[error("variable '{name}' {why}")]
    NotReadable {
        /// The variable.
        name: String,
        /// Why (`has no numeric values`).
        why: &'static str,
    },
}

/// What is wrong with a path ([`Request::Path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathIssue {
    /// It holds a NUL byte, which a C library cannot take.
    Nul,
    /// It is not valid Unicode, which the library needs.
    NotUnicode,
}

impl fmt::Display for PathIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathIssue::Nul => "contains a NUL byte",
            PathIssue::NotUnicode => "is not valid Unicode",
        })
    }
}

impl From<Request> for SourceError {
    fn from(r: Request) -> Self {
        SourceError::InvalidRequest(r)
    }
}

/// `detail`, then the cause's text after `: ` (the cause alone when there is no detail).
fn with_cause(
    detail: &str,
    cause: &Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
) -> String {
    match cause {
        None => detail.to_string(),
        Some(c) if detail.is_empty() => c.to_string(),
        Some(c) => format!("{detail}: {c}"),
    }
}

/// The underlying libraries whose errors an importer passes on ([`SourceError::Library`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    /// libhdf5 (through hdf5-metno).
    Hdf5,
    /// netCDF-C (through netcdf-sys).
    NetCdf,
    /// zarrs.
    Zarrs,
}

impl fmt::Display for Lib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lib::Hdf5 => "libhdf5",
            Lib::NetCdf => "netCDF-C",
            Lib::Zarrs => "zarrs",
        })
    }
}

/// A library's report that carries no error value of its own (a failed call that returned only
/// a status): the text is the cause of a [`SourceError::Library`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LibraryMessage(pub String);

impl SourceError {
    /// A [`SourceError::Library`]: `lib` failed while doing `context`, with its error `source`.
    pub fn library(
        lib: Lib,
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        SourceError::Library {
            lib,
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// A [`SourceError::Library`] whose library reported only a failed status: `what` failed.
    pub fn library_status(lib: Lib, context: impl Into<String>, what: impl Into<String>) -> Self {
        SourceError::library(lib, context, LibraryMessage(what.into()))
    }

    /// `source` about the variable `name` ([`SourceError::InVariable`]). An error already about
    /// that variable is returned as it is.
    pub fn in_variable(name: impl Into<String>, source: SourceError) -> Self {
        let name = name.into();
        match source {
            SourceError::InVariable { name: n, source } if n == name => {
                SourceError::InVariable { name: n, source }
            }
            source => SourceError::InVariable {
                name,
                source: Box::new(source),
            },
        }
    }

    /// The error under any [`SourceError::InVariable`] context.
    pub fn innermost(&self) -> &SourceError {
        match self {
            SourceError::InVariable { source, .. } => source.innermost(),
            e => e,
        }
    }

    /// Where the bytes are wrong, for a malformed file (under any variable context).
    pub fn part(&self) -> Option<Part> {
        match self.innermost() {
            SourceError::Malformed { part, .. } => Some(*part),
            _ => None,
        }
    }

    /// What is not supported, for an unsupported item (under any variable context).
    pub fn feature(&self) -> Option<Feature> {
        match self.innermost() {
            SourceError::Unsupported { feature, .. } => Some(*feature),
            _ => None,
        }
    }
}

/// The result of an importer call.
pub type Result<T, E = SourceError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn classified_by_variant_with_one_line_messages() {
        let e = Part::Header.malformed("not a NetCDF file");
        assert_eq!(e.part(), Some(Part::Header));
        assert_eq!(e.feature(), None);
        assert_eq!(e.to_string(), "not a NetCDF file");
        assert!(e.source().is_none());

        let e = Feature::Codec.unsupported("filter 307");
        assert_eq!(e.feature(), Some(Feature::Codec));
        assert_eq!(e.to_string(), "unsupported: filter 307");

        let e = SourceError::from(Request::OutOfBounds {
            start: 3,
            count: 4,
            len: 5,
        });
        assert!(matches!(
            e,
            SourceError::InvalidRequest(Request::OutOfBounds { len: 5, .. })
        ));
        assert_eq!(
            e.to_string(),
            "invalid request: region 3+4 exceeds axis length 5"
        );
    }

    #[test]
    fn context_wraps_and_the_cause_is_kept() {
        let io = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "cut short");
        let e = SourceError::in_variable("t", Part::Chunk.malformed_by("chunk [0]", io));
        assert_eq!(e.to_string(), "variable 't': chunk [0]: cut short");
        assert_eq!(e.part(), Some(Part::Chunk));
        // The chain: the variable's context, the malformed chunk, the decoder's own error.
        let malformed = e.source().expect("the wrapped error");
        assert_eq!(malformed.to_string(), "chunk [0]: cut short");
        let cause = malformed.source().expect("the decoder's error");
        let io = cause
            .downcast_ref::<std::io::Error>()
            .expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof);
        // Wrapping twice in the same variable does not repeat it.
        let again = SourceError::in_variable("t", e);
        assert_eq!(again.to_string(), "variable 't': chunk [0]: cut short");

        let parse = "x".parse::<u8>().unwrap_err();
        let e = Part::Metadata.malformed_from(parse.clone());
        assert_eq!(e.to_string(), parse.to_string());
    }
}
