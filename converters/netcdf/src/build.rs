//! The walk of an opened netCDF file into the model: groups, dimensions, variables (atomic,
//! user-defined: enums, compounds split per field, vlens and opaques), attributes decoded to
//! typed values with the private records export reads back, CF coordinates and packing.

use std::collections::HashSet;
use std::ffi::c_int;

use netcdf_sys as nc;
use tet_source::{
    AttrValue, Attrs, CharAxis, DimLabels, ElementType, Fact, Feature, OpenOptions, Part, Request,
    Result, Role, Skipped, SourceError, SourceLayout, TextVariable, Variable,
};

use crate::cf::Unpacking;
use crate::user::{EnumInfo, NcType};
use crate::values::{as_bytes_mut, atomic, decode_all, join, trim_nuls};
use crate::{cf, export, ffi, ragged, user};
use crate::{
    is_hidden_attr, with_var, DataModel, ReadPlan, VarLoc, ATTR_TYPE, DIM_GROUPS, GROUPS,
    LATIN1_ATTRS, MAX_GROUPS, STRING_ATTRS, TEXT_ENCODING, TEXT_LIMIT, TEXT_TYPE, UNUSED_DIM,
};

/// What the walk produces.
pub(crate) struct Parts {
    pub(crate) model: DataModel,
    pub(crate) variables: Vec<Variable>,
    pub(crate) plans: Vec<ReadPlan>,
    pub(crate) globals: Attrs,
    pub(crate) global_facts: Vec<Fact>,
    pub(crate) texts: Vec<TextVariable>,
    pub(crate) labels: Vec<DimLabels>,
    pub(crate) skipped: Vec<Skipped>,
}

/// A text variable that may label a dimension.
struct LabelCandidate {
    dim: String,
    /// Short name of the variable (as `coordinates` attributes name it).
    var: String,
    /// A 1-D string coordinate variable (as opposed to a 2-D char array).
    string_coord: bool,
    cf_role: bool,
    labels: Vec<String>,
}

/// The kind of a netCDF type.
enum Kind {
    Numeric(ElementType),
    Enum(EnumInfo),
    Char,
    Str,
    /// A compound type ([`NcType::Compound`]): one variable per field.
    Compound(NcType),
    /// A vlen type: its name and base type.
    Vlen(String, NcType),
    /// An opaque type: its name and size.
    Opaque(String, usize),
    Unsupported(String),
}

/// The attributes of one variable or group.
#[derive(Default)]
struct ObjAttrs {
    attrs: Attrs,
    /// Attribute name → its recorded type (see [`UserAttr::record`]).
    types: Vec<(String, String)>,
    /// Notes for the owner (attributes given as JSON text, …).
    notes: Vec<String>,
    /// Single-valued `string` attributes (a `Text` value that is no `char` attribute).
    strings: Vec<String>,
    /// `char`/`string` attributes whose bytes are not UTF-8, decoded as Latin-1.
    latin1: Vec<String>,
}

impl ObjAttrs {
    /// The private facts recording the user types, each attribute named `prefix/name` (the
    /// group path for group attributes, empty for variables and the root group).
    fn type_facts(&self, prefix: &str) -> Vec<Fact> {
        let mut facts: Vec<Fact> = self
            .types
            .iter()
            .map(|(n, t)| {
                Fact::private(
                    "nc",
                    format!("{ATTR_TYPE}{}", join(prefix, n)),
                    AttrValue::Text(t.clone()),
                )
            })
            .collect();
        for (key, names) in [(STRING_ATTRS, &self.strings), (LATIN1_ATTRS, &self.latin1)] {
            if !names.is_empty() {
                let names = names.iter().map(|n| join(prefix, n)).collect();
                facts.push(Fact::private("nc", key, AttrValue::TextList(names)));
            }
        }
        facts
    }
}

/// An attribute read: its value, its recorded type when it is of a user type, and whether its
/// text was decoded as Latin-1.
type AttrRead = (AttrValue, Option<UserAttr>, bool);

/// Why an attribute has no form here (it is then an unsupported item with this reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoForm {
    /// An enum whose base type's values cannot be read.
    #[error("enum attribute of base type {0}")]
    EnumBase(ElementType),
    /// A type with no attribute form (its description).
    #[error("attribute of type {0} has no form")]
    Type(String),
    /// A value of a user type with no JSON text (the type's description, and why).
    #[error("{ty} attribute with {why}")]
    Json {
        /// The type's description.
        ty: String,
        /// Why.
        why: user::NoJson,
    },
    /// A type code netCDF-C reported that is no type it defines.
    #[error("unknown netCDF type code {0}")]
    UnknownType(c_int),
}

