//! The walk of an HDF5 file's graph from the root group by links: groups, hard, soft and
//! external links, datasets mapped to variables (numeric leaves of compound and array types,
//! strings, variable-length data), how each is stored (contiguous, chunked with filters this
//! crate decodes, or read through libhdf5), netCDF-4 dimension scales; everything with no form
//! skipped with its reason. [`Walker::finish`] makes the [`H5Source`].

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use hdf5::{IndexType, IterationOrder, LinkType, LocationType};
use hdf5_sys::h5d::H5D_layout_t;
use hdf5_sys::h5p::{H5Pget_external_count, H5Pget_layout, H5P_DEFAULT};
use hdf5_sys::h5s::{H5S_class_t, H5Sget_simple_extent_type};
use tet_source::{
    AttrValue, Attrs, DimLabels, ElementType, Fact, Feature, Lib, OpenOptions, Part, PathIssue,
    Request, Result, Role, Skipped, SourceError, SourceLayout, TextVariable, Variable,
};

use crate::chunks::{ChunkAccess, ChunkedVar};
use crate::filters::FilterSpec;
use crate::types::{Kind, Leaf, LeafKind, TypeInfo};
use crate::{
    check_not_truncated, chunks, filters, lib_err, ragged, time, types, vds, Access, Entry,
    H5Source, OpenFile, Plan, MAX_DEPTH, MAX_EXTERNAL_DEPTH, MAX_TEXT_BYTES, OPEN_FILES,
};

mod attrs;

pub(crate) type ObjKey = (usize, String);

pub(crate) enum Target {
    Dataset(usize),
    Group(String),
    Other(String),
}

/// A dataset found by the walk, before its variables are made.
pub(crate) struct Found {
    pub(crate) name: String,
    pub(crate) file: usize,
    pub(crate) ds: hdf5::Dataset,
    pub(crate) attrs: Attrs,
    pub(crate) notes: Vec<String>,
    /// The dimension name, when the dataset is a dimension scale.
    pub(crate) scale_name: Option<String>,
    pub(crate) netcdf_dim_only: bool,
    pub(crate) dim_refs: Vec<Option<ObjKey>>,
    pub(crate) dim_label_attr: Vec<String>,
    pub(crate) aliases: Vec<String>,
    pub(crate) attr_shapes: Vec<Fact>,
    /// Other facts of the dataset's variables (a virtual dataset's sources).
    pub(crate) facts: Vec<Fact>,
}

/// Attributes of one object, with the dimension-scale bookkeeping set apart.
#[derive(Default)]
pub(crate) struct ObjAttrs {
    pub(crate) attrs: Attrs,
    /// The shapes of the multi-dimensional attributes (their values flattened).
    pub(crate) shapes: Vec<Fact>,
    pub(crate) notes: Vec<String>,
    /// The text of a `CLASS` / `NAME` attribute (also kept in `attrs`, in file order: only a
    /// dimension scale's are bookkeeping, removed by [`Walker::add_dataset`]).
    pub(crate) class: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) dim_list: Option<Vec<Option<ObjKey>>>,
    pub(crate) labels: Option<Vec<String>>,
}

pub(crate) struct Walker<'a> {
    pub(crate) opts: &'a OpenOptions,
    pub(crate) files: Vec<OpenFile>,
    pub(crate) found: Vec<Found>,
    pub(crate) by_key: HashMap<ObjKey, Target>,
    /// (alias name, target key, target path as the link states it)
    pub(crate) aliases: Vec<(String, ObjKey, String)>,
    pub(crate) global_attrs: Attrs,
    pub(crate) global_facts: Vec<Fact>,
    pub(crate) skipped: Vec<Skipped>,
    pub(crate) followed: HashSet<(PathBuf, String)>,
}

