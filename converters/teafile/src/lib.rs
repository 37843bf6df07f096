//! TeaFile (`.tea`) importer for tet-convert.
//!
//! A TeaFile (TeaFile 1.0, DiscreteLogics 2012) is a header — magic, ItemStart, ItemEnd,
//! SectionCount, then optional sections — followed by an area of fixed-size binary items. The
//! item section describes the fields of an item (type, offset, name); the time section names the
//! time fields and how their ticks map to dates; the content and name/value sections hold
//! descriptive metadata.
//!
//! # Mapping
//!
//! * **Variables**: one per item field, in field order, named by the field name, shape
//!   `[item_count]`, element type from the field type (`Int8` → [`ElementType::I8`], which the
//!   engine widens; `Float` → `F32`, `Double` → `F64`, …). `read_region` de-interleaves the field
//!   out of the item stride and delivers little-endian bytes, byte-swapping big-endian files.
//! * **Dimensions**: every variable has the single dimension named after the event time field
//!   (the first time field of the time section), which is a [`Role::Coordinate`]. Without a time
//!   section (or when the event time field has no `.tet` form) the dimension is named `index`
//!   (`index_2`, … if a field is already called so) and there is no coordinate variable.
//! * **Variable attributes**: `teafile_field_type` (I32), `teafile_field_type_name` (Text, the
//!   spec's enum name), `teafile_field_offset` (I32). Time fields also get `time_epoch_days` (I64),
//!   `time_ticks_per_day` (I64), `is_event_time` (U8, 1 for the event time, 0 for other time
//!   fields — booleans are 0/1 `U8`, the engine's representation of bool), and when the epoch is
//!   in years 1–9999 a CF `units` text (see below) plus `calendar = "proleptic_gregorian"`. A
//!   renamed field (see below) keeps its stored name in `teafile_field_name`.
//! * **Global attributes**, in this order: `item_name` (Text), `item_size` (I32),
//!   `content_description` (Text), the name/value pairs (int32 → I32, double → F64, text → Text,
//!   uuid → Text in canonical lower-case hyphenated form of the 16 bytes in file order), then
//!   `time_epoch_days` (I64) and `time_ticks_per_day` (I64).
//! * **CF units**: `<unit> since YYYY-MM-DD 00:00:00` where the date is the epoch (days since
//!   0001-01-01, proleptic Gregorian) and the unit is one tick: `days` (1 tick/day), `hours`,
//!   `minutes`, `seconds` (86400), `milliseconds` (86400000), `microseconds`, `nanoseconds`
//!   (864e11); a tick that is a whole number `n > 1` of one of those is written `n <unit>` (e.g.
//!   .NET ticks, 864e9/day: `100 nanoseconds`); any other tick rate is written in the UDUNITS
//!   quotient form `day/<ticks_per_day>`.
//!
//! # Names
//!
//! Field names are used as they are, except that an empty name becomes `field_<n>` (1-based),
//! `/` (the group separator of dataset names) becomes `_`, and a name already taken gets a
//! `_2`, `_3`, … suffix; each change is recorded in the variable's notes. Name/value pairs whose
//! name collides with another global attribute are suffixed the same way (an empty name becomes
//! `name_value_<n>`).
//!
//! # What is refused, skipped or ignored
//!
//! * Refused ([`tet_source::SourceError::Malformed`]): a bad magic, ItemStart inside the header or past the end
//!   of the file, ItemEnd before ItemStart or past the end of the file, a SectionCount or any
//!   other count that cannot fit in the bytes left, sections running past ItemStart, a field
//!   outside the item, a time field offset naming no field, a non-positive item size or ticks per
//!   day, a duplicated standard section, invalid UTF-8 in a string.
//! * Unsupported (an error unless `skip_unsupported`, then listed in [`Source::skipped`]): fields
//!   of type NetDecimal (0x200), custom (≥ 0x1000) or unknown; a name/value pair of unknown kind
//!   (its length is unknown, so it and the pairs after it are lost); an item area with data but no
//!   item section.
//! * Always listed in [`Source::skipped`] but never an error: unknown/custom sections (skipped by
//!   their next-section offset, as the spec asks) and a trailing partial item (the item count is
//!   rounded down, as the spec's formula does).
//! * Ignored: bytes after ItemEnd (preallocated space), padding between sections and ItemStart.
//!   The event time is not checked to be non-decreasing (that would read the whole file).
//!
//! Files are memory-mapped (small ones are read), so a file of any size opens in constant memory;
//! [`open_bytes`] parses a buffer in memory (the fuzzing entry point); [`open_ranged`] reads an
//! object in a store by ranges (the header up to ItemStart at open, then the items a region
//! covers, whole strides, never the whole item area at once). Parsing never panics:
//! every count and offset from the file is checked against the bytes that remain before it is
//! used or allocated for.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use tet_source::byte_source::ByteSource;
use tet_source::mapped::FileBytes;