/// What is recorded of an attribute of a user type beside its value.
struct UserAttr {
    /// The type as JSON ([`NcType::json`]).
    json: String,
    /// How the value is given.
    note: String,
}

impl UserAttr {
    /// The recorded type: `{"count":<values>,"type":<type JSON>}`.
    fn record(&self, count: usize) -> String {
        format!("{{\"count\":{count},\"type\":{}}}", self.json)
    }
}

/// The values of a text variable (`units` characters, or `values_n` strings) in C order, each
/// `char` row with its trailing NULs removed, decoded alike ([`decode_all`]: `true` when as
/// Latin-1).
fn text_values(
    loc: VarLoc,
    p: &VarParts,
    is_char: bool,
    units: u64,
    values_n: u64,
) -> Result<(Vec<String>, bool)> {
    let context = |e: SourceError| with_var(&p.full, e);
    let too_large = || SourceError::in_variable(&p.full, Request::TooLarge.into());
    let usize_shape: Vec<usize> = p
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| too_large())?;
    let values_n = usize::try_from(values_n).map_err(|_| too_large())?;
    if !is_char {
        let raw: Vec<Vec<u8>> = ffi::get_var_strings(loc.ncid, loc.varid, &usize_shape, values_n)
            .map_err(context)?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        return Ok(decode_all(&raw));
    }
    let mut buf = vec![0u8; usize::try_from(units).map_err(|_| too_large())?];
    if units > 0 {
        let start = vec![0usize; usize_shape.len()];
        ffi::get_vara(loc.ncid, loc.varid, &start, &usize_shape, &mut buf).map_err(context)?;
    }
    let strlen = usize_shape.last().copied().unwrap_or(1);
    if strlen == 0 {
        return Ok((vec![String::new(); values_n], false));
    }
    let rows: Vec<&[u8]> = buf.chunks(strlen).map(trim_nuls).collect();
    Ok(decode_all(&rows))
}

/// Attributes whose values are values of their variable (CF, NUG): a `char` one is a
/// character of the data, NUL included, not text.
fn is_value_attr(name: &str) -> bool {
    matches!(
        name,
        "_FillValue" | "missing_value" | "valid_min" | "valid_max" | "valid_range"
    )
}

fn filter_name(id: u32, params: &[u32]) -> String {
    let level = params.first().map(|l| format!("({l})")).unwrap_or_default();
    match id {
        1 => format!("deflate{level}"),
        2 => "shuffle".into(),
        3 => "fletcher32".into(),
        4 => "szip".into(),
        5 => "nbit".into(),
        6 => "scaleoffset".into(),
        307 => format!("bzip2{level}"),
        32000 => "lzf".into(),
        32001 => "blosc".into(),
        32004 => "lz4".into(),
        32013 => "zfp".into(),
        32015 => format!("zstd{level}"),
        32017 => "sz".into(),
        other => format!("filter {other}"),
    }
}

pub(crate) struct Builder<'o> {
    options: &'o OpenOptions,
    file_len: u64,
    model: DataModel,
    variables: Vec<Variable>,
    plans: Vec<ReadPlan>,
    globals: Attrs,
    /// The recorded types of global and group attributes of user types.
    global_facts: Vec<Fact>,
    pub(crate) texts: Vec<TextVariable>,
    skipped: Vec<Skipped>,
    candidates: Vec<LabelCandidate>,
    /// Variable names listed in `coordinates` attributes.
    coordinate_refs: HashSet<String>,
    /// Unlimited dimension ids of the groups walked so far (ids are file-wide in netCDF-4).
    unlimited: HashSet<c_int>,
    /// Every group's own dimensions: (group path, group id, dimension id).
    group_dims: Vec<(String, c_int, c_int)>,
    /// The dimension ids some variable uses.
    used_dims: HashSet<c_int>,
}

