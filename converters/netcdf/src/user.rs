//! netCDF-4 user-defined types: their analysis (through `ffi`), the flattening of compound
//! types into one numeric (or text) leaf per field, as the HDF5 importer flattens HDF5
//! compounds, reads of compound records by region, and the JSON form of attribute values of
//! compound, vlen and opaque types.
//!
//! # Memory netCDF allocates
//!
//! Reading a value whose type has `string` or vlen parts (a compound with such a field, a vlen
//! attribute) makes netCDF-C allocate those parts; the read buffer then holds pointers (a
//! `char *`, an `nc_vlen_t`). [`Records`] owns such a buffer and frees every part on drop,
//! innermost first (`reclaim`), so no early return leaks them.

use std::ffi::{c_char, c_int};

use netcdf_sys as nc;
use tet_source::record::{self, GatherError, Parts, Place};
use tet_source::{json_text, ElementType, Part, Request, Result, SourceError};

use crate::ffi;
use crate::values::{atomic, decode_text, int_from_ne, trim_nuls};

/// User types nested deeper than this (compound in compound in vlen …) are not analysed.
const MAX_DEPTH: u32 = 16;

/// Most bytes of JSON text one attribute may become.
pub(crate) const JSON_LIMIT: usize = 64 << 20;

/// An enum type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EnumInfo {
    pub name: String,
    pub base: ElementType,
    pub members: Vec<(String, i128)>,
}

/// A netCDF type, analysed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NcType {
    /// A numeric atomic type.
    Atomic(ElementType),
    Enum(EnumInfo),
    Char,
    Str,
    Compound {
        name: String,
        /// Bytes per record in memory (as `nc_get_vara` delivers them).
        size: usize,
        fields: Vec<Field>,
    },
    Vlen {
        name: String,
        base: Box<NcType>,
    },
    Opaque {
        name: String,
        size: usize,
    },
    /// No form here: the reason.
    Other(String),
}

/// One field of a compound type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    pub name: String,
    pub offset: usize,
    /// Extents of an array field (empty: one value).
    pub dims: Vec<u64>,
    pub ty: NcType,
}

impl NcType {
    /// Bytes of one value in memory.
    pub fn size(&self) -> usize {
        match self {
            NcType::Atomic(t) => t.size(),
            NcType::Enum(e) => e.base.size(),
            NcType::Char => 1,
            NcType::Str => std::mem::size_of::<*mut c_char>(),
            NcType::Compound { size, .. } | NcType::Opaque { size, .. } => *size,
            NcType::Vlen { .. } => std::mem::size_of::<nc::nc_vlen_t>(),
            NcType::Other(_) => 0,
        }
    }

    /// Whether values hold parts netCDF allocates on reading (strings, vlens).
    pub fn indirect(&self) -> bool {
        match self {
            NcType::Str | NcType::Vlen { .. } => true,
            NcType::Compound { fields, .. } => fields.iter().any(|f| f.ty.indirect()),
            _ => false,
        }
    }

    /// The type as JSON (recorded beside attribute values of user types).
    pub fn json(&self) -> String {
        match self {
            NcType::Atomic(t) => json_text::string(t.name()),
            NcType::Char => json_text::string("char"),
            NcType::Str => json_text::string("string"),
            NcType::Enum(e) => {
                let members: Vec<String> = e
                    .members
                    .iter()
                    .map(|(n, v)| format!("{}:{v}", json_text::string(n)))
                    .collect();
                format!(
                    "{{\"class\":\"enum\",\"name\":{},\"base\":{},\"members\":{{{}}}}}",
                    json_text::string(&e.name),
                    json_text::string(e.base.name()),
                    members.join(",")
                )
            }
            NcType::Compound { name, size, fields } => {
                let f: Vec<String> = fields
                    .iter()
                    .map(|f| {
                        let dims = if f.dims.is_empty() {
                            String::new()
                        } else {
                            format!(",\"dims\":{:?}", f.dims)
                        };
                        format!(
                            "{{\"name\":{},\"offset\":{}{dims},\"type\":{}}}",
                            json_text::string(&f.name),
                            f.offset,
                            f.ty.json()
                        )
                    })
                    .collect();
                format!(
                    "{{\"class\":\"compound\",\"name\":{},\"size\":{size},\"fields\":[{}]}}",
                    json_text::string(name),
                    f.join(",")
                )
            }
            NcType::Vlen { name, base } => format!(
                "{{\"class\":\"vlen\",\"name\":{},\"base\":{}}}",
                json_text::string(name),
                base.json()
            ),
            NcType::Opaque { name, size } => format!(
                "{{\"class\":\"opaque\",\"name\":{},\"size\":{size},\"encoding\":\"hex\"}}",
                json_text::string(name)
            ),
            NcType::Other(why) => format!(
                "{{\"class\":\"unknown\",\"reason\":{}}}",
                json_text::string(why)
            ),
        }
    }

