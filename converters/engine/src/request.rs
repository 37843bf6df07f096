//! One conversion as one value: a [`Request`] — its inputs (each one [`Input`] kind: a local
//! file, a store folder, a `.tet`, an object URL, an object prefix; several for a combine), its
//! [`Output`] (a path or an object URL) and its [`Settings`] — and [`run`], the one function
//! that carries it out, given a [`Context`]: what the run needs that is no part of its result
//! (progress, cancellation, storage credentials and options, the spool folder).
//!
//! Every front end builds a request: the command line and a manifest's jobs through the batch
//! runner's worker protocol (`batch::job::WireJob::request`), Python's `tet.convert`. What
//! stays below it are the steps: an importer's source converted by the pipeline
//! ([`crate::pipeline::convert_source`]), several combined along a dimension
//! ([`crate::concat::combine`]); objects are read and written by `object` (cargo feature
//! `object-store`): read by ranges, in place (a Zarr prefix) or from a spooled copy, an object
//! output staged locally, its footer digest checked and uploaded whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::concat::OpenedInput;
use crate::control::{Cancel, Progress};
use crate::pipeline::{
    check_paths, open_selected, ConvertError, ConvertOptions, ConvertReport, Opened, Parent,
};
use crate::settings::Settings;
use crate::storage;

#[cfg(feature = "object-store")]
mod object;

/// One input of a conversion, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A local file in a format an importer reads (NetCDF, HDF5, NPY, …).
    File(PathBuf),
    /// A local store folder (a Zarr store).
    Store(PathBuf),
    /// A local `.tet` file: its history and metadata are carried over.
    Tet(PathBuf),
    /// An object URL (`s3://bucket/key.nc`, `gs://`, `az://`, `https://`).
    Object(String),
    /// The objects under a prefix URL taken as one store (`s3://bucket/x.zarr/`).
    Prefix(String),
}

impl Input {
    /// The kind of input `p` names: a URL (a prefix when it ends in `/`), a folder, a `.tet`
    /// file, else a file.
    pub fn new(p: impl AsRef<Path>) -> Input {
        let p = p.as_ref();
        if let Some(url) = p.to_str().filter(|_| storage::is_url(p)) {
            return match url.ends_with('/') {
                true => Input::Prefix(url.to_string()),
                false => Input::Object(url.to_string()),
            };
        }
        if p.is_dir() {
            return Input::Store(p.to_path_buf());
        }
        let tet = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("tet"));
        match tet {
            true => Input::Tet(p.to_path_buf()),
            false => Input::File(p.to_path_buf()),
        }
    }

    /// The path or URL, as the history row names the input.
    pub fn name(&self) -> &Path {
        match self {
            Input::File(p) | Input::Store(p) | Input::Tet(p) => p,
            Input::Object(u) | Input::Prefix(u) => Path::new(u),
        }
    }

    /// The object URL, for an object or a prefix.
    pub fn url(&self) -> Option<&str> {
        match self {
            Input::Object(u) | Input::Prefix(u) => Some(u),
            Input::File(_) | Input::Store(_) | Input::Tet(_) => None,
        }
    }
}

/// Where a conversion writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A local `.tet` file.
    File(PathBuf),
    /// An object URL: written to a staged local file, checked, then uploaded whole.
    Object(String),
}

impl Output {
    /// The kind of output `p` names: an object URL or a local path.
    pub fn new(p: impl AsRef<Path>) -> Output {
        let p = p.as_ref();
        match p.to_str().filter(|_| storage::is_url(p)) {
            Some(url) => Output::Object(url.to_string()),
            None => Output::File(p.to_path_buf()),
        }
    }

    /// The path or URL.
    pub fn name(&self) -> &Path {
        match self {
            Output::File(p) => p,
            Output::Object(u) => Path::new(u),
        }
    }
}

/// A conversion: inputs, output and settings. Its result depends on nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// One input, or the inputs combined along `settings.concat` (two or more).
    pub inputs: Vec<Input>,
    pub output: Output,
    pub settings: Settings,
}

impl Request {
    /// The request converting `inputs` (paths or URLs, each of its [`Input`] kind) into
    /// `output` under `settings`.
    pub fn new<I: AsRef<Path>>(
        inputs: impl IntoIterator<Item = I>,
        output: impl AsRef<Path>,
        settings: Settings,
    ) -> Request {
        Request {
            inputs: inputs.into_iter().map(Input::new).collect(),
            output: Output::new(output),
            settings,
        }
    }

    /// The inputs and the settings agree: one input without `concat`, two or more with it.
    fn check(&self) -> Result<(), ConvertError> {
        let refused = |m: &str| Err(ConvertError::Refused(m.into()));
        self.settings
            .check()
            .map_err(|e| ConvertError::Refused(e.to_string()))?;
        match (self.settings.concat.is_some(), self.inputs.len()) {
            (_, 0) => refused("no input"),
            (true, 1) => refused("--concat needs at least two inputs"),
            (false, n) if n > 1 => {
                refused("several inputs are combined along a dimension: give --concat DIM")
            }
            _ => Ok(()),
        }
    }
}

/// What an uploaded output carries beside it as object metadata, from the report and the
/// staged local file (the batch runner's up-to-date facts).
pub type UploadMetadataOf =
    std::sync::Arc<dyn Fn(&ConvertReport, &Path) -> BTreeMap<String, String> + Send + Sync>;