use tet_source::{
    extension_confidence, AttrValue, Attrs, Confidence, ElementType, Feature, Importer,
    OpenOptions, Part, Request, Result, Role, Skipped, Source, SourceLayout, Variable,
};

mod header;
mod units;

pub use header::{
    field_type_name, field_type_size, item_start, parse_header, parse_header_prefix, ByteOrder,
    FieldInfo, HeaderProblem, ItemInfo, NameValue, SectionInfo, TeaHeader, TimeInfo, FIELD_CUSTOM,
    FIELD_NET_DECIMAL, MAGIC, SECTION_CONTENT, SECTION_ITEM, SECTION_NAME_VALUE, SECTION_TIME,
};
pub use units::{cf_units, date_from_epoch_days, tick_unit};

/// Files smaller than this are read into memory; larger ones are memory-mapped.
const MMAP_THRESHOLD: u64 = 1 << 20;

/// The TeaFile importer plug-in (`tea`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TeaImporter;

impl Importer for TeaImporter {
    fn id(&self) -> &'static str {
        "tea"
    }

    fn name(&self) -> &'static str {
        "TeaFile"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["tea"]
    }

    fn identify(&self, path: &Path, head: &[u8]) -> Confidence {
        if ByteOrder::detect(head).is_some() {
            Confidence::Magic
        } else {
            extension_confidence(path, self.extensions())
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_path(path, options)?))
    }

    fn opens_bytes(&self) -> bool {
        true
    }

    fn open_bytes(
        &self,
        _name: &Path,
        bytes: Arc<dyn ByteSource>,
        options: &OpenOptions,
    ) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_ranged(bytes, options)?))
    }
}

/// Opens a TeaFile on disk (memory-mapped when larger than 1 MiB).
pub fn open_path(path: &Path, options: &OpenOptions) -> Result<TeaSource> {
    let data = FileBytes::open(&mut File::open(path)?, MMAP_THRESHOLD)?;
    TeaSource::new(data, options)
}

/// Opens a TeaFile held in memory (the pure, file-system-free entry point used by fuzzing).
pub fn open_bytes(bytes: impl Into<Vec<u8>>, options: &OpenOptions) -> Result<TeaSource> {
    TeaSource::new(FileBytes::Owned(bytes.into()), options)
}

/// Opens a TeaFile read by ranges from `bytes` (an object in a store): the header (up to
/// ItemStart) at open, then the items each region covers.
pub fn open_ranged(bytes: Arc<dyn ByteSource>, options: &OpenOptions) -> Result<TeaSource> {
    let len = bytes.len();
    let head = bytes.read_vec(0, len.min(header::MANDATORY_HEADER_LEN))?;
    let start = item_start(&head, len)?;
    let head = bytes.read_vec(0, start)?;
    let header = parse_header_prefix(&head, len)?;
    TeaSource::with_header(Data::Ranged(bytes), header, options)
}