    /// A short description for messages (`compound 'obs_t'`, `vlen 'ragged_t' of i16`).
    pub fn describe(&self) -> String {
        match self {
            NcType::Atomic(t) => t.name().to_string(),
            NcType::Enum(e) => format!("enum '{}' of {}", e.name, e.base),
            NcType::Char => "char".into(),
            NcType::Str => "string".into(),
            NcType::Compound { name, size, .. } => format!("compound '{name}' ({size} bytes)"),
            NcType::Vlen { name, base } => format!("vlen '{name}' of {}", base.describe()),
            NcType::Opaque { name, size } => format!("opaque '{name}' ({size} bytes)"),
            NcType::Other(why) => why.clone(),
        }
    }
}

/// Analyses type `xtype` as seen from group `ncid`. `limit` bounds counts the file claims
/// (enum members, compound fields), so a corrupt file cannot make the analysis unbounded.
pub(crate) fn analyze(ncid: c_int, xtype: c_int, limit: u64) -> Result<NcType> {
    analyze_at(ncid, xtype, limit, 0)
}

fn analyze_at(ncid: c_int, xtype: c_int, limit: u64, depth: u32) -> Result<NcType> {
    if let Some(t) = atomic(xtype) {
        return Ok(NcType::Atomic(t));
    }
    match xtype {
        nc::NC_CHAR => return Ok(NcType::Char),
        nc::NC_STRING => return Ok(NcType::Str),
        t if t < nc::NC_FIRSTUSERTYPEID => {
            return Ok(NcType::Other(format!("unknown netCDF type code {t}")))
        }
        _ => {}
    }
    if depth > MAX_DEPTH {
        return Ok(NcType::Other(format!(
            "user types nested more than {MAX_DEPTH} deep"
        )));
    }
    let u = ffi::user_type(ncid, xtype)?;
    Ok(match u.class {
        nc::NC_ENUM => enum_type(ncid, xtype, &u, limit)?,
        nc::NC_COMPOUND => compound_type(ncid, xtype, u, limit, depth)?,
        nc::NC_VLEN => {
            let (name, base) = ffi::vlen(ncid, xtype)?;
            let base = analyze_at(ncid, base, limit, depth + 1)?;
            NcType::Vlen {
                name,
                base: Box::new(base),
            }
        }
        nc::NC_OPAQUE => {
            let (name, size) = ffi::opaque(ncid, xtype)?;
            NcType::Opaque { name, size }
        }
        c => NcType::Other(format!("user type '{}' of unknown class {c}", u.name)),
    })
}

fn enum_type(ncid: c_int, xtype: c_int, u: &ffi::UserType, limit: u64) -> Result<NcType> {
    let Some(base) = atomic(u.base).filter(|b| !matches!(b, ElementType::F32 | ElementType::F64))
    else {
        return Ok(NcType::Other(format!(
            "enum type '{}' has a non-integer base type {}",
            u.name, u.base
        )));
    };
    let n = ffi::enum_len(ncid, xtype)?;
    if n as u64 > limit {
        return Err(Part::Type.malformed(format!("enum type '{}' claims {n} members", u.name)));
    }
    let mut members = Vec::with_capacity(n);
    for i in 0..n {
        let (name, value) = ffi::enum_member(ncid, xtype, i)?;
        members.push((name, int_from_ne(base, &value)));
    }
    Ok(NcType::Enum(EnumInfo {
        name: u.name.clone(),
        base,
        members,
    }))
}