/// Opens the HDF5 file at `path` as one of `files` (once: an open file's index is returned).
pub(crate) fn open_file(files: &mut Vec<OpenFile>, path: &Path) -> Result<usize> {
    let os = File::open(path)?;
    let len = os.metadata()?.len();
    let canonical = std::fs::canonicalize(path)?;
    if let Some(i) = files.iter().position(|f| f.canonical == canonical) {
        return Ok(i);
    }
    // The superblock is at 0, 512, 1024, … (after a user block): look in the first 64 KiB.
    let mut head = vec![0u8; len.min(64 << 10) as usize];
    if len < 8 || os.read_exact_at(&mut head, 0).is_err() {
        return Err(Part::Header.malformed(format!("file of {len} bytes is too short for HDF5")));
    }
    check_not_truncated(&head, len, "HDF5")?;
    if path.to_str().is_none() {
        return Err(Request::Path {
            path: path.to_path_buf(),
            issue: PathIssue::NotUnicode,
        }
        .into());
    }
    let h5 = OPEN_FILES.get_or_open(path, || {
        hdf5::File::open(path)
            .map_err(|e| SourceError::library(Lib::Hdf5, "not a readable HDF5 file", e))
    })?;
    let chunk_base = chunks::chunk_address_base(h5.userblock());
    let dir = canonical
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    files.push(OpenFile {
        h5,
        os,
        len,
        dir,
        canonical,
        chunk_base,
    });
    Ok(files.len() - 1)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

fn short_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn text_of(v: &AttrValue) -> Option<String> {
    match v {
        AttrValue::Text(s) => Some(s.clone()),
        AttrValue::TextList(l) if l.len() == 1 => Some(l[0].clone()),
        _ => None,
    }
}

const NETCDF_DIM_ONLY: &str = "This is a netCDF dimension but not a netCDF variable";

impl Walker<'_> {
    fn skip(&mut self, name: impl Into<String>, reason: impl Into<String>) {
        self.skipped.push(Skipped {
            name: name.into(),
            reason: reason.into(),
        });
    }

    /// An unmappable item: an error, or skipped with `skip_unsupported`.
    pub(crate) fn unsupported(
        &mut self,
        name: &str,
        feature: Feature,
        reason: impl Into<String>,
    ) -> Result<()> {
        let reason = reason.into();
        if self.opts.skip_unsupported {
            self.skip(name, reason);
            Ok(())
        } else {
            Err(feature.unsupported(format!("dataset '{name}': {reason}")))
        }
    }

    /// An object libhdf5 cannot open (written by a newer libhdf5 — e.g. `libver='latest'`
    /// layout messages —, or damaged): its data would be lost, so it is refused like any
    /// unsupported item, or skipped (and reported) with `skip_unsupported`.
    fn unreadable(&mut self, what: &str, name: &str, e: impl std::fmt::Display) -> Result<()> {
        let (major, minor, patch) = hdf5::library_version();
        let reason = format!("cannot be opened by libhdf5 {major}.{minor}.{patch}: {e}");
        let shown = if name.is_empty() { "/" } else { name };
        if self.opts.skip_unsupported {
            self.skip(shown, format!("{what} {reason}"));
            Ok(())
        } else {
            Err(Feature::Version.unsupported(format!("{what} '{shown}' {reason}")))
        }
    }

    pub(crate) fn open_file(&mut self, path: &Path) -> Result<usize> {
        open_file(&mut self.files, path)
    }

    pub(crate) fn walk_group(
        &mut self,
        file: usize,
        group: &hdf5::Group,
        prefix: &str,
        depth: usize,
        root_dir: &Path,
    ) -> Result<()> {
        if depth > MAX_DEPTH {
            self.skip(
                prefix,
                format!("group nested deeper than {MAX_DEPTH} levels"),
            );
            return Ok(());
        }
        let links = match group.links(IndexType::Name, IterationOrder::Increasing) {
            Ok(l) => l,
            Err(e) => return self.unreadable("group (its members)", prefix, e),
        };
        for (lname, info) in links {
            let path = join(prefix, &lname);
            match info.link_type {
                LinkType::Hard => self.hard_link(file, group, &lname, &path, depth, root_dir)?,
                LinkType::Soft => {
                    let target = link_value(group, &lname)
                        .map(|v| String::from_utf8_lossy(&v).into_owned())
                        .unwrap_or_else(|| "?".into());
                    match group.loc_info_by_name(&lname) {
                        Ok(li) => {
                            let key = (file, format!("{:?}", li.token));
                            self.aliases.push((path, key, target));
                        }
                        Err(_) => self.skip(path, format!("dangling soft link to '{target}'")),
                    }
                }
                LinkType::External => {
                    let Some((efile, eobj)) = external_value(group, &lname) else {
                        self.skip(path, "external link with an unreadable target");
                        continue;
                    };
                    if !self.opts.follow_external {
                        self.skip(
                            path,
                            format!(
                                "external link to {efile}:{eobj} not followed (use --follow-external)"
                            ),
                        );
                        continue;
                    }
                    self.follow_external(file, &path, &efile, &eobj, depth, root_dir)?;
                }
            }
        }
        Ok(())
    }

    fn hard_link(
        &mut self,
        file: usize,
        group: &hdf5::Group,
        lname: &str,
        path: &str,
        depth: usize,
        root_dir: &Path,
    ) -> Result<()> {
        let li = match group.loc_info_by_name(lname) {
            Ok(li) => li,
            Err(e) => return self.unreadable("object", path, e),
        };
        let key = (file, format!("{:?}", li.token));
        if let Some(t) = self.by_key.get(&key) {
            match t {
                Target::Dataset(_) => {
                    let first = path.to_string();
                    self.aliases.push((first.clone(), key, first));
                }
                Target::Group(g) => {
                    let g = g.clone();
                    self.skip(path, format!("hard link to group '{g}', already converted"));
                }
                Target::Other(o) => {
                    let o = o.clone();
                    self.skip(path, format!("hard link to '{o}'"));
                }
            }
            return Ok(());
        }
        match li.loc_type {
            LocationType::Group => {
                self.by_key.insert(key, Target::Group(path.to_string()));
                match group.group(lname) {
                    Ok(g) => {
                        let a = self.read_attrs(file, &g, path);
                        self.add_group_attrs(path, a);
                        self.walk_group(file, &g, path, depth + 1, root_dir)?;
                    }
                    Err(e) => self.unreadable("group", path, e)?,
                }
            }
            LocationType::Dataset => match group.dataset(lname) {
                Ok(ds) => {
                    self.by_key.insert(key, Target::Dataset(self.found.len()));
                    self.add_dataset(file, ds, path, Vec::new());
                }
                Err(e) => self.unreadable("dataset", path, e)?,
            },
            _ => {
                self.by_key.insert(key, Target::Other(path.to_string()));
                self.skip(path, "named datatype (a type definition, no data)");
            }
        }
        Ok(())
    }

    fn follow_external(
        &mut self,
        parent: usize,
        path: &str,
        efile: &str,
        eobj: &str,
        depth: usize,
        root_dir: &Path,
    ) -> Result<()> {
        let what = format!("external link to {efile}:{eobj}");
        let p = Path::new(efile);
        let candidate = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.files[parent].dir.join(p)
        };
        let Ok(canon) = std::fs::canonicalize(&candidate) else {
            self.skip(path, format!("{what}: target file not found"));
            return Ok(());
        };
        if !canon.starts_with(root_dir) {
            self.skip(
                path,
                format!("{what} points outside the input's directory (not followed)"),
            );
            return Ok(());
        }
        if depth > MAX_EXTERNAL_DEPTH || !self.followed.insert((canon.clone(), eobj.to_string())) {
            self.skip(path, format!("{what}: link cycle (not followed again)"));
            return Ok(());
        }
        let fi = match self.open_file(&canon) {
            Ok(i) => i,
            Err(e) => {
                self.skip(path, format!("{what}: {e}"));
                return Ok(());
            }
        };
        let root: hdf5::Group = (**self.files[fi].h5).clone();
        let info = match root.loc_info_by_name(eobj) {
            Ok(i) => i,
            Err(_) => {
                self.skip(path, format!("{what}: target object not found"));
                return Ok(());
            }
        };
        let key = (fi, format!("{:?}", info.token));
        if let Some(Target::Dataset(_)) = self.by_key.get(&key) {
            self.aliases.push((path.to_string(), key, what));
            return Ok(());
        }
        let note = format!("followed {what}");
        match info.loc_type {
            LocationType::Dataset => match root.dataset(eobj) {
                Ok(ds) => {
                    self.by_key.insert(key, Target::Dataset(self.found.len()));
                    self.add_dataset(fi, ds, path, vec![note]);
                }
                Err(e) => self.unreadable("dataset", path, format!("({what}) {e}"))?,
            },
            LocationType::Group => match root.group(eobj) {
                Ok(g) => {
                    self.by_key.insert(key, Target::Group(path.to_string()));
                    let a = self.read_attrs(fi, &g, path);
                    self.add_group_attrs(path, a);
                    self.walk_group(fi, &g, path, depth + 1, root_dir)?;
                }
                Err(e) => self.unreadable("group", path, format!("({what}) {e}"))?,
            },
            _ => self.skip(path, format!("{what}: target is a named datatype")),
        }
        Ok(())
    }

    fn add_dataset(&mut self, file: usize, ds: hdf5::Dataset, path: &str, mut notes: Vec<String>) {
        let a = self.read_attrs(file, &ds, path);
        notes.extend(a.notes);
        let mut attrs = a.attrs;
        let mut shapes = a.shapes;
        let is_scale = a.class.as_deref() == Some("DIMENSION_SCALE");
        let mut scale_name = None;
        let mut netcdf_dim_only = false;
        if is_scale {
            // A scale's CLASS and NAME are bookkeeping (its role and dimension name).
            let bookkeeping = |k: &str| k == "CLASS" || k == "NAME";
            attrs.retain(|(k, _)| !bookkeeping(k));
            shapes.retain(|f| !matches!(f, Fact::AttrShape { attr, .. } if bookkeeping(attr)));
            let nm = a.name.clone().filter(|s| !s.is_empty());
            match nm {
                Some(s) if s.starts_with(NETCDF_DIM_ONLY) => netcdf_dim_only = true,
                Some(s) => scale_name = Some(s),
                None => {}
            }
            if scale_name.is_none() {
                scale_name = Some(short_name(path).to_string());
            }
        }
        // CLASS / NAME of other conventions (PyTables, …) are ordinary attributes, in place.
        self.found.push(Found {
            name: path.to_string(),
            file,
            ds,
            attrs,
            notes,
            scale_name,
            netcdf_dim_only,
            dim_refs: a.dim_list.unwrap_or_default(),
            dim_label_attr: a.labels.unwrap_or_default(),
            aliases: Vec::new(),
            attr_shapes: shapes,
            facts: Vec::new(),
        });
    }

    pub(crate) fn finish(mut self) -> Result<H5Source> {
        // Aliases (soft links, extra hard links, external links to converted datasets).
        for (alias, key, target) in std::mem::take(&mut self.aliases) {
            match self.by_key.get(&key) {
                Some(Target::Dataset(i)) => {
                    let i = *i;
                    self.found[i].aliases.push(alias);
                }
                Some(Target::Group(g)) => {
                    let g = g.clone();
                    self.skip(
                        alias,
                        format!("soft link to group '{g}' (its members are converted under their own names)"),
                    );
                }
                _ => self.skip(alias, format!("link to '{target}', which is not converted")),
            }
        }
        // Dimension names of scales, by object.
        let scale_of: HashMap<usize, String> = self
            .found
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.scale_name.clone().map(|s| (i, s)))
            .collect();
        let mut src = H5Source {
            files: Vec::new(),
            entries: Vec::new(),
            plans: Vec::new(),
            variables: Vec::new(),
            text_variables: Vec::new(),
            dim_labels: Vec::new(),
            global_attrs: std::mem::take(&mut self.global_attrs),
            global_facts: std::mem::take(&mut self.global_facts),
            skipped: Vec::new(),
            parallel: false,
        };
        src.files = std::mem::take(&mut self.files);
        let found = std::mem::take(&mut self.found);
        for f in found {
            let n_axes = f.dim_refs.len().max(f.dim_label_attr.len());
            let dims: Vec<Option<String>> = (0..n_axes)
                .map(|axis| {
                    let scale = match f
                        .dim_refs
                        .get(axis)
                        .and_then(Option::as_ref)
                        .and_then(|k| self.by_key.get(k))
                    {
                        Some(Target::Dataset(i)) => scale_of.get(i).cloned(),
                        _ => None,
                    };
                    scale.or_else(|| {
                        f.dim_label_attr
                            .get(axis)
                            .filter(|s| !s.is_empty())
                            .cloned()
                    })
                })
                .collect();
            self.make_variables(&mut src, f, dims)?;
        }
        src.skipped = std::mem::take(&mut self.skipped);
        src.parallel = src
            .entries
            .iter()
            .any(|e| !matches!(e.access, Access::Library));
        Ok(src)
    }

    /// Makes the variables (numeric, text) of one found dataset, or reports it skipped.
    fn make_variables(
        &mut self,
        src: &mut H5Source,
        f: Found,
        dim_names: Vec<Option<String>>,
    ) -> Result<()> {
        if f.netcdf_dim_only {
            self.skip(&f.name, "netCDF dimension without a variable (no data)");
            return Ok(());
        }
        let virt = vds::is_virtual(&f.ds)
            .map_err(|e| SourceError::library(Lib::Hdf5, format!("dataset '{}'", f.name), e))?;
        let f = match virt {
            true => match self.virtual_dataset(src, f)? {
                Some(f) => f,
                None => return Ok(()),
            },
            false => f,
        };
        let name = f.name.as_str();
        let dtype =
            f.ds.dtype()
                .map_err(|e| lib_err(format!("dataset '{name}': datatype"), e))?;
        let Some((scalar, outer)) = self.dataspace(&f)? else {
            return Ok(());
        };
        if let Some(base) = types::vlen_base(dtype.id()) {
            return self.vlen_dataset(src, &f, &dtype, &base, &outer, &dim_names);
        }
        let info = types::analyze(dtype.id());
        let opaque = types::opaque_tag(dtype.id());
        let leaves = types::flatten(&info);
        // Two leaves with one name (fields `a/b` and `a_b`: `/` becomes `_`; an unnamed field
        // and one named `field_<i>`) cannot both be variables: this dataset is an unsupported
        // item, the rest of the file converts.
        let mut seen = HashSet::new();
        if let Some(dup) = leaves.iter().find(|l| !seen.insert(l.suffix())) {
            return self.unsupported(
                name,
                Feature::DataType,
                format!(
                    "compound fields collide as '{}' once '/' in field names becomes '_'",
                    dup.name_under(name)
                ),
            );
        }
        let Some(dtype) = self.read_type(name, dtype, &info)? else {
            return Ok(());
        };
        let n_records = outer
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| Part::Shape.malformed(format!("dataset '{name}': shape overflows")))?;
        let record = info.size;
        let nbit = types::has_nbit(&info);
        let Some(storage) = self.storage(src, &f, &dtype, record, n_records, nbit)? else {
            return Ok(());
        };
        let entry = src.entries.len();
        src.entries.push(Entry {
            name: name.to_string(),
            file: f.file,
            ds: f.ds.clone(),
            dtype,
            record,
            outer: outer.clone(),
            indirect: storage.indirect,
            access: storage.access,
        });
        let all_named = !dim_names.is_empty()
            && dim_names.len() == outer.len()
            && dim_names.iter().any(Option::is_some);
        let mut d = DatasetVars {
            f: &f,
            info: &info,
            leaves: &leaves,
            outer: &outer,
            scalar,
            n_records,
            record,
            entry,
            chunk_shape: storage.chunk_shape,
            filters: storage.specs.iter().map(FilterSpec::label).collect(),
            compressed: storage.specs.iter().any(FilterSpec::is_compression),
            dim_names: all_named.then_some(dim_names),
            texts: None,
        };
        let before = src.variables.len();
        for (li, leaf) in leaves.iter().enumerate() {
            self.add_leaf(src, &mut d, li, leaf)?;
        }
        // An opaque dataset is `u8` with a trailing axis of the blob size: recorded as such.
        if let (Some(tag), Some(v)) = (opaque, src.variables.get_mut(before)) {
            v.notes.push(format!(
                "HDF5 opaque type{} of {record} bytes: u8 along the trailing axis",
                if tag.is_empty() {
                    String::new()
                } else {
                    format!(" (tag '{tag}')")
                }
            ));
            v.facts.push(Fact::Opaque { type_name: tag });
        }
        Ok(())
    }

    /// A variable-length sequence dataset of numbers: a CF contiguous ragged array (module
    /// `ragged`), its values and counts gathered now.
    fn vlen_dataset(
        &mut self,
        src: &mut H5Source,
        f: &Found,
        dtype: &hdf5::Datatype,
        base: &TypeInfo,
        outer: &[u64],
        dim_names: &[Option<String>],
    ) -> Result<()> {
        let name = f.name.as_str();
        let n = outer
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| Part::Shape.malformed(format!("dataset '{name}': shape overflows")))?;
        if matches!(base.kind, Kind::FixedStr { .. } | Kind::VarStr { .. }) {
            return self.vlen_text(src, f, dtype, base, n, outer, dim_names);
        }
        // A sequence of arrays of numbers: the arrays' axes follow the sample axis.
        let (elem, inner): (&TypeInfo, &[u64]) = match &base.kind {
            Kind::Array { dims, base } => (base, dims),
            _ => (base, &[]),
        };
        let Some((et, be)) = types::numeric_type(elem) else {
            let why = format!(
                "variable-length sequence of {} has no tensor form (sequences of numbers \
                 or of arrays of numbers become ragged arrays, of strings ragged text)",
                types::describe(base)
            );
            return self.unsupported(name, Feature::DataType, why);
        };
        let time = matches!(elem.kind, Kind::Int { time: true, .. });
        let values = ragged::Values {
            et,
            be,
            time64: time && elem.size == 8,
        };
        let mut v = vlen_variable(f, et, outer, dim_names);
        if let Kind::Enum { members, .. } = &elem.kind {
            v.facts.push(Fact::EnumMapping(members.clone()));
        }
        if time {
            time_attrs(elem, &mut v.attrs, &mut v.notes);
        }
        if !inner.is_empty() {
            let per = inner
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .and_then(|p| usize::try_from(p).ok())
                .ok_or_else(|| {
                    Part::Shape.malformed(format!("dataset '{name}': shape overflows"))
                })?;
            let (bytes, counts) =
                match ragged::read_array_sequences(f.ds.id(), dtype.id(), n, values, per, name) {
                    Err(SourceError::Unsupported { feature, detail }) => {
                        return self.unsupported(name, feature, detail)
                    }
                    r => r?,
                };
            let ((mut vals, _), (count, cdata)) = counts.into_variables(v, "")?;
            let short = short_name(name).to_string();
            vals.dtype = et;
            vals.shape.extend_from_slice(inner);
            if let Some(d) = vals.dims.as_mut() {
                d.extend((1..=inner.len()).map(|k| format!("{short}_dim{k}")));
            }
            vals.notes.push(format!(
                "each value of the sequences is an array of shape {inner:?}: its axes follow \
                 the sample axis"
            ));
            let vdata = tet_source::ragged::InMemory::new(vals.shape.clone(), et.size(), bytes);
            push_memory(src, f, dtype, [(vals, vdata), (count, cdata)]);
            return Ok(());
        }
        let gathered = match ragged::read_sequences(f.ds.id(), dtype.id(), n, values, name) {
            Err(SourceError::Unsupported { feature, detail }) => {
                return self.unsupported(name, feature, detail)
            }
            r => r?,
        };
        let ((values, vdata), (count, cdata)) = gathered.into_variables(v, "")?;
        push_memory(src, f, dtype, [(values, vdata), (count, cdata)]);
        Ok(())
    }

    /// A variable-length sequence dataset of strings: ragged text (module `ragged`), its
    /// strings and counts gathered now.
    #[allow(clippy::too_many_arguments)]
    fn vlen_text(
        &mut self,
        src: &mut H5Source,
        f: &Found,
        dtype: &hdf5::Datatype,
        base: &TypeInfo,
        n: usize,
        outer: &[u64],
        dim_names: &[Option<String>],
    ) -> Result<()> {
        let name = f.name.as_str();
        // Strings that are not UTF-8 are decoded lossily, as those of string datasets.
        let (strings, counts, _lossy) =
            match ragged::read_string_sequences(f.ds.id(), dtype.id(), n, base, name) {
                Err(SourceError::Unsupported { feature, detail }) => {
                    return self.unsupported(name, feature, detail)
                }
                r => r?,
            };
        let v = vlen_variable(f, ElementType::U8, outer, dim_names);
        let ((values, _), (count, cdata)) = counts.into_variables(v, "")?;
        src.text_variables.push(TextVariable {
            name: values.name,
            shape: values.shape,
            dims: values.dims,
            values: strings,
            attrs: values.attrs,
            char_axis: None,
            facts: values.facts,
        });
        push_memory(src, f, dtype, [(count, cdata)]);
        Ok(())
    }

    /// The dataspace of a found dataset: whether it is scalar and its extents (none for a
    /// scalar); `None` for a null dataspace, which is reported as skipped.
    fn dataspace(&mut self, f: &Found) -> Result<Option<(bool, Vec<u64>)>> {
        let name = &f.name;
        let space =
            f.ds.space()
                .map_err(|e| lib_err(format!("dataset '{name}': dataspace"), e))?;
        // SAFETY: a by-value query of an open dataspace id under the library lock (libhdf5
        // checks the id).
        let class = hdf5::sync::sync(|| unsafe { H5Sget_simple_extent_type(space.id()) });
        match class {
            H5S_class_t::H5S_NULL => {
                self.skip(name, "null dataspace");
                Ok(None)
            }
            H5S_class_t::H5S_SCALAR => Ok(Some((true, Vec::new()))),
            H5S_class_t::H5S_SIMPLE => Ok(Some((
                false,
                space.shape().iter().map(|&d| d as u64).collect(),
            ))),
            _ => Err(Part::Shape.malformed(format!("dataset '{name}': bad dataspace"))),
        }
    }

    /// The type a dataset is read in: its own, or for N-bit integers the full-width memory type
    /// libhdf5 converts them to; `None` when libhdf5 refuses that type (reported as
    /// unsupported).
    fn read_type(
        &mut self,
        name: &str,
        dtype: hdf5::Datatype,
        info: &TypeInfo,
    ) -> Result<Option<hdf5::Datatype>> {
        if !types::has_nbit(info) {
            return Ok(Some(dtype));
        }
        let mem = types::memory_type(dtype.id()).map(|id| {
            // SAFETY: `memory_type` returns a fresh datatype id this code owns; the handle takes
            // over its one reference (and closes it).
            unsafe { hdf5::from_id::<hdf5::Datatype>(id) }
        });
        match mem {
            Some(Ok(t)) => Ok(Some(t)),
            _ => self
                .unsupported(
                    name,
                    Feature::DataType,
                    format!(
                        "integers with padding bits ({}) that libhdf5 cannot convert",
                        types::describe(info)
                    ),
                )
                .map(|()| None),
        }
    }

    /// How a dataset is stored and will be read; `None` when it cannot be read (external raw
    /// data, filters nobody decodes: reported as unsupported). A virtual dataset (checked by
    /// [`Walker::virtual_dataset`]) is read through the library.
    fn storage(
        &mut self,
        src: &H5Source,
        f: &Found,
        dtype: &hdf5::Datatype,
        record: usize,
        n_records: u64,
        nbit: bool,
    ) -> Result<Option<Storage>> {
        let name = f.name.as_str();
        let dcpl =
            f.ds.dcpl()
                .map_err(|e| lib_err(format!("dataset '{name}': creation properties"), e))?;
        // SAFETY: by-value queries of an open property list under the library lock.
        let (layout, n_external) = hdf5::sync::sync(|| unsafe {
            (H5Pget_layout(dcpl.id()), H5Pget_external_count(dcpl.id()))
        });
        if layout == H5D_layout_t::H5D_VIRTUAL {
            return Ok(Some(Storage {
                access: Access::Library,
                chunk_shape: None,
                specs: Vec::new(),
                indirect: chunks::type_has_indirection(dtype.id()),
            }));
        }
        if n_external > 0 {
            return self
                .unsupported(
                    name,
                    Feature::Layout,
                    "raw data stored in external files is not read",
                )
                .map(|()| None);
        }
        let chunked = layout == H5D_layout_t::H5D_CHUNKED;
        let specs = if chunked {
            filters::read_pipeline(dcpl.id())?
        } else {
            Vec::new()
        };
        let Some(ours_only) = self.ours_only_filters(name, &specs, record)? else {
            return Ok(None);
        };
        let indirect = chunks::type_has_indirection(dtype.id());
        let (chunk_base, file_len) = (src.files[f.file].chunk_base, src.files[f.file].len);
        let mut chunk_shape = None;
        let access = if indirect || nbit {
            if !ours_only.is_empty() {
                return self.unsupported(
                    name,
                    Feature::Codec,
                    format!(
                        "{} chunks of a type with variable-length parts or N-bit integers: libhdf5 has no plugin for the filter (HDF5_PLUGIN_PATH) and direct decoding needs records as stored",
                        ours_only.join(", ")
                    ),
                ).map(|()| None);
            }
            Access::Library
        } else if chunked {
            match self.chunked_access(f, chunk_base, file_len, &ours_only)? {
                Some((access, direct_chunk)) => {
                    chunk_shape = direct_chunk;
                    access
                }
                None => return Ok(None),
            }
        } else if layout == H5D_layout_t::H5D_CONTIGUOUS {
            contiguous_access(f, n_records, record, file_len)?
        } else {
            Access::Library
        };
        if chunk_shape.is_none() && chunked {
            chunk_shape = f.ds.chunk().map(|c| c.iter().map(|&d| d as u64).collect());
        }
        Ok(Some(Storage {
            access,
            chunk_shape,
            specs,
            indirect,
        }))
    }

    /// The filters of `specs` only this crate decodes (libhdf5 has no plugin for them): the
    /// dataset must then be read by direct chunk access, never by `H5Dread`. `None` when a
    /// filter can be decoded by neither (reported as unsupported).
    fn ours_only_filters(
        &mut self,
        name: &str,
        specs: &[FilterSpec],
        record: usize,
    ) -> Result<Option<Vec<String>>> {
        let mut ours_only: Vec<String> = Vec::new();
        for s in specs {
            let ours = s.decoder(record).is_some();
            // H5Zfilter_avail also loads a plugin for the id from HDF5_PLUGIN_PATH.
            // SAFETY: a by-value query of a filter id under the library lock.
            let avail = hdf5::sync::sync(|| unsafe { hdf5_sys::h5z::H5Zfilter_avail(s.id) }) > 0;
            if !ours && !avail {
                return self
                    .unsupported(name, Feature::Codec, filter_unavailable(s))
                    .map(|()| None);
            }
            if !avail {
                ours_only.push(s.label());
            }
        }
        Ok(Some(ours_only))
    }

    /// Direct chunk access to a chunked dataset (with its chunk shape) when its pipeline and
    /// type allow, else the library; `None` when only direct access could decode its filters
    /// (`ours_only`) and it is not possible (reported as unsupported).
    fn chunked_access(
        &mut self,
        f: &Found,
        chunk_base: u64,
        file_len: u64,
        ours_only: &[String],
    ) -> Result<Option<(Access, Option<Vec<u64>>)>> {
        match ChunkedVar::from_dataset(&f.ds, &f.name, chunk_base, file_len)? {
            ChunkAccess::Direct(cv) => {
                let chunk_shape = Some(cv.chunk_shape().to_vec());
                Ok(Some((Access::Direct(cv), chunk_shape)))
            }
            ChunkAccess::Library(why) => {
                if !ours_only.is_empty() {
                    return self.unsupported(
                        &f.name,
                        Feature::Codec,
                        format!(
                            "{}-compressed, but its chunks cannot be read directly ({why}) and libhdf5 has no plugin for the filter (HDF5_PLUGIN_PATH)",
                            ours_only.join(", ")
                        ),
                    ).map(|()| None);
                }
                Ok(Some((Access::Library, None)))
            }
        }
    }

    /// Makes the variable of one leaf of a dataset (or reports it unsupported).
    fn add_leaf(
        &mut self,
        src: &mut H5Source,
        d: &mut DatasetVars<'_>,
        li: usize,
        leaf: &Leaf,
    ) -> Result<()> {
        let name = leaf.name_under(&d.f.name);
        let inner = leaf.place.inner_shape();
        let shape: Vec<u64> = d.outer.iter().chain(&inner).copied().collect();
        let mut notes: Vec<String> = leaf.notes.clone();
        notes.extend(d.f.notes.iter().cloned());
        if d.scalar && !shape.is_empty() {
            notes.push("0-d dataset of an array type: the array's axes only".into());
        }
        let dims = d.dims(&name, inner.len());
        let v = LeafVar {
            name,
            inner,
            shape,
            dims,
            notes,
        };
        match &leaf.kind {
            LeafKind::Numeric { .. } => {
                src.push_numeric(d, leaf, v);
                Ok(())
            }
            LeafKind::Text(_) => self.add_text(src, d, li, v),
            LeafKind::Unsupported(why) => self.unsupported(
                &v.name,
                Feature::DataType,
                format!("{why} (HDF5 type {})", types::describe(d.info)),
            ),
        }
    }

    /// Makes the text variable of a string leaf (and the dimension labels of a string scale).
    fn add_text(
        &mut self,
        src: &mut H5Source,
        d: &mut DatasetVars<'_>,
        li: usize,
        v: LeafVar,
    ) -> Result<()> {
        let bytes = d.n_records.saturating_mul(d.record as u64);
        if bytes > MAX_TEXT_BYTES {
            return self.unsupported(
                &v.name,
                Feature::Size,
                format!("string dataset of {bytes} bytes is too large for the footer"),
            );
        }
        if d.texts.is_none() {
            d.texts = Some(src.read_texts(d.entry, d.leaves)?);
        }
        let values = d
            .texts
            .as_ref()
            .and_then(|t| t.get(li))
            .cloned()
            .unwrap_or_default();
        if d.is_coordinate(v.inner.len()) {
            if let Some(dim) = &d.f.scale_name {
                src.dim_labels.push(DimLabels {
                    dim: dim.clone(),
                    labels: values.clone(),
                });
            }
        }
        for a in &d.f.aliases {
            self.skip(
                a,
                format!("link to string dataset '{}' (kept once)", d.f.name),
            );
        }
        // A 0-d string dataset is one string: text variables have no 0-d form.
        let shape = if v.shape.is_empty() { vec![1] } else { v.shape };
        src.text_variables.push(TextVariable {
            name: v.name,
            shape,
            dims: v.dims,
            values,
            attrs: d.f.attrs.clone(),
            char_axis: None,
            facts: Vec::new(),
        });
        Ok(())
    }
}

