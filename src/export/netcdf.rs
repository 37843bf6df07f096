//! NetCDF-4 export through the system netCDF-C (`netcdf-sys`), behind the `netcdf` feature.
//!
//! - Groups for every `/` level of the array names; a global attribute named `group/name` (the
//!   NetCDF importer's record of a group attribute) goes back to that group.
//! - Dimensions from the `.tet` `dim_names`. Coordinate variables are defined first, so their
//!   dimension lives in their own group; any other variable reuses a dimension of the same name
//!   and length visible from its group (its own or an ancestor), else defines it in its own
//!   group. A name already taken in that group with another length becomes `<name>_<length>`.
//!   Arrays without dimension names get `<variable>_dim<k>`. A dimension the source had as
//!   unlimited (NetCDF importer fact `unlimited_dims`) is unlimited again.
//! - Element types: netCDF has no bool (kept as `ubyte` 0/1 with the attribute
//!   `dtype = "bool"`, which xarray decodes to booleans), no f16 (exported as exact f32), no
//!   complex (the `<x>/real` and `<x>/imag` variables stay, in group `<x>`). i8 goes back to
//!   `byte`.
//! - Attributes with their recorded netCDF types (`Text` → `char`, `TextList` → `string`).
//!   A `_FillValue` whose type differs from the variable's is left out with a warning.
//! - The global `history` attribute gets one text line per `.tet` history row, after any
//!   existing text.
//! - Storage: chunked along the `.tet` chunk shape; zlib (`deflate`, default level 4, with the
//!   shuffle filter for multi-byte types), zstd (HDF5 filter 32015, only when this netCDF-C has
//!   the zstd plugin: Debian's 4.9.0 does not) or none.
//! - String variables (`tet_ext.text_variables`) become `string` variables; those that were
//!   `char` arrays (the entry's `char_dim`) come back as `char` with their string-length
//!   dimension.
//! - Data is written one `.tet` chunk at a time with `nc_put_vara` at the chunk's region.
//!
//! Every library call holds the process-wide netCDF/HDF5 lock ([`tet_netcdf::locked`]). The file
//! is created under a temporary name beside the output and renamed into place after `nc_close`.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

use netcdf_sys as nc;
use tet_source::{AttrValue, TextVariable};

use super::{
    commit, grid_coords, history_lines, parent_dir, split_group, Array, ChunkSource, Compression,
    Elem, ExportError, Plan, Result,
};
use crate::format::TetFile;

/// HDF5's registered id of the zstd filter.
const H5Z_FILTER_ZSTD: u32 = 32015;

fn strerror(code: c_int) -> String {
    // SAFETY: nc_strerror returns a static NUL-terminated string for any code.
    let p = unsafe { nc::nc_strerror(code) };
    if p.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-null, static, NUL-terminated.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// Runs one library call under the lock; a non-zero code becomes an error naming `what`.
fn call(what: impl FnOnce() -> String, f: impl FnOnce() -> c_int) -> Result<()> {
    let code = tet_netcdf::locked(f);
    if code == nc::NC_NOERR {
        Ok(())
    } else {
        let msg = tet_netcdf::locked(|| strerror(code));
        Err(ExportError::Target(format!("netCDF: {}: {msg}", what())))
    }
}

fn cname(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| ExportError::Invalid(format!("name {s:?} holds a NUL byte")))
}

fn xtype(e: Elem) -> Option<nc::nc_type> {
    Some(match e {
        Elem::I8 => nc::NC_BYTE,
        Elem::U8 | Elem::Bool => nc::NC_UBYTE,
        Elem::I16 => nc::NC_SHORT,
        Elem::U16 => nc::NC_USHORT,
        Elem::I32 => nc::NC_INT,
        Elem::U32 => nc::NC_UINT,
        Elem::I64 => nc::NC_INT64,
        Elem::U64 => nc::NC_UINT64,
        Elem::F32 => nc::NC_FLOAT,
        Elem::F64 => nc::NC_DOUBLE,
        Elem::F16 | Elem::C64 | Elem::C128 => return None,
    })
}