impl<'o> Builder<'o> {
    pub(crate) fn new(options: &'o OpenOptions, file_len: u64) -> Self {
        Builder {
            options,
            file_len,
            model: DataModel::Classic,
            variables: Vec::new(),
            plans: Vec::new(),
            globals: Vec::new(),
            global_facts: Vec::new(),
            texts: Vec::new(),
            skipped: Vec::new(),
            candidates: Vec::new(),
            coordinate_refs: HashSet::new(),
            unlimited: HashSet::new(),
            group_dims: Vec::new(),
            used_dims: HashSet::new(),
        }
    }

    /// Records an unmappable item: an error, or a skipped entry under `skip_unsupported`.
    pub(crate) fn unsupported(
        &mut self,
        name: String,
        feature: Feature,
        reason: String,
    ) -> Result<()> {
        if self.options.skip_unsupported {
            self.skipped.push(Skipped { name, reason });
            Ok(())
        } else {
            Err(feature.unsupported(format!("{name}: {reason}")))
        }
    }

    pub(crate) fn run(mut self, root: c_int) -> Result<Parts> {
        self.model = match ffi::format(root)? {
            nc::NC_FORMAT_CLASSIC => DataModel::Classic,
            nc::NC_FORMAT_64BIT_OFFSET => DataModel::Offset64,
            nc::NC_FORMAT_64BIT_DATA => DataModel::Data64,
            nc::NC_FORMAT_NETCDF4_CLASSIC => DataModel::Netcdf4Classic,
            nc::NC_FORMAT_NETCDF4 => DataModel::Netcdf4,
            other => {
                return Err(Feature::Version.unsupported(format!(
                "netCDF format code {other} (not classic, 64-bit offset, 64-bit data or netCDF-4)"
            )))
            }
        };
        let nc4 = self.model.is_netcdf4();
        let mut stack = vec![(root, String::new())];
        let mut walked = 0usize;
        let mut group_paths = Vec::new();
        while let Some((g, path)) = stack.pop() {
            walked += 1;
            if walked > MAX_GROUPS {
                return Err(Part::Metadata.malformed(format!("more than {MAX_GROUPS} groups")));
            }
            if !path.is_empty() {
                group_paths.push(path.clone());
            }
            let attrs = self.attrs(g, nc::NC_GLOBAL, &path)?;
            self.global_facts.extend(attrs.type_facts(&path));
            // A name holding a `/` (netCDF-C reads those HDF5 writes): where `path` ends.
            self.global_facts.extend(
                attrs
                    .attrs
                    .iter()
                    .filter_map(|(k, _)| Fact::attr_group(&path, k)),
            );
            self.globals
                .extend(attrs.attrs.into_iter().map(|(k, v)| (join(&path, &k), v)));
            self.unlimited.extend(ffi::unlimdims(g)?);
            let dimids = ffi::own_dimids(g)?;
            self.group_dims
                .extend(dimids.iter().map(|&d| (path.clone(), g, d)));
            let own_dims = if nc4 { Some(dimids) } else { None };
            for varid in ffi::varids(g)? {
                self.variable(g, varid, &path, own_dims.as_deref())?;
            }
            if nc4 {
                let kids = ffi::groups(g)?;
                for &k in kids.iter().rev() {
                    let name = ffi::group_name(k)?;
                    stack.push((k, join(&path, &name)));
                }
            }
        }
        self.record_unused_dims()?;
        if !group_paths.is_empty() {
            self.global_facts.push(Fact::private(
                "nc",
                GROUPS,
                AttrValue::TextList(group_paths),
            ));
        }
        let labels = self.resolve_labels();
        Ok(Parts {
            model: self.model,
            variables: self.variables,
            plans: self.plans,
            globals: self.globals,
            global_facts: self.global_facts,
            texts: self.texts,
            labels,
            skipped: self.skipped,
        })
    }

    /// Records the dimensions no variable uses (which no variable would bring back) as the
    /// file facts [`UNUSED_DIM`]`<group/path/name>` = `[length, unlimited 0/1]`.
    fn record_unused_dims(&mut self) -> Result<()> {
        for (path, g, d) in &self.group_dims {
            if self.used_dims.contains(d) {
                continue;
            }
            let (name, len) = ffi::dim(*g, *d)?;
            let unlimited = u64::from(self.unlimited.contains(d));
            self.global_facts.push(Fact::private(
                "nc",
                format!("{UNUSED_DIM}{}", join(path, &name)),
                AttrValue::U64(vec![len, unlimited]),
            ));
        }
        Ok(())
    }