/// What a run needs that is no part of its result.
#[derive(Clone, Default)]
pub struct Context {
    /// Told of the chunk work as it goes (the CLI draws a progress bar from it).
    pub progress: Option<Progress>,
    /// Asked between chunks and transfers whether to stop.
    pub cancel: Cancel,
    /// Credentials and options of the object stores (`--storage-option KEY=VALUE`).
    pub storage: storage::Options,
    /// Where object inputs are downloaded and object outputs staged (`$TMPDIR` when `None`).
    pub spool_dir: Option<PathBuf>,
    /// The object inputs' stamp as the caller's up-to-date check saw it (recorded as
    /// `input_object`); `None`: one object's own, taken as it is opened (a combination of
    /// inputs then records none).
    pub input_stamp: Option<String>,
    /// Object metadata for an object output (none when `None`).
    pub upload_metadata: Option<UploadMetadataOf>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The storage options may hold secrets: only their keys are shown.
        let keys: Vec<&str> = self.storage.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Context")
            .field("progress", &self.progress)
            .field("cancel", &self.cancel)
            .field("storage_keys", &keys)
            .field("spool_dir", &self.spool_dir)
            .field("input_stamp", &self.input_stamp)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// What the pipeline reads of the context, with the request's settings.
    fn options(&self, settings: &Settings) -> ConvertOptions {
        ConvertOptions {
            settings: settings.clone(),
            progress: self.progress.clone(),
            cancel: self.cancel.clone(),
        }
    }
}

/// Runs the conversion `req` (see the module docs): nothing is left at the output unless it
/// is whole.
pub fn run(req: &Request, cx: &Context) -> Result<ConvertReport, ConvertError> {
    let started = Instant::now();
    req.check()?;
    let opts = cx.options(&req.settings);
    let objects = req.inputs.iter().any(|i| i.url().is_some());
    match &req.output {
        Output::File(out) if !objects => convert_local(&req.inputs, out, &opts, started),
        _ => run_objects(req, cx, &opts, started),
    }
}

#[cfg(feature = "object-store")]
fn run_objects(
    req: &Request,
    cx: &Context,
    opts: &ConvertOptions,
    started: Instant,
) -> Result<ConvertReport, ConvertError> {
    object::run(req, cx, opts, started)
}

#[cfg(not(feature = "object-store"))]
fn run_objects(
    req: &Request,
    _: &Context,
    _: &ConvertOptions,
    _: Instant,
) -> Result<ConvertReport, ConvertError> {
    let url = req
        .inputs
        .iter()
        .find_map(Input::url)
        .map_or_else(|| req.output.name().display().to_string(), str::to_string);
    Err(storage::StorageError::NotBuilt { url }.into())
}

/// Converts local inputs into the local file `output`.
fn convert_local(
    inputs: &[Input],
    output: &Path,
    opts: &ConvertOptions,
    started: Instant,
) -> Result<ConvertReport, ConvertError> {
    if let [one] = inputs {
        let input = one.name();
        check_paths(input, output, &opts.settings)?;
        let importer = crate::registry::identify(input)?;
        log::debug!("{}: identified as {}", input.display(), importer.name());
        let (source, carried) = open_selected(importer, input, None, opts)?;
        let opened = Opened {
            source: source.as_ref(),
            format: importer.id(),
            parents: vec![Parent::file(input)],
            input_params: BTreeMap::new(),
            carried,
            started,
        };
        return crate::pipeline::convert_source(opened, output, opts);
    }
    let mut opened = Vec::with_capacity(inputs.len());
    for i in inputs {
        opened.push(open_local(i.name(), opts)?);
    }
    crate::concat::combine(opened, BTreeMap::new(), output, opts, started)
}

/// A local file (or a spooled copy, then renamed) opened as one input of a combination.
fn open_local(path: &Path, opts: &ConvertOptions) -> Result<OpenedInput, ConvertError> {
    let importer = crate::registry::identify(path)?;
    let (source, footer) =
        crate::tet_input::open_input(importer, path, None, &opts.settings.open())
            .map_err(|e| ConvertError::Refused(format!("{}: {e}", path.display())))?;
    Ok(OpenedInput {
        parent: Parent::file(path),
        importer,
        source,
        footer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_and_outputs_are_typed_by_what_they_name() {
        let dir = std::env::temp_dir();
        assert_eq!(Input::new(&dir), Input::Store(dir.clone()));
        assert_eq!(Input::new("a.nc"), Input::File("a.nc".into()));
        assert_eq!(Input::new("a.TET"), Input::Tet("a.TET".into()));
        assert_eq!(
            Input::new("s3://b/k.nc"),
            Input::Object("s3://b/k.nc".into())
        );
        assert_eq!(
            Input::new("s3://b/x.zarr/"),
            Input::Prefix("s3://b/x.zarr/".into())
        );
        assert_eq!(Input::new("s3://b/k.nc").name(), Path::new("s3://b/k.nc"));
        assert_eq!(
            Output::new("gs://b/o.tet"),
            Output::Object("gs://b/o.tet".into())
        );
        assert_eq!(Output::new("o.tet"), Output::File("o.tet".into()));
    }

    #[test]
    fn inputs_must_agree_with_concat() {
        let one = Request::new(["a.nc"], "o.tet", Settings::default());
        assert!(one.check().is_ok());
        let two = Request::new(["a.nc", "b.nc"], "o.tet", Settings::default());
        let e = run(&two, &Context::default()).unwrap_err();
        assert!(e.to_string().contains("give --concat DIM"), "{e}");
        let lone = Request::new(
            ["a.nc"],
            "o.tet",
            Settings {
                concat: Some("time".into()),
                ..Settings::default()
            },
        );
        let e = run(&lone, &Context::default()).unwrap_err();
        assert_eq!(e.to_string(), "--concat needs at least two inputs");
    }
}