/// The variable of vlen dataset `f` as the file has it (its element type `et`, its shape
/// `outer`, dims where the file names some), before its ragged form.
fn vlen_variable(
    f: &Found,
    et: ElementType,
    outer: &[u64],
    dim_names: &[Option<String>],
) -> Variable {
    let name = f.name.as_str();
    let mut v = Variable::new(name, et, outer.to_vec());
    v.attrs = f.attrs.clone();
    v.notes = f.notes.clone();
    v.facts = f.attr_shapes.iter().chain(&f.facts).cloned().collect();
    if !outer.is_empty() && dim_names.len() == outer.len() && dim_names.iter().any(Option::is_some)
    {
        let short = short_name(name);
        v.dims = Some(
            dim_names
                .iter()
                .enumerate()
                .map(|(k, d)| d.clone().unwrap_or_else(|| format!("{short}_dim{k}")))
                .collect(),
        );
    }
    v
}

/// Adds variables gathered in memory from dataset `f` (type `dtype`) to `src`.
fn push_memory<const N: usize>(
    src: &mut H5Source,
    f: &Found,
    dtype: &hdf5::Datatype,
    vars: [(Variable, tet_source::ragged::InMemory); N],
) {
    for (var, data) in vars {
        let size = var.dtype.size();
        src.entries.push(Entry {
            name: var.name.clone(),
            file: f.file,
            ds: f.ds.clone(),
            dtype: dtype.clone(),
            record: size,
            outer: var.shape.clone(),
            indirect: false,
            access: Access::Memory(data),
        });
        src.plans.push(Plan {
            entry: src.entries.len() - 1,
            leaf: types::le_leaf(var.dtype),
        });
        src.variables.push(var);
    }
}