    /// The [`DIM_GROUPS`] fact of a variable of group `path` with dimensions `dimids`, when one
    /// of them is defined in another group (its ancestors are walked before it, so every
    /// dimension it can use is known).
    fn dim_groups(&self, path: &str, dimids: &[c_int]) -> Option<Fact> {
        let groups: Vec<String> = dimids
            .iter()
            .map(|d| {
                self.group_dims
                    .iter()
                    .find(|(_, _, id)| id == d)
                    .map_or_else(|| path.to_string(), |(p, _, _)| p.clone())
            })
            .collect();
        groups
            .iter()
            .any(|g| g != path)
            .then(|| Fact::private("nc", DIM_GROUPS, AttrValue::TextList(groups)))
    }

    /// Dimension labels: string coordinate variables first, then 2-D char arrays (those with a
    /// `cf_role` or named in a `coordinates` attribute first), never for a dimension that has a
    /// numeric coordinate variable, at most one per dimension name.
    fn resolve_labels(&self) -> Vec<DimLabels> {
        let numeric: HashSet<&str> = self
            .variables
            .iter()
            .filter(|v| v.role == Role::Coordinate)
            .filter_map(|v| v.dims.as_ref().and_then(|d| d.first()).map(String::as_str))
            .collect();
        let rank = |c: &LabelCandidate| {
            if c.string_coord {
                0
            } else if c.cf_role || self.coordinate_refs.contains(&c.var) {
                1
            } else {
                2
            }
        };
        let mut order: Vec<usize> = (0..self.candidates.len()).collect();
        order.sort_by_key(|&i| rank(&self.candidates[i])); // stable: file order within a rank
        let mut done: HashSet<String> = HashSet::new();
        let mut out = Vec::new();
        for i in order {
            let c = &self.candidates[i];
            if numeric.contains(c.dim.as_str()) || done.contains(&c.dim) {
                continue;
            }
            done.insert(c.dim.clone());
            out.push(DimLabels {
                dim: c.dim.clone(),
                labels: c.labels.clone(),
            });
        }
        out
    }

    /// The attributes of `varid` (`NC_GLOBAL`: of group `ncid`), hidden ones left out, with
    /// the recorded types of those of user types.
    fn attrs(&mut self, ncid: c_int, varid: c_int, owner: &str) -> Result<ObjAttrs> {
        let n = ffi::natts(ncid, varid)?;
        let mut out = ObjAttrs::default();
        for i in 0..n {
            let (name, cname) = ffi::att_name(ncid, varid, i)?;
            if is_hidden_attr(&name) {
                continue;
            }
            let (xtype, len) = ffi::att_info(ncid, varid, &cname)?;
            match self.attr_value(ncid, varid, &cname, xtype, len, &name, owner)? {
                Ok((v, typed, latin1)) => {
                    if latin1 {
                        out.latin1.push(name.clone());
                    }
                    if xtype == nc::NC_STRING && matches!(v, AttrValue::Text(_)) {
                        out.strings.push(name.clone());
                    }
                    if let Some(t) = typed {
                        out.notes.push(format!(
                            "attribute '{name}': {} ({ATTR_TYPE}{name})",
                            t.note
                        ));
                        out.types.push((name.clone(), t.record(len)));
                    }
                    out.attrs.push((name, v));
                }
                Err(reason) => {
                    let who = if owner.is_empty() {
                        format!("global attribute '{name}'")
                    } else if varid == nc::NC_GLOBAL {
                        format!("attribute '{name}' of group '{owner}'")
                    } else {
                        format!("attribute '{name}' of '{owner}'")
                    };
                    self.unsupported(who, Feature::Attribute, reason.to_string())?;
                }
            }
        }
        Ok(out)
    }

