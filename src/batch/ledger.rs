//! The `--report` ledger: JSON lines appended under an advisory lock, so that runs which overlap
//! (a scheduler's retry, lists split with `xargs`, array tasks sharing one file) interleave whole
//! rows and never truncate each other.
//!
//! Each run writes a `start` row (run id, time, host, shard, options), one `input` row per input
//! it took, and an `end` row (counts, exit code, the signal that stopped it): a run whose `end`
//! row is missing was cut short. Every row carries the run id. Schema: README "Batch runs".
//!
//! Paths are JSON strings when they are valid UTF-8. Otherwise the string holds a lossy rendering
//! (U+FFFD for each invalid sequence) and a sibling field `<name>_hex` holds the path's exact
//! bytes in lower-case hex, so no path is ever recorded ambiguously.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What happened to one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Converted.
    Ok,
    /// Already up to date (nothing written).
    Skipped,
    /// Not converted: `reason` says why (refused, crashed, timed out…).
    Failed,
    /// Stopped by a signal to the run (SIGTERM, SIGINT) before it finished.
    Interrupted,
}

/// A path as recorded: the string, plus its exact bytes when they are not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordedPath {
    pub text: String,
    pub hex: Option<String>,
}

impl RecordedPath {
    pub fn of(p: &Path) -> RecordedPath {
        match p.to_str() {
            Some(s) => RecordedPath {
                text: s.to_owned(),
                hex: None,
            },
            None => RecordedPath {
                text: p.to_string_lossy().into_owned(),
                hex: Some(to_hex(p.as_os_str().as_bytes())),
            },
        }
    }

    /// The exact path back.
    pub fn path(&self) -> PathBuf {
        match self.hex.as_deref().and_then(from_hex) {
            Some(b) => PathBuf::from(std::ffi::OsString::from_vec(b)),
            None => PathBuf::from(&self.text),
        }
    }
}

/// Lower-case hex of bytes.
pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Bytes of lower-case or upper-case hex; `None` when it is not hex.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// One input's row.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InputRow {
    pub run: String,
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_hex: Option<String>,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_hex: Option<String>,
    /// Every input of a combined job (`--concat`), in the given order (`input` is the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    pub status: Option<Status>,
    /// Why it was skipped or failed (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The importer that read it (`nc`, `h5`, `npy`…), when it was identified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_in: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_out: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasets: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_items: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// For an object input or output: how many requests to the store failed transiently
    /// (5xx, 429, a lost connection) and were retried, over the whole job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u64>,
    pub elapsed_s: f64,
}

impl InputRow {
    /// A row for `input` → `output` with nothing known yet.
    pub fn new(run: &str, input: &Path, output: &Path) -> InputRow {
        let (i, o) = (RecordedPath::of(input), RecordedPath::of(output));
        InputRow {
            run: run.to_owned(),
            input: i.text,
            input_hex: i.hex,
            output: o.text,
            output_hex: o.hex,
            ..InputRow::default()
        }
    }

    /// The exact input path.
    pub fn input_path(&self) -> PathBuf {
        RecordedPath {
            text: self.input.clone(),
            hex: self.input_hex.clone(),
        }
        .path()
    }

    pub fn status(&self) -> Status {
        self.status.unwrap_or(Status::Failed)
    }
}

/// The first row of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StartRow {
    pub run: String,
    /// UTC, RFC 3339.
    pub at: String,
    pub host: String,
    pub pid: u32,
    pub tool: String,
    pub version: String,
    /// `K/N`, when sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Inputs this run takes (after sharding).
    pub inputs: usize,
    /// Inputs listed before sharding.
    pub listed: usize,
    /// Every option of the run, byte-affecting or not.
    pub options: BTreeMap<String, String>,
}

/// Counts of a run by status.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counts {
    pub ok: usize,
    pub skipped: usize,
    pub failed: usize,
    pub interrupted: usize,
    /// Inputs never started (stopped by a failure without --keep-going, or by a signal).
    pub not_started: usize,
}

impl Counts {
    pub fn add(&mut self, s: Status) {
        match s {
            Status::Ok => self.ok += 1,
            Status::Skipped => self.skipped += 1,
            Status::Failed => self.failed += 1,
            Status::Interrupted => self.interrupted += 1,
        }
    }
}

/// The last row of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EndRow {
    pub run: String,
    pub at: String,
    pub elapsed_s: f64,
    pub counts: Counts,
    pub exit_code: u8,
    /// The signal that stopped the run (`SIGTERM`, `SIGINT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

/// A ledger line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Row {
    Start(StartRow),
    Input(InputRow),
    End(EndRow),
}

/// An open ledger file.
pub struct Ledger {
    file: File,
    path: PathBuf,
}

impl Ledger {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Ledger> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)?;
        Ok(Ledger {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one row: one `write` of the whole line, under an exclusive advisory lock.
    pub fn append(&mut self, row: &Row) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(row).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.lock()?;
        let r = self.file.write_all(&line).and_then(|_| self.file.flush());
        let u = self.file.unlock();
        r.and(u)
    }
}

/// The rows of a ledger; lines that are not rows (cut by a crash of the machine) are returned as
/// errors in place.
pub fn read(path: &Path) -> std::io::Result<Vec<Result<Row, serde_json::Error>>> {
    let text = std::fs::read(path)?;
    Ok(text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(serde_json::from_slice::<Row>)
        .collect())
}

/// Seconds since the epoch as RFC 3339 UTC (`2026-11-23T18:46:05Z`).
pub fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Now, as [`rfc3339`].
pub fn now() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(s)
}

/// This machine's host name.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call;
    // gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A run id unique across hosts and time: host, pid and the start time in ns, hashed.
pub fn run_id() -> String {
    use sha2::{Digest, Sha256};
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let d = Sha256::digest(format!("{}:{}:{ns}", host_name(), std::process::id()));
    to_hex(&d[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn non_utf8_paths_are_recorded_exactly() {
        let p = PathBuf::from(std::ffi::OsStr::from_bytes(b"in/\xffbad\xc3.nc"));
        let r = InputRow::new("r", &p, Path::new("out/x.tet"));
        assert_eq!(r.input_hex.as_deref(), Some("696e2fff626164c32e6e63"));
        assert!(r.output_hex.is_none());
        let line = serde_json::to_string(&Row::Input(r)).unwrap();
        let Row::Input(back) = serde_json::from_str(&line).unwrap() else {
            panic!("not an input row")
        };
        assert_eq!(back.input_path(), p);
        assert_eq!(from_hex("0g"), None);
    }

    #[test]
    fn rows_append_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        for _ in 0..2 {
            let mut l = Ledger::open(&p).unwrap();
            l.append(&Row::Input(InputRow::new(
                "a",
                Path::new("i"),
                Path::new("o"),
            )))
            .unwrap();
        }
        let rows = read(&p).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| matches!(r, Ok(Row::Input(_)))));
        // A line cut by a crash is an error in its place, the parser's own.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .and_then(|mut f| f.write_all(b"{\"row\":\"inp"))
            .unwrap();
        let rows = read(&p).unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows[2].as_ref().is_err_and(|e| e.is_eof()));
    }
}