/// A TeaFile's bytes: mapped or in memory, or read by ranges.
#[derive(Debug)]
enum Data {
    Local(FileBytes),
    Ranged(Arc<dyn ByteSource>),
}

/// Where one variable's values sit inside an item.
#[derive(Debug, Clone, Copy)]
struct FieldPlan {
    offset: usize,
    size: usize,
}

/// An opened TeaFile.
#[derive(Debug)]
pub struct TeaSource {
    data: Data,
    header: TeaHeader,
    /// Absolute offset of the first item.
    item_start: usize,
    /// Item size (stride) in bytes; 0 when there is no item section.
    item_size: usize,
    swap: bool,
    variables: Vec<Variable>,
    plans: Vec<FieldPlan>,
    global_attrs: Attrs,
    skipped: Vec<Skipped>,
}

fn element_type(field_type: i32) -> Option<ElementType> {
    Some(match field_type {
        1 => ElementType::I8,
        2 => ElementType::I16,
        3 => ElementType::I32,
        4 => ElementType::I64,
        5 => ElementType::U8,
        6 => ElementType::U16,
        7 => ElementType::U32,
        8 => ElementType::U64,
        9 => ElementType::F32,
        10 => ElementType::F64,
        _ => return None,
    })
}

/// `base`, or `base_2`, `base_3`, … : the first not in `taken`.
fn unique_name(base: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_string();
    }
    (2u64..)
        .map(|n| format!("{base}_{n}"))
        .find(|c| !taken.contains(c))
        .unwrap_or_else(|| base.to_string())
}