    /// One attribute's value (with its recorded type when it is of a user type, and whether its
    /// text was decoded as Latin-1); the inner `Err` is the reason it has no form here.
    #[allow(clippy::too_many_arguments)]
    fn attr_value(
        &mut self,
        ncid: c_int,
        varid: c_int,
        cname: &[u8],
        xtype: c_int,
        len: usize,
        name: &str,
        owner: &str,
    ) -> Result<std::result::Result<AttrRead, NoForm>> {
        // Attribute values are stored uncompressed in the file: a count the file cannot hold
        // is corrupt, and is refused before anything is allocated for it.
        let unit = match xtype {
            nc::NC_CHAR | nc::NC_STRING => 1,
            t => atomic(t).map_or(1, |e| e.size() as u64),
        };
        if (len as u128) * u128::from(unit) > u128::from(self.file_len.max(64)) {
            return Err(Part::Attribute.malformed(format!(
                "attribute '{name}' of '{owner}' claims {len} values, more than the file holds"
            )));
        }
        if xtype < nc::NC_FIRSTUSERTYPEID {
            return Ok(self
                .attr_builtin(ncid, varid, cname, xtype, len, name)?
                .map(|(v, latin1)| (v, None, latin1)));
        }
        let t = user::analyze(ncid, xtype, self.file_len.max(64))?;
        let (value, note) = match &t {
            NcType::Enum(e) => {
                let Ok((v, _)) = self.attr_builtin(
                    ncid,
                    varid,
                    cname,
                    export::xtype(e.base).unwrap_or(nc::NC_NAT),
                    len,
                    name,
                )?
                else {
                    return Ok(Err(NoForm::EnumBase(e.base)));
                };
                // The codes are read in the enum's own type (the same bytes as its base).
                (
                    v,
                    format!("enum '{}' codes; names in the recorded type", e.name),
                )
            }
            NcType::Compound { .. } | NcType::Vlen { .. } | NcType::Opaque { .. } => {
                match self.attr_json(ncid, varid, cname, &t, len, name, owner)? {
                    Ok(v) => v,
                    Err(why) => return Ok(Err(why)),
                }
            }
            other => return Ok(Err(NoForm::Type(other.describe()))),
        };
        let json = t.json();
        Ok(Ok((value, Some(UserAttr { json, note }), false)))
    }

    /// An attribute of a compound, vlen or opaque type as JSON text, and its note.
    #[allow(clippy::too_many_arguments)]
    fn attr_json(
        &mut self,
        ncid: c_int,
        varid: c_int,
        cname: &[u8],
        t: &NcType,
        len: usize,
        name: &str,
        owner: &str,
    ) -> Result<std::result::Result<(AttrValue, String), NoForm>> {
        let bytes = (len as u128) * (t.size() as u128);
        if bytes > u128::from(self.file_len.max(64)) * 16 {
            return Err(Part::Attribute.malformed(format!(
                "attribute '{name}' of '{owner}' claims {len} values of {} bytes, more than the file holds",
                t.size()
            )));
        }
        if t.size() == 0 {
            return Ok(Err(NoForm::Type(t.describe())));
        }
        let mut rec = user::Records::new(t, len)?;
        if len > 0 {
            ffi::get_att_raw(ncid, varid, cname, rec.fill())?;
            rec.arm();
        }
        // SAFETY: `rec` holds `len` values netCDF read in type `t`, whose allocated parts stay
        // live until `rec` is dropped (after this call).
        let json = match unsafe { user::attr_json(t, rec.bytes(), len) } {
            Ok(j) => j,
            Err(why) => {
                return Ok(Err(NoForm::Json {
                    ty: t.describe(),
                    why,
                }))
            }
        };
        let class = match t {
            NcType::Compound { .. } => "compound",
            NcType::Vlen { .. } => "vlen",
            _ => "opaque",
        };
        Ok(Ok((
            AttrValue::Text(json),
            format!("{class} value given as JSON text"),
        )))
    }