/// How a found dataset is stored and will be read.
struct Storage {
    access: Access,
    /// The source chunk shape (of the dataset's own axes).
    chunk_shape: Option<Vec<u64>>,
    /// The filter pipeline.
    specs: Vec<FilterSpec>,
    /// The type has variable-length parts.
    indirect: bool,
}

/// What the variables of one dataset share while [`Walker::make_variables`] makes them.
struct DatasetVars<'a> {
    f: &'a Found,
    info: &'a TypeInfo,
    leaves: &'a [Leaf],
    /// The dataset's extents (none for a scalar).
    outer: &'a [u64],
    scalar: bool,
    n_records: u64,
    /// Bytes per record.
    record: usize,
    /// Index of the dataset's [`Entry`].
    entry: usize,
    chunk_shape: Option<Vec<u64>>,
    filters: Vec<String>,
    compressed: bool,
    /// One name per axis (`None`: unnamed), when the dataset names at least one of them.
    dim_names: Option<Vec<Option<String>>>,
    /// The values of every text leaf, read once for the first.
    texts: Option<Vec<Vec<String>>>,
}

impl DatasetVars<'_> {
    /// Whether the leaf with `inner_axes` array axes is a coordinate: the whole record of a
    /// 1-D dimension scale.
    fn is_coordinate(&self, inner_axes: usize) -> bool {
        self.f.scale_name.is_some() && self.outer.len() == 1 && inner_axes == 0
    }

    /// The dimension names of the variable `name` with `inner_axes` array axes: a scale's own
    /// dimension, or the dataset's named axes (unnamed ones `<dataset>_dim<axis>`) followed by
    /// `<variable>_dim<axis>` for the array axes; `None` when the dataset names no axis.
    fn dims(&self, name: &str, inner_axes: usize) -> Option<Vec<String>> {
        if self.is_coordinate(inner_axes) {
            return self.f.scale_name.clone().map(|s| vec![s]);
        }
        let named = self.dim_names.as_ref()?;
        let short = short_name(&self.f.name);
        let mut d: Vec<String> = named
            .iter()
            .enumerate()
            .map(|(a, n)| n.clone().unwrap_or_else(|| format!("{short}_dim{a}")))
            .collect();
        let leaf_short = short_name(name);
        let outer = self.outer.len();
        d.extend((0..inner_axes).map(|k| format!("{leaf_short}_dim{}", outer + k)));
        Some(d)
    }
}

