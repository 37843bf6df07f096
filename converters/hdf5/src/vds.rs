//! Virtual datasets (VDS, `H5D_VIRTUAL` layout): how detector data (Eiger, NeXus) is delivered.
//!
//! A virtual dataset holds no data of its own: its creation property list maps selections of
//! it to selections of *source datasets*, each named by a file name (`"."`: the VDS's own file)
//! and a dataset path. libhdf5 reads it (`H5Dread`) by opening the sources as needed, and fills
//! what no mapping covers with the dataset's fill value — real data of the VDS, read as such.
//! What libhdf5 would also fill silently is the region of a source it cannot find or open, and
//! that is what this module prevents: a VDS is converted only when every source is checked
//! first, and libhdf5 is made to find exactly the checked files.
//!
//! # Where libhdf5 looks for a source file (`H5F_prefix_open_file`, libhdf5 1.10–2.0)
//!
//! In order, the first file it can open: an absolute name as it is; then, with an absolute
//! name's last component or the relative name, each directory of `HDF5_VDS_PREFIX`, the
//! dataset access property list's virtual prefix (`H5Pset_virtual_prefix`), the directory of
//! the VDS file *as it was opened* (a symbolic link's directory), the working directory, and the
//! directory of the file's resolved name. This importer opens every VDS with a dataset access
//! property list whose prefix is the canonical directory of the VDS's own file, so a source is
//! looked for there first, and checks beforehand that it exists there (an absolute name: as it
//! is, else its last component there, as libhdf5 does), that it resolves canonically inside the
//! input's directory, and that it opens as HDF5 — then libhdf5 never reaches the lookups
//! that depend on the working directory or on how the file was named. With `HDF5_VDS_PREFIX`
//! set, libhdf5 looks there first: virtual datasets with source files are then refused.
//!
//! # Policy (as external links, [`OpenOptions::follow_external`](tet_source::OpenOptions))
//!
//! A VDS whose sources are all in its own file (`"."`) is always converted. One with source
//! files is converted with `follow_external` when every source file resolves as above, inside
//! the input's directory, and opens; every source dataset exists there, is no virtual dataset
//! itself, and holds the mapped selection (its extent as the mapping recorded it, or larger).
//! Otherwise the dataset is unsupported (an error naming it and the reason, or with
//! `skip_unsupported` a skipped item): a source file not found or outside the directory,
//! `--follow-external` not given, a missing or too small source dataset, a nested VDS, an
//! unlimited mapping (its extent follows the sources as they grow), printf-style source names
//! (`%b`: sources found by trying numbers).
//!
//! The source files stay open for the life of the source (libhdf5 shares those handles when it
//! opens the sources itself). The VDS is opened with the `H5D_VDS_FIRST_MISSING` view (only
//! unlimited mappings, refused here, depend on the view). A converted VDS records its sources
//! (`<file as stored>:<dataset>`, once each, in mapping order) in the private fact
//! `vds_sources`, with a note; another note counts the elements no mapping covers.

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};

use hdf5_sys::h5::hsize_t;
use hdf5_sys::h5d::{H5D_layout_t, H5D_vds_view_t, H5Dget_access_plist, H5Dopen2};
use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5p::{
    H5Pclose, H5Pcreate, H5Pget_layout, H5Pget_virtual_count, H5Pget_virtual_dsetname,
    H5Pget_virtual_filename, H5Pget_virtual_prefix, H5Pget_virtual_srcspace, H5Pget_virtual_view,
    H5Pget_virtual_vspace, H5Pset_virtual_prefix, H5Pset_virtual_view, H5P_CLS_DATASET_ACCESS,
};
use hdf5_sys::h5s::{
    H5S_sel_type, H5S_seloper_t, H5Sclose, H5Scopy, H5Sget_regular_hyperslab, H5Sget_select_bounds,
    H5Sget_select_npoints, H5Sget_select_type, H5Sget_simple_extent_dims,
    H5Sget_simple_extent_ndims, H5Sis_regular_hyperslab, H5Smodify_select, H5S_UNLIMITED,
};
use tet_source::{AttrValue, Fact, Feature, Lib, PathIssue, Request, Result, SourceError};