    /// The value of an attribute of a built-in type (`char`, `string`, numbers), and whether
    /// its text was decoded as Latin-1 (bytes that are not UTF-8).
    fn attr_builtin(
        &mut self,
        ncid: c_int,
        varid: c_int,
        cname: &[u8],
        xtype: c_int,
        len: usize,
        name: &str,
    ) -> Result<std::result::Result<(AttrValue, bool), NoForm>> {
        if xtype == nc::NC_CHAR {
            let mut buf = vec![0u8; len];
            ffi::get_att_raw(ncid, varid, cname, &mut buf)?;
            // Text attributes often carry a C string's terminating NUL(s), which are dropped.
            // A variable's value attributes (`_FillValue = '\0'` of a char variable) are data:
            // every byte is kept.
            let bytes = if varid != nc::NC_GLOBAL && is_value_attr(name) {
                &buf[..]
            } else {
                trim_nuls(&buf)
            };
            let (mut v, latin1) = decode_all(&[bytes]);
            return Ok(Ok((AttrValue::Text(v.pop().unwrap_or_default()), latin1)));
        }
        if xtype == nc::NC_STRING {
            let raw: Vec<Vec<u8>> = ffi::get_att_strings(ncid, varid, cname, len)?
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect();
            let (mut v, latin1) = decode_all(&raw);
            let value = if v.len() == 1 {
                AttrValue::Text(v.remove(0))
            } else {
                AttrValue::TextList(v)
            };
            return Ok(Ok((value, latin1)));
        }
        let Some(t) = atomic(xtype) else {
            return Ok(Err(NoForm::UnknownType(xtype)));
        };
        let size = t.size();
        let mut tmp = vec![0u64; (len * size).div_ceil(8).max(1)];
        let bytes = as_bytes_mut(&mut tmp);
        ffi::get_att_raw(ncid, varid, cname, &mut bytes[..len * size])?;
        let b = &bytes[..len * size];
        macro_rules! vals {
            ($v:ident, $ty:ty, $n:literal) => {
                AttrValue::$v(
                    b.chunks_exact($n)
                        .map(|c| {
                            let mut a = [0u8; $n];
                            a.copy_from_slice(c);
                            <$ty>::from_ne_bytes(a)
                        })
                        .collect(),
                )
            };
        }
        let value = match t {
            ElementType::I8 => vals!(I8, i8, 1),
            ElementType::U8 => vals!(U8, u8, 1),
            ElementType::I16 => vals!(I16, i16, 2),
            ElementType::U16 => vals!(U16, u16, 2),
            ElementType::I32 => vals!(I32, i32, 4),
            ElementType::U32 => vals!(U32, u32, 4),
            ElementType::I64 => vals!(I64, i64, 8),
            ElementType::U64 => vals!(U64, u64, 8),
            ElementType::F32 => vals!(F32, f32, 4),
            ElementType::F64 => vals!(F64, f64, 8),
            other => return Ok(Err(NoForm::Type(other.to_string()))),
        };
        Ok(Ok((value, false)))
    }

    /// The kind of type `xtype` (looked up from group `ncid`).
    fn kind(&mut self, ncid: c_int, xtype: c_int) -> Result<Kind> {
        Ok(match user::analyze(ncid, xtype, self.file_len.max(64))? {
            NcType::Atomic(t) => Kind::Numeric(t),
            NcType::Enum(e) => Kind::Enum(e),
            NcType::Char => Kind::Char,
            NcType::Str => Kind::Str,
            t @ NcType::Compound { .. } => Kind::Compound(t),
            NcType::Vlen { name, base } => Kind::Vlen(name, *base),
            NcType::Opaque { name, size } => Kind::Opaque(name, size),
            NcType::Other(reason) => Kind::Unsupported(reason),
        })
    }

    fn variable(
        &mut self,
        g: c_int,
        varid: c_int,
        path: &str,
        own_dims: Option<&[c_int]>,
    ) -> Result<()> {
        let info = ffi::var_info(g, varid)?;
        self.used_dims.extend(info.dimids.iter().copied());
        let full = join(path, &info.name);
        let mut dim_names = Vec::with_capacity(info.dimids.len());
        let mut shape = Vec::with_capacity(info.dimids.len());
        for &d in &info.dimids {
            let (name, len) = ffi::dim(g, d)?;
            dim_names.push(name);
            shape.push(len);
        }
        let obj = self.attrs(g, varid, &full)?;
        let mut attr_facts = obj.type_facts("");
        if let Some(f) = self.dim_groups(path, &info.dimids) {
            attr_facts.push(f);
        }
        let (attrs, attr_notes) = (obj.attrs, obj.notes);
        if let Some(AttrValue::Text(c)) = attrs
            .iter()
            .find(|(k, _)| k == "coordinates")
            .map(|(_, v)| v)
        {
            self.coordinate_refs
                .extend(c.split_whitespace().map(str::to_string));
        }
        let coordinate = info.dimids.len() == 1
            && dim_names[0] == info.name
            && own_dims.is_none_or(|own| own.contains(&info.dimids[0]));
        let unlimited: Vec<String> = info
            .dimids
            .iter()
            .zip(&dim_names)
            .filter(|(d, _)| self.unlimited.contains(d))
            .map(|(_, n)| n.clone())
            .collect();
        let loc = VarLoc {
            ncid: g,
            varid,
            scalar: info.dimids.is_empty(),
        };
        let v = VarParts {
            full,
            short: info.name,
            dim_names,
            shape,
            attrs,
            attr_facts,
            attr_notes,
            coordinate,
            unlimited,
        };
        match self.kind(g, info.xtype)? {
            Kind::Numeric(t) => self.numeric(loc, v, t, None),
            Kind::Enum(e) => {
                let t = e.base;
                self.numeric(loc, v, t, Some(e))
            }
            Kind::Char => self.text(loc, v, true),
            Kind::Str => self.text(loc, v, false),
            Kind::Compound(t) => self.compound(loc, v, t),
            Kind::Vlen(name, base) => self.vlen(loc, v, &name, &base),
            Kind::Opaque(name, size) => self.opaque(loc, v, &name, size),
            Kind::Unsupported(reason) => self.unsupported(v.full, Feature::DataType, reason),
        }
    }