/// One leaf's variable as far as every kind of leaf shares it.
struct LeafVar {
    name: String,
    /// The array type's axes (trailing).
    inner: Vec<u64>,
    shape: Vec<u64>,
    dims: Option<Vec<String>>,
    notes: Vec<String>,
}

/// The access to a contiguous dataset: positioned reads at its records' file offset when its
/// storage is allocated (and inside the file), else the library (nothing written yet).
fn contiguous_access(f: &Found, n_records: u64, record: usize, file_len: u64) -> Result<Access> {
    let name = &f.name;
    // HDF5 1.10 adds the user block to an undefined address of unallocated storage, so the
    // offset counts only when the storage is allocated.
    let allocated = |_: &u64| {
        n_records
            .checked_mul(record as u64)
            .is_some_and(|n| n > 0 && f.ds.storage_size() >= n)
    };
    let Some(off) = f.ds.offset().filter(allocated) else {
        return Ok(Access::Library);
    };
    let end = n_records
        .checked_mul(record as u64)
        .and_then(|n| n.checked_add(off));
    match end {
        Some(e) if e <= file_len => Ok(Access::Contiguous(off)),
        _ => Err(Part::Index.malformed(format!(
            "dataset '{name}': contiguous data at byte {off} runs past the end of the file ({file_len} bytes)"
        ))),
    }
}