use crate::walk::{open_file, Found, Walker};
use crate::{H5Source, OpenFile};

/// Most source files a message lists by name.
const LISTED: usize = 4;

/// Whether a dataset's layout is virtual.
pub(crate) fn is_virtual(ds: &hdf5::Dataset) -> Result<bool> {
    let dcpl = ds
        .dcpl()
        .map_err(|e| SourceError::library(Lib::Hdf5, "creation properties", e))?;
    // SAFETY: a by-value query of an open property list under the library lock.
    let layout = hdf5::sync::sync(|| unsafe { H5Pget_layout(dcpl.id()) });
    Ok(layout == H5D_layout_t::H5D_VIRTUAL)
}

/// A dataspace id this code owns, closed on drop.
struct Space(hid_t);

impl Drop for Space {
    fn drop(&mut self) {
        // SAFETY: the id was returned by libhdf5 as a new dataspace this code owns; closed once,
        // under the library lock.
        hdf5::sync::sync(|| unsafe { H5Sclose(self.0) });
    }
}

impl Space {
    fn new(id: hid_t) -> Option<Space> {
        (id >= 0).then_some(Space(id))
    }

    fn sel_type(&self) -> H5S_sel_type {
        // SAFETY: a by-value query of an open dataspace under the library lock.
        hdf5::sync::sync(|| unsafe { H5Sget_select_type(self.0) })
    }

    fn npoints(&self) -> Option<u64> {
        // SAFETY: a by-value query of an open dataspace under the library lock.
        let n = hdf5::sync::sync(|| unsafe { H5Sget_select_npoints(self.0) });
        u64::try_from(n).ok()
    }

    /// The extent (current dimensions).
    fn dims(&self) -> Option<Vec<u64>> {
        hdf5::sync::sync(|| {
            // SAFETY: a by-value query of an open dataspace under the library lock.
            let rank = usize::try_from(unsafe { H5Sget_simple_extent_ndims(self.0) }).ok()?;
            let mut dims = vec![0 as hsize_t; rank];
            // SAFETY: libhdf5 writes `rank` values (the dataspace's rank, just read) into
            // `dims`, which holds that many; the maximum dimensions are not asked for (null).
            let rc = unsafe {
                H5Sget_simple_extent_dims(self.0, dims.as_mut_ptr(), std::ptr::null_mut())
            };
            (rc >= 0).then_some(dims)
        })
    }

    /// Whether the selection is a regular hyperslab with an unlimited count or block.
    fn unlimited(&self) -> bool {
        if self.sel_type() != H5S_sel_type::H5S_SEL_HYPERSLABS {
            return false;
        }
        let Some(rank) = self.dims().map(|d| d.len()) else {
            return false;
        };
        hdf5::sync::sync(|| {
            // SAFETY: a by-value query of an open dataspace under the library lock.
            if unsafe { H5Sis_regular_hyperslab(self.0) } <= 0 {
                return false;
            }
            let mut v = vec![0 as hsize_t; 4 * rank];
            let (start, rest) = v.split_at_mut(rank);
            let (stride, rest) = rest.split_at_mut(rank);
            let (count, block) = rest.split_at_mut(rank);
            // SAFETY: libhdf5 writes `rank` values (the dataspace's rank) into each of the four
            // disjoint slices, each that long; under the library lock.
            let rc = unsafe {
                H5Sget_regular_hyperslab(
                    self.0,
                    start.as_mut_ptr(),
                    stride.as_mut_ptr(),
                    count.as_mut_ptr(),
                    block.as_mut_ptr(),
                )
            };
            rc >= 0
                && count
                    .iter()
                    .chain(block.iter())
                    .any(|&c| c == H5S_UNLIMITED)
        })
    }

    /// The selection's bounding box, inclusive ends (`None`: nothing selected, or an error).
    fn bounds(&self) -> Option<(Vec<u64>, Vec<u64>)> {
        let rank = self.dims()?.len();
        hdf5::sync::sync(|| {
            let (mut start, mut end) = (vec![0 as hsize_t; rank], vec![0 as hsize_t; rank]);
            // SAFETY: libhdf5 writes `rank` values (the dataspace's rank) into `start` and
            // `end`, each that long; under the library lock.
            let rc = unsafe { H5Sget_select_bounds(self.0, start.as_mut_ptr(), end.as_mut_ptr()) };
            (rc >= 0).then_some((start, end))
        })
    }
}