    fn numeric(
        &mut self,
        loc: VarLoc,
        p: VarParts,
        t: ElementType,
        enum_info: Option<EnumInfo>,
    ) -> Result<()> {
        let ndims = p.shape.len();
        let mut v = ragged::base_variable(&loc, p);
        v.dtype = t;
        let mut undecodable = None;
        if self.model.is_netcdf4() && !loc.scalar {
            let (layout, reason) = self.layout(loc, ndims)?;
            v.layout = layout;
            undecodable = reason;
        }
        // Read natively, or (a filter netCDF-C lacks) from the stored chunks once the file is
        // open, when tet-hdf5 decodes them.
        let native = |loc: VarLoc| match &undecodable {
            Some(reason) => ReadPlan::Undecodable(loc, reason.clone()),
            None => ReadPlan::Native(loc),
        };
        if let Some(e) = enum_info {
            v.facts.push(Fact::EnumType(e.name.clone()));
            v.facts.push(Fact::EnumMapping(e.members.clone()));
            v.notes.push(format!(
                "netCDF enum '{}': stored as its underlying {} codes; names in enum_mapping",
                e.name, e.base
            ));
            self.push(v, native(loc));
            return Ok(());
        }
        if self.options.unpack {
            let fill_on = ffi::var_fill_on(loc.ncid, loc.varid).unwrap_or(true);
            match Unpacking::plan(t, &v.attrs, fill_on) {
                Ok(None) => {}
                Ok(Some(u)) => {
                    if let Some(reason) = &undecodable {
                        // Unpacking reads through netCDF-C, which cannot decode this variable.
                        return self.unsupported(v.name, Feature::Codec, reason.clone());
                    }
                    let mut consumed: Vec<&str> = cf::PACKING_ATTRS.to_vec();
                    if u.packed != u.stored {
                        consumed.push("_Unsigned");
                    }
                    let had_fill = Unpacking::has_fill_attrs(&v.attrs);
                    let (dropped, kept): (Attrs, Attrs) = std::mem::take(&mut v.attrs)
                        .into_iter()
                        .partition(|(k, _)| consumed.contains(&k.as_str()));
                    v.attrs = kept;
                    if had_fill {
                        v.attrs.push((
                            "_FillValue".into(),
                            if u.out == ElementType::F32 {
                                AttrValue::F32(vec![f32::NAN])
                            } else {
                                AttrValue::F64(vec![f64::NAN])
                            },
                        ));
                    }
                    v.facts.push(Fact::Unpacked {
                        packed_type: t.name().into(),
                        packing: dropped,
                    });
                    v.notes.push(u.describe());
                    v.dtype = u.out;
                    self.push(v, ReadPlan::Unpack(loc, u));
                    return Ok(());
                }
                Err(reason) => v.notes.push(format!("not CF-unpacked: {reason}")),
            }
        }
        self.push(v, native(loc));
        Ok(())
    }

    pub(crate) fn push(&mut self, v: Variable, plan: ReadPlan) {
        self.variables.push(v);
        self.plans.push(plan);
    }

