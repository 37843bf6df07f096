//! A `.tet` file as a conversion input: re-chunking and re-compressing (`tet-convert in.tet
//! out.tet --chunk … --codec …`).
//!
//! `.tet` is the engine's own format, so its importer lives here rather than under `converters/`
//! (importers never depend on the engine). It offers every dataset as a variable read through
//! [`TetFile::read_region`], with the `.tet` chunk shape as the planner's source-chunk hint, like
//! any chunked source. Everything the footer holds is carried over verbatim by the pipeline
//! ([`open_input`], [`TetSource::carried_footer`]): the earlier history rows (the new row is appended, its parent the digest of
//! the input `.tet`), each dataset's typed metadata (including what an earlier conversion widened),
//! global attributes, skipped items and extension keys. So a lineage of several steps can be
//! followed back to the original source with `tet audit`.
//!
//! An object input is read by ranges ([`Importer::open_bytes`] over a byte source,
//! [`TetFile::open_source`]): the head, the chunk index and the footer at open, each chunk when
//! the conversion reads it. A `.tet` input's footer, local or an object, is carried over from the
//! same open file ([`open_input`]), never by opening the input again.

use std::path::Path;
use std::sync::Arc;

use tet_source::byte_source::ByteSource;

use tet_source::{
    extension_confidence, Confidence, ElementType, Importer, OpenOptions, Role, Skipped, Source,
    SourceLayout, Variable,
};

use crate::format::open_checks::{check_index_covers, check_integrity};
use crate::format::{Codec, DType, Footer, TetError, TetFile, MAGIC};

/// The format id of `.tet` inputs (history `source`).
pub const ID: &str = "tet";

/// The `.tet` importer (registered last: its magic is unambiguous).
pub struct TetImporter;

impl Importer for TetImporter {
    fn id(&self) -> &'static str {
        ID
    }

    fn name(&self) -> &'static str {
        ".tet v1"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["tet"]
    }

    fn identify(&self, path: &Path, head: &[u8]) -> Confidence {
        if head.starts_with(&MAGIC) {
            Confidence::Magic
        } else {
            extension_confidence(path, self.extensions())
        }
    }

    fn open(&self, path: &Path, _options: &OpenOptions) -> tet_source::Result<Box<dyn Source>> {
        Ok(Box::new(open_path(path)?))
    }

    fn opens_bytes(&self) -> bool {
        true
    }

    fn open_bytes(
        &self,
        _name: &Path,
        bytes: Arc<dyn ByteSource>,
        _options: &OpenOptions,
    ) -> tet_source::Result<Box<dyn Source>> {
        Ok(Box::new(open_source(bytes)?))
    }
}

/// Opens the local `.tet` input at `path` (memory-mapped), kept as a [`TetSource`] so that its
/// footer can be carried over ([`TetSource::carried_footer`]).
pub fn open_path(path: &Path) -> tet_source::Result<TetSource> {
    let file = TetFile::open(path).map_err(|e| tet_source::Part::Header.malformed_from(e))?;
    TetSource::new(file)
}

/// Opens the `.tet` input whose bytes `bytes` gives (an object read by ranges): what
/// [`Importer::open_bytes`] offers, kept as a [`TetSource`] so that its footer can be carried
/// over ([`TetSource::carried_footer`]). A read the source fails stays an I/O error.
pub fn open_source(bytes: Arc<dyn ByteSource>) -> tet_source::Result<TetSource> {
    let file =
        TetFile::open_source(bytes).map_err(|e| source_error(tet_source::Part::Header, e))?;
    TetSource::new(file)
}

/// A `.tet` read error as a source error: an I/O error (a read the source failed) as it is,
/// anything else malformed at `part`, the reader's error kept as the cause.
fn source_error(part: tet_source::Part, e: TetError) -> tet_source::SourceError {
    match e {
        TetError::Io(io) => tet_source::SourceError::Io(io),
        e => part.malformed_from(e),
    }
}

/// The source element type of a `.tet` element type (every tag has one).
pub fn element_type(d: DType) -> ElementType {
    match d {
        DType::F32 => ElementType::F32,
        DType::F64 => ElementType::F64,
        DType::I32 => ElementType::I32,
        DType::I64 => ElementType::I64,
        DType::U8 => ElementType::U8,
        DType::U16 => ElementType::U16,
        DType::I16 => ElementType::I16,
        DType::U32 => ElementType::U32,
        DType::F16 => ElementType::F16,
        DType::U64 => ElementType::U64,
    }
}

/// An open `.tet` file offered as a source.
pub struct TetSource {
    file: TetFile,
    variables: Vec<Variable>,
    global_attrs: Vec<(String, tet_source::AttrValue)>,
}