/// One mapping of a virtual dataset.
struct Mapping {
    /// The source file's name as stored (`"."`: the VDS's own file).
    file: String,
    /// The source dataset's path as stored.
    dataset: String,
    /// The virtual selection (the VDS's extent).
    vspace: Space,
    /// The source selection (the extent the source had when the mapping was made).
    srcspace: Space,
}

impl Mapping {
    fn label(&self) -> String {
        format!("{}:{}", self.file, self.dataset)
    }
}

/// A string property of mapping `i` (`H5Pget_virtual_filename` / `_dsetname`).
fn mapping_string(
    dcpl: hid_t,
    i: usize,
    get: unsafe extern "C" fn(hid_t, usize, *mut c_char, usize) -> isize,
) -> Option<String> {
    hdf5::sync::sync(|| {
        // SAFETY: with a null buffer and size 0 libhdf5 writes nothing and returns the length;
        // `dcpl` is an open property list; under the library lock.
        let len = usize::try_from(unsafe { get(dcpl, i, std::ptr::null_mut(), 0) }).ok()?;
        if len > 1 << 20 {
            return None;
        }
        let mut buf = vec![0u8; len + 1];
        // SAFETY: libhdf5 writes at most `buf.len()` bytes (the size passed), NUL included.
        let got = unsafe { get(dcpl, i, buf.as_mut_ptr().cast(), buf.len()) };
        if got < 0 {
            return None;
        }
        buf.truncate(len);
        String::from_utf8(buf).ok()
    })
}

/// Why a virtual dataset is not converted (an unsupported item; its text is the reason).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// libhdf5 cannot list the mappings (its error, when it gave one).
    #[error("virtual dataset whose mappings cannot be read{}", cause(.0))]
    Mappings(#[source] Option<hdf5::Error>),
    /// libhdf5 cannot give this mapping's names or selections.
    #[error("virtual dataset whose mapping {0} cannot be read")]
    Mapping(usize),
    /// A source named with printf-style substitution (`<file>:<dataset>`).
    #[error(
        "virtual dataset with printf-style source names ('{0}': sources found by trying \
         numbers) is not converted"
    )]
    Printf(String),
    /// A mapping of unlimited extent.
    #[error(
        "virtual dataset with an unlimited mapping (its extent follows its sources as they \
         grow) is not converted"
    )]
    Unlimited,
    /// A source file that is not where libhdf5 would look (`dir`).
    #[error(
        "virtual dataset source file '{stored}' not found (looked in {}; libhdf5 would read \
         its region as fill values)",
        .dir.display()
    )]
    FileNotFound {
        /// The file name as stored.
        stored: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// A source file whose path cannot be made canonical.
    #[error("virtual dataset source file '{stored}' cannot be resolved: {source}")]
    FileUnresolved {
        /// The file name as stored.
        stored: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A source file outside the input's directory.
    #[error("virtual dataset source file '{0}' resolves outside the input's directory (not read)")]
    FileOutside(String),
    /// `HDF5_VDS_PREFIX` would make libhdf5 look elsewhere first.
    #[error(
        "virtual dataset with source files, and HDF5_VDS_PREFIX is set: libhdf5 would look for \
         them there first (unset it to convert)"
    )]
    PrefixSet,
    /// Source files, read only with `follow_external`.
    #[error(
        "virtual dataset reading {count} source file{} ({names}): converted only with \
         --follow-external",
        plural(.count)
    )]
    External {
        /// How many files.
        count: usize,
        /// Their names (at most [`LISTED`]).
        names: String,
    },
    /// A source file that cannot be opened.
    #[error("virtual dataset source file '{stored}' cannot be opened: {source}")]
    FileUnopened {
        /// The file name as stored.
        stored: String,
        /// Why.
        source: Box<SourceError>,
    },
    /// A source dataset missing from its file.
    #[error(
        "virtual dataset source dataset '{0}' not found (libhdf5 would read its region as \
         fill values)"
    )]
    DatasetNotFound(String),
    /// A source dataset reached through an external link.
    #[error(
        "virtual dataset source dataset '{0}' is reached through a link to another file (not \
         read)"
    )]
    DatasetLinked(String),
    /// A source dataset that is itself virtual.
    #[error(
        "virtual dataset source dataset '{0}' is itself a virtual dataset (nested virtual \
         datasets are not converted)"
    )]
    DatasetVirtual(String),
    /// A source dataset smaller than the selection mapped from it.
    #[error(
        "virtual dataset source dataset '{label}' of shape {shape:?} does not hold the \
         selection of {want} elements the mapping reads"
    )]
    DatasetTooSmall {
        /// `<file>:<dataset>`.
        label: String,
        /// Its shape.
        shape: Vec<u64>,
        /// Elements the mapping reads.
        want: u64,
    },
}