/// Canonical lower-case hyphenated text of 16 uuid bytes (in the order given).
fn uuid_text(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

/// Skips `name` (with `skip_unsupported`: listed in `skipped`) or fails.
fn unsupported(
    options: &OpenOptions,
    skipped: &mut Vec<Skipped>,
    name: String,
    reason: String,
) -> Result<()> {
    if options.skip_unsupported {
        skipped.push(Skipped { name, reason });
        Ok(())
    } else {
        Err(Feature::DataType.unsupported(format!("{name}: {reason}")))
    }
}

/// The variable name of field `fi` (1-based in messages): its name, or `field_<n>` when empty,
/// with `/` replaced by `_`, made unique among `taken` (and added to it). Each change is noted.
fn field_name(
    fi: usize,
    f: &FieldInfo,
    taken: &mut HashSet<String>,
    notes: &mut Vec<String>,
) -> String {
    let mut base = if f.name.is_empty() {
        notes.push(format!(
            "TeaFile field {} has an empty name; named field_{}",
            fi + 1,
            fi + 1
        ));
        format!("field_{}", fi + 1)
    } else {
        f.name.clone()
    };
    if base.contains('/') {
        let replaced = base.replace('/', "_");
        notes.push(format!(
            "TeaFile field name '{base}' contains '/'; named '{replaced}'"
        ));
        base = replaced;
    }
    let name = unique_name(&base, taken);
    if name != base {
        notes.push(format!(
            "TeaFile field name '{base}' is already taken; named '{name}'"
        ));
    }
    taken.insert(name.clone());
    name
}

/// Adds the time attributes of field `fi` when the time section lists it; the field's role
/// (the first time field, the event time, is the coordinate).
fn time_attrs(header: &TeaHeader, fi: usize, attrs: &mut Attrs, notes: &mut Vec<String>) -> Role {
    let Some(t) = &header.time else {
        return Role::Data;
    };
    let Some(pos) = t.fields.iter().position(|&tf| tf == fi) else {
        return Role::Data;
    };
    attrs.push(("time_epoch_days".into(), AttrValue::I64(vec![t.epoch_days])));
    attrs.push((
        "time_ticks_per_day".into(),
        AttrValue::I64(vec![t.ticks_per_day]),
    ));
    attrs.push((
        "is_event_time".into(),
        AttrValue::U8(vec![u8::from(pos == 0)]),
    ));
    match cf_units(t.epoch_days, t.ticks_per_day) {
        Some(u) => {
            attrs.push(("units".into(), AttrValue::Text(u)));
            attrs.push((
                "calendar".into(),
                AttrValue::Text("proleptic_gregorian".into()),
            ));
        }
        None => notes.push(format!(
            "time epoch {} days after 0001-01-01 is outside years 1-9999: no CF units written",
            t.epoch_days
        )),
    }
    if pos == 0 {
        Role::Coordinate
    } else {
        Role::Data
    }
}

/// The variable of field `fi`, of element type `dtype`; its name is made unique among `taken`.
fn field_variable(
    header: &TeaHeader,
    fi: usize,
    f: &FieldInfo,
    dtype: ElementType,
    taken: &mut HashSet<String>,
) -> Variable {
    let mut notes = Vec::new();
    let name = field_name(fi, f, taken, &mut notes);
    let mut attrs: Attrs = vec![
        (
            "teafile_field_type".into(),
            AttrValue::I32(vec![f.field_type]),
        ),
        (
            "teafile_field_type_name".into(),
            AttrValue::Text(field_type_name(f.field_type).to_string()),
        ),
        (
            "teafile_field_offset".into(),
            AttrValue::I32(vec![f.offset as i32]),
        ),
    ];
    if name != f.name {
        attrs.push(("teafile_field_name".into(), AttrValue::Text(f.name.clone())));
    }
    let role = time_attrs(header, fi, &mut attrs, &mut notes);
    Variable {
        name,
        dtype,
        shape: vec![header.item_count],
        dims: None,
        attrs,
        layout: SourceLayout {
            chunk_shape: None,
            compressed: false,
            filters: Vec::new(),
        },
        role,
        notes,
        facts: Vec::new(),
    }
}

/// One variable per field of a type with a `.tet` form (the others are unsupported), all on
/// the one dimension: the event time field, or `index`.
fn field_variables(
    header: &TeaHeader,
    options: &OpenOptions,
    skipped: &mut Vec<Skipped>,
) -> Result<(Vec<Variable>, Vec<FieldPlan>)> {
    let mut variables: Vec<Variable> = Vec::new();
    let mut plans: Vec<FieldPlan> = Vec::new();
    let mut field_var: Vec<Option<usize>> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    for (fi, f) in header.item.iter().flat_map(|i| i.fields.iter().enumerate()) {
        let Some(dtype) = element_type(f.field_type) else {
            unsupported(
                options,
                skipped,
                format!("field '{}'", f.name),
                format!(
                    "TeaFile field type {} (0x{:x}) at offset {} has no tet form",
                    field_type_name(f.field_type),
                    f.field_type,
                    f.offset
                ),
            )?;
            field_var.push(None);
            continue;
        };
        plans.push(FieldPlan {
            offset: f.offset as usize,
            size: dtype.size(),
        });
        field_var.push(Some(variables.len()));
        variables.push(field_variable(header, fi, f, dtype, &mut taken));
    }
    let time_fields: &[usize] = header.time.as_ref().map_or(&[], |t| &t.fields);
    let event_var = time_fields
        .first()
        .and_then(|&fi| field_var.get(fi).copied().flatten());
    let dim = match event_var {
        Some(v) => variables[v].name.clone(),
        None => unique_name("index", &taken),
    };
    for v in &mut variables {
        v.dims = Some(vec![dim.clone()]);
    }
    Ok((variables, plans))
}

/// What the file holds that is not read: sections this importer does not interpret, and a
/// partial item at the end of the item area.
fn uninterpreted(header: &TeaHeader) -> Vec<Skipped> {
    let mut skipped = Vec::new();
    for s in &header.sections {
        if !matches!(
            s.id,
            SECTION_ITEM | SECTION_TIME | SECTION_CONTENT | SECTION_NAME_VALUE
        ) {
            skipped.push(Skipped {
                name: format!("section 0x{:x}", s.id),
                reason: format!(
                    "{} TeaFile section (id {}, {} bytes at offset {}) is not interpreted",
                    if s.id > 0xffff { "custom" } else { "unknown" },
                    s.id,
                    s.body_len,
                    s.offset
                ),
            });
        }
    }
    if header.item.is_some() && header.trailing_bytes > 0 {
        skipped.push(Skipped {
            name: "trailing partial item".to_string(),
            reason: format!(
                "the item area ends with {} bytes, less than one item of {} bytes; they are not an item",
                header.trailing_bytes,
                header.item.as_ref().map_or(0, |i| i.size)
            ),
        });
    }
    skipped
}

impl TeaSource {
    fn new(data: FileBytes, options: &OpenOptions) -> Result<TeaSource> {
        let header = parse_header(data.bytes())?;
        TeaSource::with_header(Data::Local(data), header, options)
    }

    fn with_header(data: Data, header: TeaHeader, options: &OpenOptions) -> Result<TeaSource> {
        let mut skipped: Vec<Skipped> = Vec::new();
        for p in &header.problems {
            unsupported(options, &mut skipped, p.name.clone(), p.reason.clone())?;
        }
        if header.item.is_none() && header.item_area_len() > 0 {
            unsupported(
                options,
                &mut skipped,
                "item area".to_string(),
                format!(
                    "{} bytes of items but no item section describing their layout",
                    header.item_area_len()
                ),
            )?;
        }
        let (variables, plans) = field_variables(&header, options, &mut skipped)?;
        skipped.extend(uninterpreted(&header));
        let global_attrs = global_attributes(&header);

        let item_start = usize::try_from(header.item_start)
            .map_err(|_| Part::Header.malformed("ItemStart does not fit in memory"))?;
        let item_size = header.item.as_ref().map_or(0, |i| i.size as usize);
        let swap = header.byte_order == ByteOrder::Big;
        Ok(TeaSource {
            data,
            header,
            item_start,
            item_size,
            swap,
            variables,
            plans,
            global_attrs,
            skipped,
        })
    }

    /// The parsed header (byte order, ItemStart/ItemEnd, sections, item layout, time section,
    /// name/value pairs, item count).
    pub fn header(&self) -> &TeaHeader {
        &self.header
    }

    /// Number of whole items.
    pub fn item_count(&self) -> u64 {
        self.header.item_count
    }

    /// The bytes of the items `first .. first + n` (whole strides), bounds-checked: borrowed
    /// from a local file, read for a file read by ranges.
    fn item_bytes(&self, first: u64, n: u64) -> Result<Cow<'_, [u8]>> {
        let outside = || Part::Shape.malformed("item range lies outside the file");
        let stride = self.item_size as u64;
        let (begin, len) = (|| {
            let begin = (self.item_start as u64).checked_add(first.checked_mul(stride)?)?;
            Some((begin, n.checked_mul(stride)?))
        })()
        .ok_or_else(outside)?;
        match &self.data {
            Data::Local(bytes) => {
                let range = (|| {
                    let end = begin.checked_add(len)?;
                    Some(usize::try_from(begin).ok()?..usize::try_from(end).ok()?)
                })();
                range
                    .and_then(|r| bytes.bytes().get(r))
                    .map(Cow::Borrowed)
                    .ok_or_else(outside)
            }
            Data::Ranged(src) => {
                tet_source::byte_source::check_range(src.len(), begin, len)
                    .map_err(|_| outside())?;
                Ok(Cow::Owned(src.read_vec(begin, len)?))
            }
        }
    }
}