fn compound_type(
    ncid: c_int,
    xtype: c_int,
    u: ffi::UserType,
    limit: u64,
    depth: u32,
) -> Result<NcType> {
    if u.nfields as u64 > limit {
        return Err(Part::Type.malformed(format!(
            "compound type '{}' claims {} fields",
            u.name, u.nfields
        )));
    }
    let mut fields = Vec::with_capacity(u.nfields);
    for i in 0..u.nfields {
        let f = ffi::compound_field(ncid, xtype, i)?;
        let ty = analyze_at(ncid, f.xtype, limit, depth + 1)?;
        let n = f.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let bytes = n.and_then(|n| n.checked_mul(ty.size() as u64));
        let end = bytes.and_then(|b| b.checked_add(f.offset as u64));
        if end.is_none_or(|e| e > u.size as u64) {
            return Ok(NcType::Other(format!(
                "compound type '{}': field '{}' lies outside its {}-byte record",
                u.name, f.name, u.size
            )));
        }
        fields.push(Field {
            name: f.name,
            offset: f.offset,
            dims: f.dims,
            ty,
        });
    }
    Ok(NcType::Compound {
        name: u.name,
        size: u.size,
        fields,
    })
}

/// What one leaf of a compound record delivers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LeafKind {
    /// Numbers (for `C64`/`C128`: where the two parts are, bytes from the element's start).
    Numeric {
        dtype: ElementType,
        enum_info: Option<EnumInfo>,
        complex: Option<Parts>,
    },
    /// `char` values: text, the last inner axis (if any) being the string length.
    Char,
    /// `string` values (a `char *` each): text, one string per element.
    Str,
    /// A vlen of numbers or enums (an `nc_vlen_t` each): a ragged array.
    Vlen {
        /// The vlen type's name.
        name: String,
        /// Its base type ([`NcType::Atomic`] or [`NcType::Enum`]).
        base: NcType,
    },
    /// Nothing deliverable; the reason.
    Unsupported(String),
}

/// One field (or the whole record, for a complex number) of a compound type, with the axes of
/// the array fields on the way to it: its path (empty for the whole record), where its
/// elements lie in the record, what it is and notes for its variable.
pub(crate) type Leaf = record::Leaf<LeafKind>;

/// A failed walk over a leaf's elements (an offset that overflows): a malformed type.
pub(crate) fn malformed(e: GatherError) -> SourceError {
    Part::Type.malformed(format!("compound field: {e}"))
}

/// The leaves of a compound type (a complex compound is one leaf with an empty suffix).
pub(crate) fn flatten(t: &NcType) -> Vec<Leaf> {
    let mut out = Vec::new();
    flatten_at(t, &Place::whole(), Vec::new(), Vec::new(), &mut out);
    out
}

/// Two f32 or two f64 fields named `r`/`i` or `real`/`imag` (either order): a complex number,
/// as the HDF5 importer (and netCDF4-python's `auto_complex`) reads it. The parts' offsets.
fn complex_pair(fields: &[Field]) -> Option<(ElementType, Parts)> {
    let [a, b] = fields else {
        return None;
    };
    let NcType::Atomic(t) = a.ty else {
        return None;
    };
    let complex = t.complex_of()?;
    if b.ty != a.ty || !a.dims.is_empty() || !b.dims.is_empty() {
        return None;
    }
    let (re, im) = match (a.name.as_str(), b.name.as_str()) {
        ("r", "i") | ("real", "imag") => (a, b),
        ("i", "r") | ("imag", "real") => (b, a),
        _ => return None,
    };
    let parts = Parts {
        real: re.offset as u64,
        imag: im.offset as u64,
    };
    Some((complex, parts))
}