/// `s` unless `n` is 1.
fn plural(n: &usize) -> &'static str {
    if *n == 1 {
        ""
    } else {
        "s"
    }
}

/// `: <its text>` of libhdf5's error, when there is one.
fn cause(e: &Option<hdf5::Error>) -> String {
    e.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
}

/// The mappings of a virtual dataset's creation property list.
fn mappings(ds: &hdf5::Dataset) -> std::result::Result<Vec<Mapping>, Refusal> {
    let dcpl = ds.dcpl().map_err(|e| Refusal::Mappings(Some(e)))?;
    let id = dcpl.id();
    let mut n: usize = 0;
    // SAFETY: libhdf5 writes one `usize` into `n`; under the library lock.
    if hdf5::sync::sync(|| unsafe { H5Pget_virtual_count(id, &mut n) }) < 0 {
        return Err(Refusal::Mappings(None));
    }
    (0..n)
        .map(|i| {
            let bad = || Refusal::Mapping(i);
            let file = mapping_string(id, i, H5Pget_virtual_filename).ok_or_else(bad)?;
            let dataset = mapping_string(id, i, H5Pget_virtual_dsetname).ok_or_else(bad)?;
            // SAFETY: by-value queries of an open property list under the library lock; each
            // returns a new dataspace id, owned (and closed) by `Space`.
            let (v, s) = hdf5::sync::sync(|| unsafe {
                (H5Pget_virtual_vspace(id, i), H5Pget_virtual_srcspace(id, i))
            });
            let (vspace, srcspace) = (Space::new(v), Space::new(s));
            Ok(Mapping {
                file,
                dataset,
                vspace: vspace.ok_or_else(bad)?,
                srcspace: srcspace.ok_or_else(bad)?,
            })
        })
        .collect()
}

/// Whether a stored name uses printf-style substitution (`%b`; `%%` is a literal `%`).
fn has_printf(name: &str) -> bool {
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('%') => {}
                Some('b') => return true,
                _ => {}
            }
        }
    }
    false
}

/// Where libhdf5, with the virtual prefix `dir`, finds the source file `stored` (see the
/// module docs), checked: canonical, inside `root_dir`. `Err` with the reason otherwise.
fn resolve(stored: &str, dir: &Path, root_dir: &Path) -> std::result::Result<PathBuf, Refusal> {
    let p = Path::new(stored);
    let candidate = if p.is_absolute() && p.is_file() {
        p.to_path_buf()
    } else {
        let tail = if p.is_absolute() {
            p.file_name().map(Path::new).unwrap_or(p)
        } else {
            p
        };
        dir.join(tail)
    };
    if !candidate.is_file() {
        return Err(Refusal::FileNotFound {
            stored: stored.to_string(),
            dir: dir.to_path_buf(),
        });
    }
    let canon = std::fs::canonicalize(&candidate).map_err(|source| Refusal::FileUnresolved {
        stored: stored.to_string(),
        source,
    })?;
    if !canon.starts_with(root_dir) {
        return Err(Refusal::FileOutside(stored.to_string()));
    }
    Ok(canon)
}