fn global_attributes(header: &TeaHeader) -> Attrs {
    let mut head: Attrs = Vec::new();
    if let Some(item) = &header.item {
        head.push(("item_name".into(), AttrValue::Text(item.name.clone())));
        head.push(("item_size".into(), AttrValue::I32(vec![item.size as i32])));
    }
    if let Some(c) = &header.content {
        head.push(("content_description".into(), AttrValue::Text(c.clone())));
    }
    let mut tail: Attrs = Vec::new();
    if let Some(t) = &header.time {
        tail.push(("time_epoch_days".into(), AttrValue::I64(vec![t.epoch_days])));
        tail.push((
            "time_ticks_per_day".into(),
            AttrValue::I64(vec![t.ticks_per_day]),
        ));
    }
    let mut taken: HashSet<String> = head.iter().chain(&tail).map(|(k, _)| k.clone()).collect();
    let mut attrs = head;
    for (i, (name, value)) in header.name_values.iter().enumerate() {
        let base = if name.is_empty() {
            format!("name_value_{}", i + 1)
        } else {
            name.clone()
        };
        let key = unique_name(&base, &taken);
        taken.insert(key.clone());
        let v = match value {
            NameValue::Int32(x) => AttrValue::I32(vec![*x]),
            NameValue::Double(x) => AttrValue::F64(vec![*x]),
            NameValue::Text(s) => AttrValue::Text(s.clone()),
            NameValue::Uuid(b) => AttrValue::Text(uuid_text(b)),
        };
        attrs.push((key, v));
    }
    attrs.extend(tail);
    attrs
}