fn flatten_at(
    t: &NcType,
    place: &Place,
    path: Vec<String>,
    notes: Vec<String>,
    out: &mut Vec<Leaf>,
) {
    let kind = match t {
        NcType::Atomic(d) => LeafKind::Numeric {
            dtype: *d,
            enum_info: None,
            complex: None,
        },
        NcType::Enum(e) => LeafKind::Numeric {
            dtype: e.base,
            enum_info: Some(e.clone()),
            complex: None,
        },
        NcType::Char => LeafKind::Char,
        NcType::Str => LeafKind::Str,
        NcType::Vlen { name, base } if matches!(**base, NcType::Atomic(_) | NcType::Enum(_)) => {
            LeafKind::Vlen {
                name: name.clone(),
                base: (**base).clone(),
            }
        }
        NcType::Vlen { .. } | NcType::Opaque { .. } => {
            LeafKind::Unsupported(format!("{} field has no tensor form", t.describe()))
        }
        NcType::Other(why) => LeafKind::Unsupported(why.clone()),
        NcType::Compound { name, fields, .. } => match complex_pair(fields) {
            Some((dtype, parts)) => LeafKind::Numeric {
                dtype,
                enum_info: None,
                complex: Some(parts),
            },
            None => {
                for (i, f) in fields.iter().enumerate() {
                    let mut n = notes.clone();
                    let short = tet_source::fields::compound_field_name(&f.name, i, &mut n);
                    n.push(format!(
                        "field '{}' of a compound record (netCDF type '{name}')",
                        f.name
                    ));
                    let at = place
                        .shifted(f.offset as u64)
                        .with_array(&f.dims, f.ty.size() as u64);
                    let mut p = path.clone();
                    p.push(short);
                    flatten_at(&f.ty, &at, p, n, out);
                }
                return;
            }
        },
    };
    out.push(Leaf {
        path,
        place: place.clone(),
        kind,
        notes,
    });
}

/// A buffer of `n` values of type `ty` as netCDF read them; frees their allocated parts when
/// dropped (once `armed`, i.e. after a successful read).
pub(crate) struct Records<'t> {
    buf: Vec<u64>,
    len: usize,
    ty: &'t NcType,
    n: usize,
    armed: bool,
}

impl<'t> Records<'t> {
    /// A zeroed, 8-aligned buffer for `n` values of `ty`.
    pub fn new(ty: &'t NcType, n: usize) -> Result<Records<'t>> {
        let len = n.checked_mul(ty.size()).ok_or(Request::TooLarge)?;
        Ok(Records {
            buf: vec![0u64; len.div_ceil(8)],
            len,
            ty,
            n,
            armed: false,
        })
    }

    /// The buffer to read into (zeroed: null pointers until netCDF writes them).
    pub fn fill(&mut self) -> &mut [u8] {
        &mut crate::values::as_bytes_mut(&mut self.buf)[..self.len]
    }

    /// Marks the buffer as holding what a successful netCDF read put there.
    pub fn arm(&mut self) {
        self.armed = self.ty.indirect();
    }

    /// The bytes of the netCDF `string` (a NUL-terminated `char *` netCDF allocated) at byte
    /// offset `off` of the buffer; empty for a null pointer or before a successful read.
    ///
    /// # Safety
    ///
    /// `off` must be the offset of a `string` element of the records' type (a [`LeafKind::Str`]
    /// leaf's element offset in one of the `n` records): a pointer netCDF wrote there.
    pub unsafe fn string_at(&self, off: usize) -> Vec<u8> {
        if !self.armed || off.saturating_add(std::mem::size_of::<usize>()) > self.len {
            return Vec::new();
        }
        let ptr = usize_at(self.bytes(), off);
        if ptr == 0 {
            return Vec::new();
        }
        // SAFETY: by the caller's contract a `string` lies at `off`, and `armed` says netCDF's
        // read wrote it: a NUL-terminated allocation that lives until this buffer is dropped.
        unsafe { std::ffi::CStr::from_ptr(ptr as *const std::ffi::c_char) }
            .to_bytes()
            .to_vec()
    }

    /// The values (native bytes) of the vlen of `base` at byte offset `off` of the buffer;
    /// empty for a null pointer or before a successful read.
    ///
    /// # Safety
    ///
    /// `off` must be the offset of a vlen of `base` in one of the `n` records (a value netCDF
    /// wrote there).
    pub unsafe fn vlen_values(&self, off: usize, base: &NcType) -> &[u8] {
        if !self.armed || off.saturating_add(2 * std::mem::size_of::<usize>()) > self.len {
            return &[];
        }
        let vl = vlen_at(self.bytes(), off);
        // SAFETY: by the caller's contract a vlen of `base` lies at `off`, read by netCDF
        // (`armed`) and freed only when this buffer is dropped, which the borrow outlives.
        unsafe { vlen_bytes(&vl, base) }
    }

    pub fn bytes(&self) -> &[u8] {
        let len = std::mem::size_of_val(self.buf.as_slice());
        // SAFETY: any u64 is valid as bytes; the slice covers exactly the buffer's memory.
        let all = unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), len) };
        &all[..self.len]
    }
}