/// Names, at most [`LISTED`] of them.
fn listed(names: &[&str]) -> String {
    let mut s = names
        .iter()
        .take(LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LISTED {
        s.push_str(&format!(", … ({} in all)", names.len()));
    }
    s
}

/// What a checked virtual dataset records.
struct Checked {
    /// `<file>:<dataset>` of each distinct source, in mapping order.
    sources: Vec<String>,
    /// The distinct source files other than `"."`, as stored.
    files: Vec<String>,
    mappings: usize,
    /// Elements no mapping covers: exact, or (`false`) a lower bound.
    uncovered: (u64, bool),
}

impl Walker<'_> {
    /// Checks the virtual dataset `f` (see the module docs) and reopens it so that libhdf5
    /// finds the checked source files; adds its notes and facts. `None` when it is
    /// unsupported (reported, or an error without `skip_unsupported`).
    pub(crate) fn virtual_dataset(
        &mut self,
        src: &mut H5Source,
        f: Found,
    ) -> Result<Option<Found>> {
        let checked = match self.check_virtual(&mut src.files, &f) {
            Ok(c) => c,
            Err(why) => {
                return self
                    .unsupported(&f.name, Feature::Layout, why.to_string())
                    .map(|()| None)
            }
        };
        let mut f = f;
        let dir = src.files[f.file].dir.clone();
        let path = f.ds.name();
        // The dataset is opened anew with the access properties: its old handle (the only one)
        // goes first, as libhdf5 keeps the properties of the first open of a dataset.
        drop(f.ds);
        f.ds = reopen(&src.files[f.file].h5, &path, &dir, &f.name)?;
        let files: Vec<&str> = checked.files.iter().map(String::as_str).collect();
        let from = if files.is_empty() {
            "its own file".to_string()
        } else {
            format!(
                "{} source file{} ({}) resolved beside it",
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                listed(&files)
            )
        };
        f.notes.push(format!(
            "HDF5 virtual dataset: {} mapping{} from {from}, read through libhdf5",
            checked.mappings,
            if checked.mappings == 1 { "" } else { "s" },
        ));
        match checked.uncovered {
            (0, _) => {}
            (n, exact) => f.notes.push(format!(
                "{}{n} elements are mapped by no source and read as the dataset's fill value",
                if exact { "" } else { "at least " }
            )),
        }
        f.facts.push(Fact::private(
            "h5",
            "vds_sources",
            AttrValue::TextList(checked.sources),
        ));
        Ok(Some(f))
    }

    /// The checks of [`Walker::virtual_dataset`]; `Err` with the reason it is unsupported.
    /// The files of the source are `files` (the first is the input).
    fn check_virtual(
        &self,
        files: &mut Vec<OpenFile>,
        f: &Found,
    ) -> std::result::Result<Checked, Refusal> {
        let maps = mappings(&f.ds)?;
        if let Some(m) = maps
            .iter()
            .find(|m| has_printf(&m.file) || has_printf(&m.dataset))
        {
            return Err(Refusal::Printf(m.label()));
        }
        if maps
            .iter()
            .any(|m| m.vspace.unlimited() || m.srcspace.unlimited())
        {
            return Err(Refusal::Unlimited);
        }
        let mut names: Vec<&str> = Vec::new();
        for m in &maps {
            if m.file != "." && !names.contains(&m.file.as_str()) {
                names.push(&m.file);
            }
        }
        let dir = files[f.file].dir.clone();
        let root_dir = files[0].dir.clone();
        let mut resolved: Vec<(&str, PathBuf)> = Vec::new();
        for &stored in &names {
            resolved.push((stored, resolve(stored, &dir, &root_dir)?));
        }
        if !names.is_empty() {
            if std::env::var_os("HDF5_VDS_PREFIX").is_some_and(|v| !v.is_empty()) {
                return Err(Refusal::PrefixSet);
            }
            if !self.opts.follow_external {
                return Err(Refusal::External {
                    count: names.len(),
                    names: listed(&names),
                });
            }
        }
        let mut opened: Vec<(&str, usize)> = vec![(".", f.file)];
        for (stored, path) in resolved {
            let i = open_file(files, &path).map_err(|e| Refusal::FileUnopened {
                stored: stored.to_string(),
                source: Box::new(e),
            })?;
            opened.push((stored, i));
        }
        let mut sources: Vec<String> = Vec::new();
        for m in &maps {
            let fi = opened
                .iter()
                .find(|(s, _)| *s == m.file)
                .map(|&(_, i)| i)
                .unwrap_or(f.file);
            check_source(files, m, fi)?;
            let label = m.label();
            if !sources.contains(&label) {
                sources.push(label);
            }
        }
        Ok(Checked {
            sources,
            files: names.iter().map(|s| s.to_string()).collect(),
            mappings: maps.len(),
            uncovered: uncovered(&f.ds, &maps),
        })
    }
}