/// The netCDF type and little-endian bytes of a numeric attribute value.
fn att_bytes(v: &AttrValue) -> Option<(nc::nc_type, usize, Vec<u8>)> {
    macro_rules! le {
        ($t:expr, $xs:expr) => {
            Some((
                $t,
                $xs.len(),
                $xs.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            ))
        };
    }
    match v {
        AttrValue::I8(x) => le!(nc::NC_BYTE, x),
        AttrValue::U8(x) => le!(nc::NC_UBYTE, x),
        AttrValue::I16(x) => le!(nc::NC_SHORT, x),
        AttrValue::U16(x) => le!(nc::NC_USHORT, x),
        AttrValue::I32(x) => le!(nc::NC_INT, x),
        AttrValue::U32(x) => le!(nc::NC_UINT, x),
        AttrValue::I64(x) => le!(nc::NC_INT64, x),
        AttrValue::U64(x) => le!(nc::NC_UINT64, x),
        AttrValue::F32(x) => le!(nc::NC_FLOAT, x),
        AttrValue::F64(x) => le!(nc::NC_DOUBLE, x),
        AttrValue::Text(_) | AttrValue::TextList(_) => None,
    }
}

/// Writes one attribute on `varid` (`NC_GLOBAL` for a group's own).
fn put_att(ncid: c_int, varid: c_int, name: &str, v: &AttrValue, owner: &str) -> Result<()> {
    let cn = cname(name)?;
    let what = || format!("attribute `{name}` of {owner}");
    match v {
        AttrValue::Text(s) => call(what, || unsafe {
            // SAFETY: `s` is valid for `s.len()` bytes; the name is NUL-terminated.
            nc::nc_put_att_text(ncid, varid, cn.as_ptr(), s.len(), s.as_ptr().cast())
        }),
        AttrValue::TextList(l) => {
            let cs: Vec<CString> = l.iter().map(|s| cname(s)).collect::<Result<_>>()?;
            let mut ptrs: Vec<*const c_char> = cs.iter().map(|c| c.as_ptr()).collect();
            call(what, || unsafe {
                // SAFETY: `ptrs` holds `ptrs.len()` NUL-terminated strings alive in `cs`.
                nc::nc_put_att_string(ncid, varid, cn.as_ptr(), ptrs.len(), ptrs.as_mut_ptr())
            })
        }
        v => {
            let Some((t, n, bytes)) = att_bytes(v) else {
                return Ok(());
            };
            call(what, || unsafe {
                // SAFETY: `bytes` holds `n` native-endian values of type `t`.
                nc::nc_put_att(
                    ncid,
                    varid,
                    cn.as_ptr(),
                    t,
                    n,
                    bytes.as_ptr().cast::<c_void>(),
                )
            })
        }
    }
}

/// An open file being written; closed (and on failure removed) on drop.
struct NcFile {
    ncid: c_int,
    open: bool,
}

impl Drop for NcFile {
    fn drop(&mut self) {
        if self.open {
            // SAFETY: ncid was returned by nc_create and is closed once.
            let _ = tet_netcdf::locked(|| unsafe { nc::nc_close(self.ncid) });
        }
    }
}