/// The notes (appended to `notes`) and the facts of a numeric leaf.
fn numeric_notes_and_facts(d: &DatasetVars<'_>, leaf: &Leaf, notes: &mut Vec<String>) -> Vec<Fact> {
    let mut facts: Vec<Fact> = Vec::new();
    let LeafKind::Numeric {
        ty,
        dtype: et,
        be,
        enum_mapping,
        ..
    } = &leaf.kind
    else {
        return facts;
    };
    if *be && et.size() > 1 {
        notes.push("big-endian on disk; stored little-endian".into());
    }
    if let Kind::Enum { is_bool: true, .. } = ty.kind {
        notes.push("h5py bool: HDF5 enum {FALSE:0, TRUE:1} over int8".into());
    }
    if let Kind::Int { bitfield: true, .. } = ty.kind {
        notes.push("HDF5 bitfield delivered as an unsigned integer".into());
    }
    if let Kind::Int {
        nbit: Some((prec, off)),
        ..
    } = ty.kind
    {
        let bytes = ty.size;
        notes.push(format!(
            "N-bit integer: {prec} bits at bit offset {off} of a {bytes}-byte container, delivered as the container type ({}; libhdf5's conversion, sign-extended when signed)",
            et.name()
        ));
        facts.push(Fact::private(
            "h5",
            "hdf5_nbit",
            AttrValue::Text(format!("precision={prec} offset={off}")),
        ));
    }
    if let Kind::Int { time: true, .. } = ty.kind {
        notes.push(if ty.size == 8 {
            "HDF5 time type (H5T_TIME, 64-bit, PyTables' Time64: seconds in the high 32 bits, microseconds in the low 32): delivered as microseconds since the Unix epoch".to_string()
        } else {
            "HDF5 time type (H5T_TIME, 32-bit, PyTables' Time32): delivered as stored, seconds since the Unix epoch".to_string()
        });
        facts.push(Fact::private(
            "h5",
            "hdf5_time",
            AttrValue::Text(format!("H5T_UNIX_D{}", ty.size * 8)),
        ));
    }
    if let Some(m) = enum_mapping {
        notes.push(
            "HDF5 enum: stored as the underlying integer codes; mapping in enum_mapping".into(),
        );
        facts.push(Fact::EnumMapping(m.clone()));
    }
    let f = d.f;
    if !f.aliases.is_empty() {
        for a in &f.aliases {
            notes.push(format!("also reachable as '{a}' (link)"));
        }
        facts.push(Fact::Aliases(f.aliases.clone()));
    }
    if d.leaves.len() > 1 || !leaf.path.is_empty() {
        facts.push(Fact::SourceDataset(f.name.clone()));
    }
    facts.extend(f.attr_shapes.iter().cloned());
    facts.extend(f.facts.iter().cloned());
    facts
}