/// Checks the source dataset of one mapping in the open file `fi`: it exists there (not
/// through an external link), is not virtual, and holds the mapped selection.
fn check_source(files: &[OpenFile], m: &Mapping, fi: usize) -> std::result::Result<(), Refusal> {
    let label = m.label();
    let root: hdf5::Group = (**files[fi].h5).clone();
    let Ok(ds) = root.dataset(&m.dataset) else {
        return Err(Refusal::DatasetNotFound(label));
    };
    let same_file = std::fs::canonicalize(ds.filename()).is_ok_and(|p| p == files[fi].canonical);
    if !same_file {
        return Err(Refusal::DatasetLinked(label));
    }
    if is_virtual(&ds).unwrap_or(false) {
        return Err(Refusal::DatasetVirtual(label));
    }
    let actual: Vec<u64> = ds.shape().iter().map(|&d| d as u64).collect();
    // An "all" selection stores no extent: it is the source's whole extent when libhdf5 opens
    // it, which must have as many elements as the virtual selection.
    let fits = if m.srcspace.sel_type() == H5S_sel_type::H5S_SEL_ALL {
        Some(actual.iter().product::<u64>()) == m.vspace.npoints()
    } else {
        match m.srcspace.bounds() {
            Some((_, end)) => {
                end.len() == actual.len() && end.iter().zip(&actual).all(|(e, a)| e < a)
            }
            None => m.srcspace.npoints() == Some(0),
        }
    };
    if !fits {
        return Err(Refusal::DatasetTooSmall {
            label,
            shape: actual,
            want: m.vspace.npoints().unwrap_or(0),
        });
    }
    Ok(())
}

/// Elements of the VDS that no mapping's virtual selection covers, and whether the count is
/// exact: from the union of the selections when libhdf5 can combine them (hyperslabs), else
/// the elements minus the sum of the selections' sizes (a lower bound when they overlap).
fn uncovered(ds: &hdf5::Dataset, maps: &[Mapping]) -> (u64, bool) {
    let total = ds.shape().iter().map(|&d| d as u64).product::<u64>();
    if maps
        .iter()
        .any(|m| m.vspace.sel_type() == H5S_sel_type::H5S_SEL_ALL)
    {
        return (0, true);
    }
    let union = maps.split_first().and_then(|(first, rest)| {
        // SAFETY: copies an open dataspace (a new id, owned by `Space`); under the library lock.
        let u = Space::new(hdf5::sync::sync(|| unsafe { H5Scopy(first.vspace.0) }))?;
        for m in rest {
            // SAFETY: combines two open dataspaces of one extent into `u` (in place); under
            // the library lock.
            let rc = hdf5::sync::sync(|| unsafe {
                H5Smodify_select(u.0, H5S_seloper_t::H5S_SELECT_OR, m.vspace.0)
            });
            if rc < 0 {
                return None;
            }
        }
        u.npoints()
    });
    match union {
        Some(n) => (total.saturating_sub(n), true),
        None if maps.is_empty() => (total, true),
        None => {
            let sum = maps
                .iter()
                .filter_map(|m| m.vspace.npoints())
                .fold(0u64, u64::saturating_add);
            (total.saturating_sub(sum), false)
        }
    }
}

