//! One job of a run as it travels to a worker process ([`WireJob`]): its inputs, output and
//! [`Settings`] (in their own serde form, paths as exact bytes), how it treats an existing
//! output ([`Recheck`]) and its storage options; [`WireJob::request`] is the conversion it
//! asks for, [`WireJob::context`] what it runs with in the process that runs it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ledger::{from_hex, to_hex};
use tet::control::Cancel;
use tet::request::{Context, Request};
use tet::settings::Settings;
use tet::storage;

/// A path as exact bytes, in hex (the worker protocol never loses a non-UTF-8 path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WirePath(String);

impl WirePath {
    pub fn of(p: &Path) -> WirePath {
        use std::os::unix::ffi::OsStrExt;
        WirePath(to_hex(p.as_os_str().as_bytes()))
    }

    pub fn path(&self) -> Result<PathBuf, WireError> {
        use std::os::unix::ffi::OsStringExt;
        from_hex(&self.0)
            .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b)))
            .ok_or(WireError::NotHex)
    }
}

/// A job that does not decode into a conversion (a supervisor and worker of other versions).
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("a path in the job is not hex")]
    NotHex,
    #[error(transparent)]
    Settings(#[from] tet::settings::SettingsError),
}

/// How a job treats an existing output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recheck {
    /// Rebuild even when up to date.
    pub force: bool,
    /// Hash the input even when its size, times and inode match the stamp.
    pub rehash: bool,
    /// Deep-verify an up-to-date output before trusting it.
    pub verify_existing: bool,
    /// Refuse to replace an output made from another input path (batch runs).
    pub guard_source: bool,
}

impl WireJob {
    /// The conversion this job asks for: its inputs (every input of a combined job, else the
    /// one), its output and its settings (checked).
    pub fn request(&self) -> Result<Request, WireError> {
        self.settings.check()?;
        let inputs = match self.inputs.is_empty() {
            true => vec![self.input.path()?],
            false => self
                .inputs
                .iter()
                .map(WirePath::path)
                .collect::<Result<_, _>>()?,
        };
        Ok(Request::new(
            inputs,
            self.output.path()?,
            self.settings.clone(),
        ))
    }

    /// What the conversion runs with in this process: a progress bar, the signal handlers,
    /// the storage options and the spool folder.
    pub fn context(&self) -> Context {
        Context {
            progress: if self.progress {
                super::progress::terminal_bar()
            } else {
                None
            },
            cancel: Cancel::from_fn(super::signals::pending),
            storage: self.storage.options.clone(),
            spool_dir: self.storage.spool_dir.as_ref().and_then(|p| p.path().ok()),
            input_stamp: None,
            upload_metadata: None,
        }
    }
}

/// One job, as sent to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireJob {
    pub run: String,
    pub input: WirePath,
    pub output: WirePath,
    /// The conversion's settings, in their serde form (a manifest's keys).
    pub settings: Settings,
    /// Every input of a combined job (`settings.concat`), in the given order; empty for a job
    /// of one input.
    #[serde(default)]
    pub inputs: Vec<WirePath>,
    /// Draw a progress bar where the conversion runs (when its stderr is a terminal).
    pub progress: bool,
    pub recheck: Recheck,
    /// Create the output's folder when missing (batch outputs mirroring a tree).
    pub make_dirs: bool,
    /// Send the full conversion report back (single-file `--json`).
    pub want_report: bool,
    /// `--storage-option` pairs and `--spool-dir`, for object URLs.
    #[serde(default)]
    pub storage: WireStorage,
}

/// The storage settings of a job: `--storage-option` pairs and `--spool-dir`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireStorage {
    pub options: storage::Options,
    pub spool_dir: Option<WirePath>,
}

impl WireStorage {
    /// Where downloads and staged outputs go: `--spool-dir`, else `$TMPDIR`.
    pub fn spool_root(&self) -> PathBuf {
        self.spool_dir
            .as_ref()
            .and_then(|p| p.path().ok())
            .unwrap_or_else(std::env::temp_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worker protocol carries the settings as their own serde form: every settings field
    /// and nothing else, and a job whose settings hold an unknown key is refused.
    #[test]
    fn the_wire_carries_exactly_the_settings_fields() {
        let settings: Settings = serde_json::from_value(serde_json::json!({
            "codec": "zstd:5", "chunk_bytes": 4096, "chunk": ["time=1"], "jobs": 2,
            "memory_budget": 1048576, "skip_unsupported": true, "unpack": true,
            "follow_external": true, "write_through_symlink": true, "force_extension": true,
            "variables": ["t"], "exclude": ["u"], "no_coords": true, "isel": ["time=0:1"],
            "sel": ["lat=0:1"], "concat": "time", "concat_take_first": true, "checksums": false,
        }))
        .unwrap();
        let job = WireJob {
            run: "r".into(),
            input: WirePath::of(Path::new("a.nc")),
            output: WirePath::of(Path::new("a.tet")),
            settings: settings.clone(),
            inputs: vec![
                WirePath::of(Path::new("a.nc")),
                WirePath::of(Path::new("b.nc")),
            ],
            progress: false,
            recheck: Recheck::default(),
            make_dirs: false,
            want_report: false,
            storage: Default::default(),
        };
        let wire = serde_json::to_value(&job).unwrap();
        let mut keys: Vec<&str> = wire["settings"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut fields = tet::settings::field_names().to_vec();
        keys.sort_unstable();
        fields.sort_unstable();
        assert_eq!(keys, fields);
        let back: WireJob = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(back.settings, settings);
        let req = back.request().unwrap();
        let names: Vec<&Path> = req.inputs.iter().map(|i| i.name()).collect();
        assert_eq!(names, [Path::new("a.nc"), Path::new("b.nc")]);
        assert_eq!(req.settings, settings);
        let mut bad = wire;
        bad["settings"]["threads"] = 2.into();
        let e = serde_json::from_value::<WireJob>(bad).unwrap_err();
        assert!(e.to_string().contains("unknown field `threads`"), "{e}");
    }
}