impl Drop for Records<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let size = self.ty.size();
        let (ty, n, len) = (self.ty, self.n, self.len);
        let bytes = &crate::values::as_bytes_mut(&mut self.buf)[..len];
        for r in 0..n {
            // SAFETY: the buffer holds `n` values of `ty` from a successful netCDF read
            // (`armed`), whose allocated parts nobody has freed: each is freed once, here.
            unsafe { reclaim(ty, &bytes[r * size..(r + 1) * size], 0) };
        }
    }
}

/// Reads a pointer-sized native value at `off` of `b` (0 when out of bounds).
pub(crate) fn usize_at(b: &[u8], off: usize) -> usize {
    const P: usize = std::mem::size_of::<usize>();
    let mut a = [0u8; P];
    if let Some(s) = b.get(off..off + P) {
        a.copy_from_slice(s);
    }
    usize::from_ne_bytes(a)
}

/// The `nc_vlen_t` at `off` of `b`.
pub(crate) fn vlen_at(b: &[u8], off: usize) -> nc::nc_vlen_t {
    let len = usize_at(b, off);
    let p = usize_at(b, off + std::mem::size_of::<usize>()) as *mut std::ffi::c_void;
    nc::nc_vlen_t { len, p }
}

/// The `len` values of a vlen element's memory, as bytes (empty for a null pointer).
///
/// # Safety
/// `vl` was filled by a netCDF read of a vlen of `base` and is not freed yet.
pub(crate) unsafe fn vlen_bytes<'a>(vl: &nc::nc_vlen_t, base: &NcType) -> &'a [u8] {
    let bytes = vl.len.checked_mul(base.size());
    match bytes {
        Some(n) if !vl.p.is_null() && n > 0 => {
            // SAFETY: netCDF allocated `len` values of `base` at `p` (the caller's contract).
            unsafe { std::slice::from_raw_parts(vl.p.cast::<u8>(), n) }
        }
        _ => &[],
    }
}

/// Frees the parts netCDF allocated for the value of type `t` at `off` of `b`.
///
/// # Safety
/// `b` holds values netCDF read in type `t` (at `off`), whose allocated parts are live and
/// are not used after.
unsafe fn reclaim(t: &NcType, b: &[u8], off: usize) {
    match t {
        NcType::Str => {
            let p = usize_at(b, off) as *mut c_char;
            // SAFETY: a string netCDF allocated (the caller's contract), freed once.
            unsafe { ffi::free_string(p) };
        }
        NcType::Vlen { base, .. } => {
            let vl = vlen_at(b, off);
            if base.indirect() {
                // SAFETY: the vlen's values were read by netCDF and are live.
                let inner = unsafe { vlen_bytes(&vl, base) };
                let s = base.size();
                for k in 0..vl.len.min(inner.len() / s.max(1)) {
                    // SAFETY: the k-th value of the live vlen, of type `base`.
                    unsafe { reclaim(base, inner, k * s) };
                }
            }
            // SAFETY: the vlen netCDF allocated, its nested parts freed just above.
            unsafe { ffi::free_vlen(vl) };
        }
        NcType::Compound { fields, .. } => {
            for f in fields.iter().filter(|f| f.ty.indirect()) {
                // Fields lie inside their record (checked at analysis): no overflow below.
                let n = f
                    .dims
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d as usize));
                let s = f.ty.size();
                for k in 0..n.unwrap_or(0) {
                    // SAFETY: element k of the field, inside the value (checked at analysis).
                    unsafe { reclaim(&f.ty, b, off + f.offset + k * s) };
                }
            }
        }
        _ => {}
    }
}