/// Removes the temporary file unless disarmed.
struct Cleanup(Option<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Dimensions defined so far: (group path, name) → (dimid, length).
#[derive(Default)]
struct Dims {
    by_group: HashMap<(String, String), (c_int, u64)>,
}

impl Dims {
    /// The dimension `name` of length `len` seen from `group`, defined there when needed.
    fn get(
        &mut self,
        groups: &Groups,
        group: &str,
        name: &str,
        len: u64,
        unlimited: bool,
    ) -> Result<c_int> {
        // Visible from the group: the nearest definition of the name.
        let mut g = group;
        loop {
            if let Some(&(id, l)) = self.by_group.get(&(g.to_string(), name.to_string())) {
                if l == len {
                    return Ok(id);
                }
                break;
            }
            if g.is_empty() {
                break;
            }
            g = split_group(g).0;
        }
        // Define it here, under a free name.
        let mut n = name.to_string();
        loop {
            match self.by_group.get(&(group.to_string(), n.clone())) {
                Some(&(id, l)) if l == len => return Ok(id),
                Some(_) => n = format!("{n}_{len}"),
                None => break,
            }
        }
        let gid = groups.id(group)?;
        let cn = cname(&n)?;
        let size = if unlimited {
            0 // NC_UNLIMITED: grows with the writes
        } else {
            usize::try_from(len)
                .map_err(|_| ExportError::Invalid(format!("dimension `{n}` too long")))?
        };
        let mut id = 0;
        call(
            || format!("define dimension `{n}` ({len}) in group `/{group}`"),
            || unsafe {
                // SAFETY: NUL-terminated name, valid out pointer.
                nc::nc_def_dim(gid, cn.as_ptr(), size, &mut id)
            },
        )?;
        self.by_group.insert((group.to_string(), n), (id, len));
        Ok(id)
    }
}

/// Groups by path (root = "").
struct Groups {
    ids: HashMap<String, c_int>,
}

impl Groups {
    fn id(&self, path: &str) -> Result<c_int> {
        self.ids
            .get(path)
            .copied()
            .ok_or_else(|| ExportError::Invalid(format!("no group `{path}`")))
    }

    fn ensure(&mut self, path: &str) -> Result<c_int> {
        if let Some(&id) = self.ids.get(path) {
            return Ok(id);
        }
        let (parent, short) = split_group(path);
        let pid = self.ensure(parent)?;
        let cn = cname(short)?;
        let mut id = 0;
        call(
            || format!("define group `/{path}`"),
            || unsafe {
                // SAFETY: NUL-terminated name, valid out pointer.
                nc::nc_def_grp(pid, cn.as_ptr(), &mut id)
            },
        )?;
        self.ids.insert(path.to_string(), id);
        Ok(id)
    }
}

/// A string variable defined, waiting for its values.
struct TextVar {
    name: String,
    gid: c_int,
    varid: c_int,
    count: Vec<usize>,
    values: Vec<String>,
    /// Characters per string when the variable is a `char` array (its last axis).
    char_len: Option<usize>,
}

/// Defines a `tet_ext.text_variables` entry as a netCDF `string` variable, or, when the entry
/// records a `char_dim` (the source was a `char` array), as a `char` variable with that
/// string-length dimension last. `None` when the entry is malformed.
fn define_text(
    t: &serde_json::Value,
    groups: &mut Groups,
    dims: &mut Dims,
) -> Result<Option<TextVar>> {
    let Some(TextVariable {
        name,
        shape,
        dims: dim_names,
        values,
        attrs,
        char_axis,
    }) = crate::meta::text_variable_from_json(t)
    else {
        return Ok(None);
    };
    // A `char` array's string-length axis, when every value fits it (otherwise the values,
    // exact either way, come back as `string`).
    let char_dim = char_axis.and_then(|c| {
        let len = usize::try_from(c.len).ok()?;
        values
            .iter()
            .all(|v| v.len() <= len)
            .then_some((c.dim, len))
    });
    let name = name.as_str();
    let (g, short) = split_group(name);
    let gid = groups.ensure(g)?;
    let mut dimids = Vec::new();
    for (k, &len) in shape.iter().enumerate() {
        let d = match &dim_names {
            Some(d) => d[k].clone(),
            None => format!("{short}_dim{k}"),
        };
        dimids.push(dims.get(groups, g, &d, len, false)?);
    }
    if let Some((d, len)) = &char_dim {
        dimids.push(dims.get(groups, g, d, *len as u64, false)?);
    }
    let xtype = if char_dim.is_some() {
        nc::NC_CHAR
    } else {
        nc::NC_STRING
    };
    let cn = cname(short)?;
    let mut varid = 0;
    call(
        || format!("define string variable `{name}`"),
        || unsafe {
            // SAFETY: `dimids` holds its length of ids; NUL-terminated name; out pointer.
            nc::nc_def_var(
                gid,
                cn.as_ptr(),
                xtype,
                dimids.len() as c_int,
                dimids.as_ptr(),
                &mut varid,
            )
        },
    )?;
    for (k, v) in &attrs {
        put_att(gid, varid, k, v, &format!("variable `{name}`"))?;
    }
    Ok(Some(TextVar {
        name: name.to_string(),
        gid,
        varid,
        count: shape.iter().map(|&d| d as usize).collect(),
        values,
        char_len: char_dim.map(|(_, len)| len),
    }))
}

/// Writes the plan as a netCDF-4 file at `output`.
pub(crate) fn write(
    tet: &TetFile,
    plan: &Plan,
    output: &Path,
    compression: Compression,
) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    let parent = parent_dir(output);
    let tmp = parent.join(format!(
        ".{}.tet-export-{}",
        output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut cleanup = Cleanup(Some(tmp.clone()));
    let cpath = cname(&tmp.to_string_lossy())?;
    let mut file = NcFile {
        ncid: 0,
        open: false,
    };
    call(
        || format!("create {}", tmp.display()),
        || unsafe {
            // SAFETY: NUL-terminated path, valid out pointer.
            nc::nc_create(
                cpath.as_ptr(),
                nc::NC_NETCDF4 | nc::NC_CLOBBER,
                &mut file.ncid,
            )
        },
    )?;
    file.open = true;
    let root = file.ncid;
    if let Compression::Zstd(_) = compression {
        // SAFETY: plain query on an open file.
        let code = tet_netcdf::locked(|| unsafe { nc::nc_inq_filter_avail(root, H5Z_FILTER_ZSTD) });
        if code != nc::NC_NOERR {
            return Err(ExportError::Invalid(
                "this netCDF-C library has no zstd filter (HDF5 plugin 32015); use --compress zlib"
                    .into(),
            ));
        }
    }
    let mut groups = Groups {
        ids: HashMap::from([(String::new(), root)]),
    };
    for a in &plan.arrays {
        groups.ensure(split_group(&a.name).0)?;
    }
    // Coordinates first, so their dimensions live in their groups.
    let mut order: Vec<&Array> = plan.arrays.iter().filter(|a| a.coordinate).collect();
    order.extend(plan.arrays.iter().filter(|a| !a.coordinate));
    let mut dims = Dims::default();
    let mut vars: Vec<(&Array, c_int, c_int)> = Vec::new();
    for a in order {
        let (g, short) = split_group(&a.name);
        let gid = groups.id(g)?;
        let t = xtype(a.elem).ok_or_else(|| {
            ExportError::Invalid(format!(
                "`{}`: netCDF has no {} type",
                a.name,
                a.elem.name()
            ))
        })?;
        let mut dimids = Vec::with_capacity(a.shape.len());
        for (k, &len) in a.shape.iter().enumerate() {
            let name = match &a.dims {
                Some(d) => d[k].clone(),
                None => format!("{short}_dim{k}"),
            };
            let unlimited = a.unlimited_dims.contains(&name);
            dimids.push(dims.get(&groups, g, &name, len, unlimited)?);
        }
        let cn = cname(short)?;
        let mut varid = 0;
        let ndims = dimids.len() as c_int;
        call(
            || format!("define variable `{}`", a.name),
            || unsafe {
                // SAFETY: `dimids` holds `ndims` ids; NUL-terminated name; valid out pointer.
                nc::nc_def_var(gid, cn.as_ptr(), t, ndims, dimids.as_ptr(), &mut varid)
            },
        )?;
        let sized = !a.shape.is_empty() && !a.shape.contains(&0);
        if sized {
            let chunks: Vec<usize> = a
                .chunk_shape
                .iter()
                .zip(&a.shape)
                .map(|(&c, &s)| c.min(s) as usize)
                .collect();
            call(
                || format!("chunk variable `{}`", a.name),
                || unsafe {
                    // SAFETY: one chunk size per dimension.
                    nc::nc_def_var_chunking(gid, varid, nc::NC_CHUNKED, chunks.as_ptr())
                },
            )?;
            let shuffle = c_int::from(a.elem.size() > 1);
            match compression {
                Compression::None => {}
                Compression::Default | Compression::Zlib(_) => {
                    let level = match compression {
                        Compression::Zlib(l) => l as c_int,
                        _ => 4,
                    };
                    call(
                        || format!("deflate variable `{}`", a.name),
                        || unsafe { nc::nc_def_var_deflate(gid, varid, shuffle, 1, level) },
                    )?;
                }
                Compression::Zstd(l) => {
                    let params = [l as u32];
                    call(
                        || format!("zstd filter on variable `{}`", a.name),
                        || unsafe {
                            // SAFETY: one parameter.
                            nc::nc_def_var_filter(gid, varid, H5Z_FILTER_ZSTD, 1, params.as_ptr())
                        },
                    )?;
                }
            }
        }
        let mut has_fill = false;
        for (k, v) in &a.attrs {
            if k == "_FillValue" {
                if att_bytes(v).map(|(ty, n, _)| (ty, n)) != Some((t, 1)) {
                    warnings.push(format!(
                        "`{}`: _FillValue {v:?} is not one {} value; left out",
                        a.name,
                        a.elem.name()
                    ));
                    continue;
                }
                has_fill = true;
            }
            put_att(gid, varid, k, v, &format!("variable `{}`", a.name))?;
        }
        if !has_fill && sized {
            // Every element is written: no need for HDF5 to pre-fill the chunks.
            call(
                || format!("fill mode of variable `{}`", a.name),
                || unsafe { nc::nc_def_var_fill(gid, varid, 1, std::ptr::null()) },
            )?;
        }
        vars.push((a, gid, varid));
    }
    // Global attributes (`group/name` back to its group) and the history.
    let mut history = None;
    for (k, v) in &plan.global_attrs {
        if k == "history" {
            history = Some(v.clone());
            continue;
        }
        // `group/name`: an attribute of that group (netCDF names cannot hold a `/`). A group
        // with attributes but no variables is created, unless only some datasets are exported.
        let (g, short) = split_group(k);
        if g.is_empty() {
            put_att(root, nc::NC_GLOBAL, k, v, "the file")?;
        } else if groups.ids.contains_key(g) || !plan.subset {
            let gid = groups.ensure(g)?;
            put_att(gid, nc::NC_GLOBAL, short, v, &format!("group `/{g}`"))?;
        }
    }
    let lines = history_lines(&plan.history);
    let history = match (history, lines.is_empty()) {
        (Some(AttrValue::Text(old)), false) => {
            let sep = if old.is_empty() || old.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            Some(AttrValue::Text(format!("{old}{sep}{}", lines.join("\n"))))
        }
        (None, false) => Some(AttrValue::Text(lines.join("\n"))),
        (h, _) => h,
    };
    if let Some(h) = history {
        put_att(root, nc::NC_GLOBAL, "history", &h, "the file")?;
    }
    let mut strings = Vec::new();
    for t in &plan.text_variables {
        match define_text(t, &mut groups, &mut dims)? {
            Some(v) => strings.push(v),
            None => warnings.push(format!(
                "string variable `{}` is malformed in the footer; left out",
                t.get("name").and_then(|n| n.as_str()).unwrap_or("?")
            )),
        }
    }
    call(
        || "end of definitions".into(),
        || unsafe { nc::nc_enddef(root) },
    )?;
    for v in &strings {
        if let Some(len) = v.char_len {
            // Each string NUL-padded to the string length, in C order (as netCDF-C writes them).
            let mut text = vec![0u8; v.values.len() * len];
            for (row, s) in text.chunks_mut(len.max(1)).zip(&v.values) {
                row[..s.len()].copy_from_slice(s.as_bytes());
            }
            let mut count = v.count.clone();
            count.push(len);
            let start = vec![0usize; count.len()];
            call(
                || format!("write char variable `{}`", v.name),
                || unsafe {
                    // SAFETY: `text` holds product(count) bytes.
                    nc::nc_put_vara_text(
                        v.gid,
                        v.varid,
                        start.as_ptr(),
                        count.as_ptr(),
                        text.as_ptr().cast(),
                    )
                },
            )?;
            continue;
        }
        let cs: Vec<CString> = v.values.iter().map(|s| cname(s)).collect::<Result<_>>()?;
        let mut ptrs: Vec<*const c_char> = cs.iter().map(|c| c.as_ptr()).collect();
        let start = vec![0usize; v.count.len()];
        call(
            || format!("write string variable `{}`", v.name),
            || unsafe {
                // SAFETY: `ptrs` holds product(count) NUL-terminated strings alive in `cs`.
                nc::nc_put_vara_string(
                    v.gid,
                    v.varid,
                    start.as_ptr(),
                    v.count.as_ptr(),
                    ptrs.as_mut_ptr(),
                )
            },
        )?;
    }

    let mut src = ChunkSource::new(tet);
    for (a, gid, varid) in vars {
        let scalar = a.shape.is_empty();
        for coords in grid_coords(tet, a.ds) {
            let c = src.chunk(a, &coords)?;
            let (start, count): (Vec<usize>, Vec<usize>) = if scalar {
                (Vec::new(), Vec::new())
            } else {
                (
                    c.start.iter().map(|&v| v as usize).collect(),
                    c.count.iter().map(|&v| v as usize).collect(),
                )
            };
            let bytes = c.bytes;
            call(
                || format!("write `{}` chunk {coords:?}", a.name),
                || unsafe {
                    // SAFETY: `bytes` holds exactly the C-order values of the region, in the
                    // variable's type, little-endian (this is a little-endian build target).
                    nc::nc_put_vara(
                        gid,
                        varid,
                        start.as_ptr(),
                        count.as_ptr(),
                        bytes.as_ptr().cast::<c_void>(),
                    )
                },
            )?;
        }
    }
    file.open = false;
    call(
        || format!("close {}", tmp.display()),
        || unsafe { nc::nc_close(root) },
    )?;
    commit(&tmp, output)?;
    cleanup.0 = None;
    Ok(warnings)
}