/// Why a filter can be decoded neither here nor by libhdf5: names the filter once (`filter
/// blosc2 (id 32026)`, `filter sz (id 32017)`) and where libhdf5 looked for a plugin.
fn filter_unavailable(s: &FilterSpec) -> String {
    let mut named = s.named();
    if s.id == filters::FILTER_BLOSC2 {
        if let Some(why) = filters::blosc2::unsupported_variant(&s.cd_values) {
            named = format!("{named} with {why}");
        }
    }
    let (major, minor, patch) = hdf5::library_version();
    let paths = plugin_paths();
    let searched = if paths.is_empty() {
        "no plugin directories".to_string()
    } else {
        paths.join(":")
    };
    format!(
        "filter {named} has no decoder here and libhdf5 {major}.{minor}.{patch} found no plugin for it (searched {searched}; set HDF5_PLUGIN_PATH to the directory of the filter's plugin, e.g. hdf5plugin's)"
    )
}

/// The directories libhdf5 searches for filter plugins (`HDF5_PLUGIN_PATH`, or its default).
fn plugin_paths() -> Vec<String> {
    use hdf5_sys::h5pl::{H5PLget, H5PLsize};
    hdf5::sync::sync(|| {
        let mut n: std::os::raw::c_uint = 0;
        // SAFETY: H5PLsize writes one unsigned int into `n`; under the library lock.
        if unsafe { H5PLsize(&mut n) } < 0 {
            return Vec::new();
        }
        (0..n.min(64))
            .filter_map(|i| {
                let mut buf = vec![0u8; 4096];
                // SAFETY: `buf` has `buf.len()` writable bytes; libhdf5 writes at most that many,
                // NUL included, and returns the path's length; under the library lock.
                let len = unsafe { H5PLget(i, buf.as_mut_ptr().cast(), buf.len()) };
                let len = usize::try_from(len).ok()?.min(buf.len());
                buf.truncate(len);
                if let Some(p) = buf.iter().position(|&b| b == 0) {
                    buf.truncate(p);
                }
                Some(String::from_utf8_lossy(&buf).into_owned())
            })
            .collect()
    })
}