/// Opens the dataset at `path` of `file` with a dataset access property list whose virtual
/// prefix is `dir` (the canonical directory of the file) and whose view is
/// `H5D_VDS_FIRST_MISSING`, and checks that the dataset has them (libhdf5 keeps the properties
/// of the first open of a dataset: another open handle would keep its own). `name` is the
/// dataset's name in messages.
fn reopen(file: &hdf5::File, path: &str, dir: &Path, name: &str) -> Result<hdf5::Dataset> {
    let failed = |what: &str| {
        SourceError::library_status(Lib::Hdf5, format!("dataset '{name}'"), what.to_string())
    };
    let cpath = CString::new(path).map_err(|_| Request::Path {
        path: path.into(),
        issue: PathIssue::Nul,
    })?;
    let prefix = dir
        .to_str()
        .and_then(|d| CString::new(format!("{d}/")).ok())
        .ok_or_else(|| Request::Path {
            path: dir.to_path_buf(),
            issue: PathIssue::NotUnicode,
        })?;
    hdf5::sync::sync(|| {
        // SAFETY: creates a new property list (closed below); under the library lock.
        let dapl = unsafe { H5Pcreate(*H5P_CLS_DATASET_ACCESS) };
        if dapl < 0 {
            return Err(failed("cannot create a dataset access property list"));
        }
        // SAFETY: `dapl` is the open list created above; `prefix` and `cpath` are live
        // NUL-terminated strings that libhdf5 copies; the dataset id returned is owned by the
        // handle made below; `dapl` is closed once. Under the library lock.
        let id = unsafe {
            let ok = H5Pset_virtual_prefix(dapl, prefix.as_ptr()) >= 0
                && H5Pset_virtual_view(dapl, H5D_vds_view_t::H5D_VDS_FIRST_MISSING) >= 0;
            let id = if ok {
                H5Dopen2(file.id(), cpath.as_ptr(), dapl)
            } else {
                -1
            };
            H5Pclose(dapl);
            id
        };
        if id < 0 {
            return Err(failed("cannot be opened as a virtual dataset"));
        }
        // SAFETY: `id` is a new dataset id this code owns; the handle takes over its reference.
        let ds = unsafe { hdf5::from_id::<hdf5::Dataset>(id) }
            .map_err(|e| SourceError::library(Lib::Hdf5, format!("dataset '{name}'"), e))?;
        if !has_access(&ds, &prefix) {
            return Err(failed("was already open with other access properties"));
        }
        Ok(ds)
    })
}

/// Whether an open VDS has the virtual prefix `prefix` and the first-missing view.
fn has_access(ds: &hdf5::Dataset, prefix: &CString) -> bool {
    hdf5::sync::sync(|| {
        // SAFETY: a by-value call on an open dataset (a new property list, closed below);
        // under the library lock.
        let dapl = unsafe { H5Dget_access_plist(ds.id()) };
        if dapl < 0 {
            return false;
        }
        let want = prefix.as_bytes();
        let mut buf = vec![0u8; want.len() + 2];
        let mut view = H5D_vds_view_t::H5D_VDS_ERROR;
        // SAFETY: libhdf5 writes at most `buf.len()` bytes (NUL included) into `buf` and one
        // view into `view`; `dapl` is the open list above, closed once. Under the library lock.
        let (len, rc) = unsafe {
            let len = H5Pget_virtual_prefix(dapl, buf.as_mut_ptr().cast(), buf.len());
            let rc = H5Pget_virtual_view(dapl, &mut view);
            H5Pclose(dapl);
            (len, rc)
        };
        let same = usize::try_from(len).is_ok_and(|l| buf.get(..l) == Some(want));
        same && rc >= 0 && view == H5D_vds_view_t::H5D_VDS_FIRST_MISSING
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printf_names() {
        assert!(has_printf("src_%b.h5"));
        assert!(!has_printf("100%%b.h5"));
        assert!(!has_printf("plain.h5"));
        assert!(has_printf("a%%%b"));
    }

    #[test]
    fn lists_are_short() {
        assert_eq!(listed(&["a", "b"]), "a, b");
        assert_eq!(
            listed(&["a", "b", "c", "d", "e"]),
            "a, b, c, d, … (5 in all)"
        );
    }
}