/// The JSON of the number of type `t` at `off` of `b` (native-endian).
fn json_number(t: ElementType, b: &[u8], off: usize) -> String {
    let mut a = [0u8; 8];
    let n = t.size().min(8);
    if let Some(s) = b.get(off..off + n) {
        a[..n].copy_from_slice(s);
    }
    match t {
        ElementType::F32 => {
            json_text::float(f64::from(f32::from_ne_bytes([a[0], a[1], a[2], a[3]])))
        }
        ElementType::F64 => json_text::float(f64::from_ne_bytes(a)),
        _ => int_from_ne(t, &a).to_string(),
    }
}

/// Why a value of a user type has no JSON text (the attribute is then an unsupported item
/// with this reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoJson {
    /// The JSON would pass [`JSON_LIMIT`].
    #[error("value larger than {JSON_LIMIT} bytes of JSON")]
    TooLarge,
    /// Fewer bytes than the type's size.
    #[error("a truncated value")]
    Truncated,
    /// A `char` field longer than memory's integers.
    #[error("a huge char field")]
    HugeChar,
    /// A part of a type with no JSON form (its description).
    #[error("a part of type {0}")]
    Part(String),
}

/// JSON text with a size limit: `Err` once it grows past [`JSON_LIMIT`].
struct Json {
    out: String,
}

impl Json {
    fn push(&mut self, s: &str) -> std::result::Result<(), NoJson> {
        if self.out.len() + s.len() > JSON_LIMIT {
            return Err(NoJson::TooLarge);
        }
        self.out.push_str(s);
        Ok(())
    }
}

/// Appends the JSON of the value of type `t` at `off` of `b`.
///
/// # Safety
/// `b` holds values netCDF read in type `t` whose allocated parts (strings, vlens) are live.
unsafe fn json_value(
    t: &NcType,
    b: &[u8],
    off: usize,
    j: &mut Json,
) -> std::result::Result<(), NoJson> {
    if b.len() < off.saturating_add(t.size()) {
        return Err(NoJson::Truncated);
    }
    match t {
        NcType::Atomic(e) => j.push(&json_number(*e, b, off)),
        NcType::Enum(e) => j.push(&json_number(e.base, b, off)),
        NcType::Char => j.push(&json_text::string(&decode_text(trim_nuls(
            &b[off..off + 1],
        )))),
        NcType::Str => {
            let p = usize_at(b, off) as *const c_char;
            if p.is_null() {
                return j.push("null");
            }
            // SAFETY: a live NUL-terminated string netCDF allocated (the caller's contract).
            let s = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
            j.push(&json_text::string(&decode_text(s)))
        }
        NcType::Opaque { size, .. } => {
            let hex: String = b[off..off + size]
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            j.push(&json_text::string(&hex))
        }
        NcType::Vlen { base, .. } => {
            let vl = vlen_at(b, off);
            // SAFETY: a live vlen of `base` read by netCDF (the caller's contract).
            let inner = unsafe { vlen_bytes(&vl, base) };
            j.push("[")?;
            let s = base.size();
            for k in 0..vl.len.min(inner.len() / s.max(1)) {
                if k > 0 {
                    j.push(",")?;
                }
                // SAFETY: value k of the live vlen.
                unsafe { json_value(base, inner, k * s, j) }?;
            }
            j.push("]")
        }
        NcType::Compound { fields, .. } => {
            j.push("{")?;
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    j.push(",")?;
                }
                j.push(&json_text::string(&f.name))?;
                j.push(":")?;
                // SAFETY: the field inside the live value (bounds checked at analysis).
                unsafe { json_array(&f.ty, &f.dims, b, off + f.offset, j) }?;
            }
            j.push("}")
        }
        NcType::Other(why) => Err(NoJson::Part(why.clone())),
    }
}

/// Appends the JSON of an array of extents `dims` of `t` at `off` of `b` (one value for no
/// dims); `char` arrays are strings along their last axis.
///
/// # Safety
/// As for [`json_value`].
unsafe fn json_array(
    t: &NcType,
    dims: &[u64],
    b: &[u8],
    off: usize,
    j: &mut Json,
) -> std::result::Result<(), NoJson> {
    if *t == NcType::Char && dims.len() == 1 {
        let n = usize::try_from(dims[0]).map_err(|_| NoJson::HugeChar)?;
        let s = b.get(off..off + n).ok_or(NoJson::Truncated)?;
        return j.push(&json_text::string(&decode_text(trim_nuls(s))));
    }
    let Some((&d, rest)) = dims.split_first() else {
        // SAFETY: one value at `off` (the caller's contract).
        return unsafe { json_value(t, b, off, j) };
    };
    let stride = rest
        .iter()
        .fold(t.size(), |a, &x| a.saturating_mul(x as usize));
    j.push("[")?;
    for k in 0..d as usize {
        if k > 0 {
            j.push(",")?;
        }
        // SAFETY: sub-array k, inside the value (the caller's contract).
        unsafe { json_array(t, rest, b, off + k * stride, j) }?;
    }
    j.push("]")
}