/// The raw value of a soft or external link.
fn link_value(group: &hdf5::Group, name: &str) -> Option<Vec<u8>> {
    use hdf5_sys::h5l::{H5L_info1_t, H5Lget_info1, H5Lget_val};
    let cname = std::ffi::CString::new(name).ok()?;
    hdf5::sync::sync(|| {
        let mut info = H5L_info1_t::default();
        // SAFETY: under the library lock; `cname` is a live NUL-terminated string and libhdf5
        // writes one `H5L_info1_t` into `info`.
        if unsafe { H5Lget_info1(group.id(), cname.as_ptr(), &mut info, H5P_DEFAULT) } < 0 {
            return None;
        }
        // SAFETY: `val_size` points at the union's 8-byte storage inside `info` (live, aligned
        // for a `size_t`); libhdf5 set that member for soft and external links, the only kinds
        // this is called for, and any bit pattern is a valid `size_t`.
        let size = unsafe { *info.u.val_size() };
        if size == 0 || size > 1 << 20 {
            return None;
        }
        let mut buf = vec![0u8; size];
        // SAFETY: under the library lock; libhdf5 writes at most `size` bytes (the size passed)
        // into `buf`, which is `size` bytes long; `cname` as above.
        let rc = unsafe {
            H5Lget_val(
                group.id(),
                cname.as_ptr(),
                buf.as_mut_ptr().cast(),
                size,
                H5P_DEFAULT,
            )
        };
        if rc < 0 {
            return None;
        }
        let mut v = buf;
        if let Some(p) = v.iter().position(|&b| b == 0) {
            if !matches!(info.type_, hdf5_sys::h5l::H5L_type_t::H5L_TYPE_EXTERNAL) {
                v.truncate(p);
            }
        }
        Some(v)
    })
}

/// The (file, object path) of an external link.
fn external_value(group: &hdf5::Group, name: &str) -> Option<(String, String)> {
    use hdf5_sys::h5l::H5Lunpack_elink_val;
    let v = link_value(group, name)?;
    let len = v.len();
    hdf5::sync::sync(|| {
        let mut flags = 0u32;
        let mut file: *const std::os::raw::c_char = std::ptr::null();
        let mut obj: *const std::os::raw::c_char = std::ptr::null();
        // SAFETY: under the library lock; libhdf5 reads `len` bytes of `v` (its length) and
        // writes one value into each of `flags`, `file` and `obj`.
        let rc =
            unsafe { H5Lunpack_elink_val(v.as_ptr().cast(), len, &mut flags, &mut file, &mut obj) };
        if rc < 0 || file.is_null() || obj.is_null() {
            return None;
        }
        // SAFETY: on success `file` and `obj` point into `v`, which outlives this closure, at
        // NUL-terminated strings: libhdf5 refuses a value whose last byte is not NUL, so both
        // strings end inside `v`.
        let (f, o) = unsafe {
            (
                std::ffi::CStr::from_ptr(file)
                    .to_string_lossy()
                    .into_owned(),
                std::ffi::CStr::from_ptr(obj).to_string_lossy().into_owned(),
            )
        };
        Some((f, o))
    })
}

impl H5Source {
    /// Adds the variable of a numeric leaf (and its read plan).
    fn push_numeric(&mut self, d: &DatasetVars<'_>, leaf: &Leaf, v: LeafVar) {
        let LeafKind::Numeric { dtype, .. } = leaf.kind else {
            return;
        };
        let mut notes = v.notes;
        let facts = numeric_notes_and_facts(d, leaf, &mut notes);
        let role = if d.is_coordinate(v.inner.len()) {
            Role::Coordinate
        } else {
            Role::Data
        };
        let layout = SourceLayout {
            chunk_shape: d.chunk_shape.as_ref().map(|c| {
                let mut c = c.clone();
                c.extend(&v.inner);
                c
            }),
            compressed: d.compressed,
            filters: d.filters.clone(),
        };
        let mut attrs = d.f.attrs.clone();
        time_units(leaf, &mut attrs, &mut notes);
        self.variables.push(Variable {
            name: v.name,
            dtype,
            shape: v.shape,
            dims: v.dims,
            attrs,
            layout,
            role,
            notes,
            facts,
        });
        self.plans.push(Plan {
            entry: d.entry,
            leaf: leaf.clone(),
        });
    }
}

/// The CF `units` and `calendar` of an HDF5 time leaf ([`crate::time`]), unless the dataset has
/// its own (then kept, with a note).
fn time_units(leaf: &Leaf, attrs: &mut Attrs, notes: &mut Vec<String>) {
    let LeafKind::Numeric { ty, .. } = &leaf.kind else {
        return;
    };
    if !matches!(ty.kind, Kind::Int { time: true, .. }) {
        return;
    }
    time_attrs(ty, attrs, notes);
}

/// The CF `units` and `calendar` of HDF5 time values of type `ty`, unless `attrs` has its own
/// (then kept, with a note).
fn time_attrs(ty: &TypeInfo, attrs: &mut Attrs, notes: &mut Vec<String>) {
    let units = if ty.size == 8 {
        time::UNITS_MICROSECONDS
    } else {
        time::UNITS_SECONDS
    };
    for (key, value) in [("units", units), ("calendar", time::CALENDAR)] {
        if attrs.iter().any(|(k, _)| k == key) {
            notes.push(format!(
                "the dataset's own `{key}` kept (HDF5 time values are `{value}`)"
            ));
        } else {
            attrs.push((key.to_string(), AttrValue::Text(value.to_string())));
        }
    }
}