    /// Storage facts of a netCDF-4 variable, and why netCDF-C cannot read it when one of its
    /// filters has no decoder in this library (then `attach_direct_chunks` reads it from its
    /// stored chunks if tet-hdf5 decodes them, or it is recorded as unsupported).
    pub(crate) fn layout(
        &mut self,
        loc: VarLoc,
        ndims: usize,
    ) -> Result<(SourceLayout, Option<String>)> {
        let chunk_shape = ffi::var_chunking(loc.ncid, loc.varid, ndims)?;
        let f = ffi::var_filters(loc.ncid, loc.varid)?;
        let mut filters = Vec::new();
        if f.shuffle {
            filters.push("shuffle".to_string());
        }
        let mut compressed = false;
        let mut undecodable = None;
        for (id, params, available) in &f.filters {
            if !available {
                undecodable.get_or_insert_with(|| {
                    format!(
                        "compressed with HDF5 filter {id} ({}), which neither this netCDF/HDF5 \
                         library nor tet-convert's own chunk decoders can read here (an HDF5 \
                         plugin for it in HDF5_PLUGIN_PATH lets netCDF-C read it)",
                        filter_name(*id, params)
                    )
                });
            }
            match id {
                2 | 3 => {} // shuffle/fletcher32 are reported by their own queries
                _ => {
                    compressed = true;
                    filters.push(filter_name(*id, params));
                }
            }
        }
        if f.fletcher32 {
            filters.push("fletcher32".to_string());
        }
        Ok((
            SourceLayout {
                chunk_shape,
                compressed,
                filters,
            },
            undecodable,
        ))
    }

    fn text(&mut self, loc: VarLoc, p: VarParts, is_char: bool) -> Result<()> {
        // For char arrays the last axis is the string length.
        let (shape, dims): (Vec<u64>, Vec<String>) = if is_char && !p.shape.is_empty() {
            let n = p.shape.len() - 1;
            (p.shape[..n].to_vec(), p.dim_names[..n].to_vec())
        } else {
            (p.shape.clone(), p.dim_names.clone())
        };
        let product = |s: &[u64]| s.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let units = if is_char {
            product(&p.shape)
        } else {
            product(&shape)
        };
        let values_n = product(&shape);
        let (Some(units), Some(values_n)) = (units, values_n) else {
            return self.unsupported(p.full, Feature::Size, "text variable size overflows".into());
        };
        if units > TEXT_LIMIT || values_n > TEXT_LIMIT {
            return self.unsupported(
                p.full,
                Feature::Size,
                format!(
                    "text variable of {units} {} is too large to keep in the metadata",
                    if is_char { "characters" } else { "strings" }
                ),
            );
        }
        let (values, latin1) = text_values(loc, &p, is_char, units, values_n)?;
        let label_dim = if !is_char && p.coordinate {
            Some((p.dim_names[0].clone(), true))
        } else if is_char && p.shape.len() == 2 {
            Some((p.dim_names[0].clone(), false))
        } else {
            None
        };
        if let Some((dim, string_coord)) = label_dim {
            let labels = values
                .iter()
                .map(|s| {
                    if string_coord {
                        s.clone()
                    } else {
                        s.trim_end_matches(['\0', ' ']).to_string()
                    }
                })
                .collect();
            self.candidates.push(LabelCandidate {
                dim,
                var: p.short.clone(),
                string_coord,
                cf_role: p.attrs.iter().any(|(k, _)| k == "cf_role"),
                labels,
            });
        }
        let char_axis = match (is_char, p.shape.last(), p.dim_names.last()) {
            (true, Some(&len), Some(dim)) => Some(CharAxis {
                dim: dim.clone(),
                len,
            }),
            _ => None,
        };
        let mut facts = p.attr_facts;
        if !p.unlimited.is_empty() {
            facts.push(Fact::UnlimitedDims(p.unlimited));
        }
        if latin1 {
            facts.push(Fact::private(
                "nc",
                TEXT_ENCODING,
                AttrValue::Text("latin1".into()),
            ));
        }
        if is_char && char_axis.is_none() {
            facts.push(Fact::private(
                "nc",
                TEXT_TYPE,
                AttrValue::Text("char".into()),
            ));
        }
        self.texts.push(TextVariable {
            name: p.full,
            shape,
            dims: Some(dims),
            values,
            attrs: p.attrs,
            char_axis,
            facts,
        });
        Ok(())
    }
}

/// A variable's facts gathered before its kind decides what it becomes.
pub(crate) struct VarParts {
    pub(crate) full: String,
    short: String,
    pub(crate) dim_names: Vec<String>,
    pub(crate) shape: Vec<u64>,
    pub(crate) attrs: Attrs,
    /// The recorded types of attributes of user types ([`ATTR_TYPE`] facts).
    pub(crate) attr_facts: Vec<Fact>,
    /// Notes on the attributes (values given as JSON text, …).
    pub(crate) attr_notes: Vec<String>,
    pub(crate) coordinate: bool,
    pub(crate) unlimited: Vec<String>,
}