/// The JSON of `n` attribute values of type `t` read by netCDF into `b`: the value itself for
/// one value, else an array of them.
///
/// # Safety
/// As for [`json_value`].
pub(crate) unsafe fn attr_json(
    t: &NcType,
    b: &[u8],
    n: usize,
) -> std::result::Result<String, NoJson> {
    let mut j = Json { out: String::new() };
    let s = t.size();
    if n == 1 {
        // SAFETY: the one value (the caller's contract).
        unsafe { json_value(t, b, 0, &mut j) }?;
        return Ok(j.out);
    }
    j.push("[")?;
    for k in 0..n {
        if k > 0 {
            j.push(",")?;
        }
        // SAFETY: value k (the caller's contract).
        unsafe { json_value(t, b, k * s, &mut j) }?;
    }
    j.push("]")?;
    Ok(j.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, offset: usize, ty: NcType) -> Field {
        Field {
            name: name.into(),
            offset,
            dims: Vec::new(),
            ty,
        }
    }

    #[test]
    fn flatten_names_and_axes() {
        let inner = NcType::Compound {
            name: "in_t".into(),
            size: 4,
            fields: vec![field("u", 0, NcType::Atomic(ElementType::U16))],
        };
        let mut arr = field("pos", 8, NcType::Atomic(ElementType::F32));
        arr.dims = vec![2, 3];
        let t = NcType::Compound {
            name: "t".into(),
            size: 40,
            fields: vec![
                field("a/b", 0, NcType::Atomic(ElementType::I32)),
                field("in", 4, inner),
                arr,
            ],
        };
        let l = flatten(&t);
        let s: Vec<String> = l.iter().map(|l| l.suffix()).collect();
        assert_eq!(s, ["/a_b", "/in/u", "/pos"]);
        assert_eq!(l[1].place.offset, 4);
        assert_eq!(l[2].place.inner, vec![(2, 12), (3, 4)]);
        assert!(l[0].notes[0].contains("renamed 'a_b'"));
    }

    #[test]
    fn complex_pairs() {
        let t = NcType::Compound {
            name: "c".into(),
            size: 16,
            fields: vec![
                field("i", 0, NcType::Atomic(ElementType::F64)),
                field("r", 8, NcType::Atomic(ElementType::F64)),
            ],
        };
        let l = flatten(&t);
        assert_eq!(l.len(), 1);
        assert_eq!(
            l[0].kind,
            LeafKind::Numeric {
                dtype: ElementType::C128,
                enum_info: None,
                complex: Some(Parts { real: 8, imag: 0 })
            }
        );
    }

    #[test]
    fn json_of_a_record() {
        let mut arr = field("v", 4, NcType::Atomic(ElementType::I16));
        arr.dims = vec![2];
        let t = NcType::Compound {
            name: "t".into(),
            size: 16,
            fields: vec![
                field("a", 0, NcType::Atomic(ElementType::F32)),
                arr,
                field(
                    "o",
                    8,
                    NcType::Opaque {
                        name: "o_t".into(),
                        size: 2,
                    },
                ),
            ],
        };
        let mut b = vec![0u8; 16];
        b[..4].copy_from_slice(&1.5f32.to_ne_bytes());
        b[4..6].copy_from_slice(&(-2i16).to_ne_bytes());
        b[6..8].copy_from_slice(&7i16.to_ne_bytes());
        b[8] = 0xab;
        b[9] = 0x01;
        // SAFETY: no allocated parts in this type.
        let j = unsafe { attr_json(&t, &b, 1) }.unwrap();
        assert_eq!(j, r#"{"a":1.5,"v":[-2,7],"o":"ab01"}"#);
    }
}