/// Copies the `N`-byte field at `off` out of every `stride`-byte item of `src` into `out`,
/// reversing its bytes when `swap`.
fn gather<const N: usize>(
    src: &[u8],
    stride: usize,
    off: usize,
    out: &mut [u8],
    swap: bool,
) -> Result<()> {
    let end = off
        .checked_add(N)
        .filter(|&e| e <= stride)
        .ok_or_else(|| Part::Type.malformed("field lies outside the item"))?;
    if stride == 0 || src.len() / stride != out.len() / N {
        return Err(Request::BufferSize {
            expected: (src.len() / stride.max(1)).saturating_mul(N) as u64,
            got: out.len() as u64,
        }
        .into());
    }
    let items = src.chunks_exact(stride).zip(out.chunks_exact_mut(N));
    if swap {
        for (item, dst) in items {
            let mut v = [0u8; N];
            v.copy_from_slice(&item[off..end]);
            v.reverse();
            dst.copy_from_slice(&v);
        }
    } else if stride == N {
        out.copy_from_slice(src);
    } else {
        for (item, dst) in items {
            dst.copy_from_slice(&item[off..end]);
        }
    }
    Ok(())
}

impl Source for TeaSource {
    fn variables(&self) -> &[Variable] {
        &self.variables
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &self.global_attrs
    }

    fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (v, n) = self.region_of(var, start, count, out.len())?;
        let plan = self.plans.get(var).ok_or(Request::NoVariable {
            var,
            count: self.plans.len(),
        })?;
        if n == 0 {
            return Ok(());
        }
        let items = self.item_bytes(start[0], n)?;
        let src: &[u8] = &items;
        let stride = self.item_size;
        let off = plan.offset;
        match plan.size {
            1 => gather::<1>(src, stride, off, out, false),
            2 => gather::<2>(src, stride, off, out, self.swap),
            4 => gather::<4>(src, stride, off, out, self.swap),
            8 => gather::<8>(src, stride, off, out, self.swap),
            _ => Err(Request::NotReadable {
                name: v.name.clone(),
                why: "has an element size the reader does not take",
            }
            .into()),
        }?;
        // The items are copied out: drop their whole pages from the resident set (they stay in
        // the page cache), so resident memory does not grow with the file.
        if let Data::Local(bytes) = &self.data {
            bytes.release(src);
        }
        Ok(())
    }

    fn contiguous_bytes(&self, var: usize) -> Option<&[u8]> {
        let plan = self.plans.get(var)?;
        if matches!(self.data, Data::Ranged(_)) {
            // Never the whole item area at once from a file read by ranges.
            return None;
        }
        if plan.size == self.item_size && (!self.swap || plan.size == 1) {
            match self.item_bytes(0, self.header.item_count).ok()? {
                Cow::Borrowed(b) => Some(b),
                Cow::Owned(_) => None,
            }
        } else {
            None
        }
    }
}