impl TetSource {
    /// The source over `file`, once the reader's open checks hold
    /// ([`crate::format::open_checks`]): a directory or index the footer digest disowns (a
    /// dataset renamed or reshaped by a flipped byte) is refused, not converted as such.
    fn new(file: TetFile) -> tet_source::Result<TetSource> {
        check_integrity(&file).map_err(|e| source_error(tet_source::Part::Metadata, e))?;
        check_index_covers(&file).map_err(|e| source_error(tet_source::Part::Index, e))?;
        let footer = file.footer().ok().flatten();
        // One pass over the index: which datasets have zstd chunks (drives `--codec auto`).
        let mut compressed = vec![false; file.datasets.len()];
        for e in &file.entries {
            if e.codec().is_some_and(Codec::is_zstd_frame) {
                if let Some(c) = usize::try_from(e.dataset_id)
                    .ok()
                    .and_then(|i| compressed.get_mut(i))
                {
                    *c = true;
                }
            }
        }
        let variables = file
            .datasets
            .iter()
            .enumerate()
            .map(|(id, ds)| {
                let mut v =
                    Variable::new(ds.name.clone(), element_type(ds.dtype), ds.shape.clone());
                let compressed = compressed[id];
                v.layout = SourceLayout {
                    chunk_shape: Some(ds.chunk_shape.clone()),
                    compressed,
                    filters: if compressed {
                        vec!["zstd".into()]
                    } else {
                        Vec::new()
                    },
                };
                if let Some(meta) = footer.and_then(|f| f.datasets.get(&ds.name)) {
                    v.dims = meta.dim_names.clone();
                    v.attrs = meta.attrs.clone();
                    if meta.ext.role == Some(crate::format::footer::RecordedRole::Coordinate) {
                        v.role = Role::Coordinate;
                    }
                }
                v
            })
            .collect();
        let global_attrs = footer.map(|f| f.global_attrs.clone()).unwrap_or_default();
        Ok(TetSource {
            file,
            variables,
            global_attrs,
        })
    }
}

impl Source for TetSource {
    fn variables(&self) -> &[Variable] {
        &self.variables
    }

    fn global_attrs(&self) -> &[(String, tet_source::AttrValue)] {
        &self.global_attrs
    }

    fn read_region(
        &self,
        var: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> tet_source::Result<()> {
        self.file
            .read_region(var, start, count, out)
            .map_err(|e| source_error(tet_source::Part::Chunk, e))
    }

    fn parallel_reads(&self) -> bool {
        true
    }
}

/// Why a `.tet` input's footer cannot be carried over.
#[derive(Debug, thiserror::Error)]
pub enum CarryError {
    /// Its footer is unreadable (without `--skip-unsupported`).
    #[error("{source}: its history and metadata cannot be carried over (--skip-unsupported converts the data without them)")]
    Footer {
        #[source]
        source: crate::format::TetError,
    },
}

/// An input opened with `importer` for a conversion — from its path `name`, or from `bytes` (an
/// object read by ranges) when given — with, for a `.tet` input, the footer the output carries
/// over, read from the same open file (the input is never opened twice).
pub fn open_input(
    importer: &dyn Importer,
    name: &Path,
    bytes: Option<Arc<dyn ByteSource>>,
    options: &OpenOptions,
) -> Result<(Box<dyn Source>, Option<Footer>), OpenInputError> {
    if importer.id() != ID {
        let source = match bytes {
            Some(b) => importer.open_bytes(name, b, options)?,
            None => importer.open(name, options)?,
        };
        return Ok((source, None));
    }
    let tet = match bytes {
        Some(b) => open_source(b)?,
        None => open_path(name)?,
    };
    let footer = tet.carried_footer(options)?;
    Ok((Box::new(tet), Some(footer)))
}

/// Why [`open_input`] failed: the input cannot be opened, or a `.tet` input's footer cannot be
/// carried over.
#[derive(Debug, thiserror::Error)]
pub enum OpenInputError {
    /// The importer's error.
    #[error(transparent)]
    Open(#[from] tet_source::SourceError),
    /// The footer of a `.tet` input.
    #[error(transparent)]
    Carry(#[from] CarryError),
}

impl TetSource {
    /// The footer of this open `.tet` input (read by ranges or not, read when it was opened)
    /// that the output carries over (history, metadata). A file without a footer carries
    /// nothing. An unreadable footer is refused, since its history could not be kept; with
    /// `skip_unsupported` the data is converted without it and the footer is listed as skipped.
    pub fn carried_footer(&self, options: &OpenOptions) -> Result<Footer, CarryError> {
        let file = &self.file;
        match file.footer() {
            Ok(f) => Ok(f.cloned().unwrap_or_default()),
            Err(e) if options.skip_unsupported => Ok(Footer {
                skipped: vec![Skipped {
                    name: "footer".into(),
                    reason: format!(
                        "the input's footer is unreadable, its history and metadata are lost: {e}"
                    ),
                }],
                ..Footer::default()
            }),
            Err(source) => Err(CarryError::Footer { source }),
        }
    }
}
